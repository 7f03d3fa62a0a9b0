"""`gpuslice kubelet`: run the mock kubelet in the foreground until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

import click

from gpuslice.kubelet import AdmissionError, MockKubelet
from gpuslice.kubelet.registration import DIAL_TIMEOUT_S
from gpuslice.logs import configure_logging

_WAIT_SLICE_S = 0.5


def parse_admit(spec: str) -> tuple[str, str, int]:
    """`pod=resource:N` (N defaults to 1) -> (pod, resource, N)."""
    pod, sep, rest = spec.partition("=")
    if not sep or not pod or not rest:
        raise click.BadParameter(f"{spec!r}: expected pod=resource:N, e.g. train=nvidia.com/gpu:2")
    resource, _, count_text = rest.rpartition(":") if ":" in rest else (rest, "", "1")
    try:
        count = int(count_text)
    except ValueError:
        raise click.BadParameter(f"{spec!r}: the count {count_text!r} is not a whole number") from None
    if not resource:
        raise click.BadParameter(f"{spec!r}: the resource name is missing")
    if count < 1:
        raise click.BadParameter(f"{spec!r}: the count must be at least 1")
    return pod, resource, count


def _admit_when_free(mock: MockKubelet, stop: threading.Event, spec: tuple[str, str, int], timeout_s: float) -> None:
    pod, resource, count = spec
    waited = 0.0
    while not stop.is_set() and waited < timeout_s:
        views_ready = mock.wait_for(
            lambda views: resource in views and len(views[resource].free) >= count, timeout=_WAIT_SLICE_S
        )
        if views_ready:
            break
        waited += _WAIT_SLICE_S
    if stop.is_set():
        return
    try:
        admission = mock.admit(pod, {resource: count})
    except AdmissionError as error:
        click.echo(f"rejected {pod}: {error.reason}: {error.message}")
        return
    allocation = admission.allocations[resource]
    envs = " ".join(f"{name}={value}" for name, value in sorted(allocation.envs.items()))
    nodes = " ".join(host for _, host, _ in allocation.device_nodes)
    click.echo(f"admitted {pod}: {resource} x{count} -> {', '.join(allocation.device_ids)}")
    click.echo(f"  env: {envs or '-'}")
    click.echo(f"  device nodes: {nodes or '-'}")


@click.command()
@click.option(
    "--dir",
    "device_plugin_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Device-plugin directory; kubelet.sock is served here and stale sockets in it are removed.",
)
@click.option(
    "--pod-resources-socket",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="pod-resources socket [default: ../pod-resources/kubelet.sock beside a 'device-plugins' dir, "
    "else DIR/pod-resources/kubelet.sock].",
)
@click.option(
    "--admit",
    "admit_specs",
    multiple=True,
    metavar="POD=RESOURCE:N",
    help="Admit a pod once N devices of RESOURCE are free (repeatable).",
)
@click.option("--admit-timeout", type=float, default=60.0, show_default=True, help="Seconds to wait per --admit.")
@click.option("--dial-timeout", type=float, default=DIAL_TIMEOUT_S, show_default=True, help="Register dial-back wait.")
@click.option("--no-checkpoint", is_flag=True, help="Do not read or write kubelet_internal_checkpoint.")
@click.option("--verbose/--quiet", default=True, help="Log registrations and ListAndWatch updates to stderr.")
def kubelet(
    device_plugin_dir: Path,
    pod_resources_socket: Path | None,
    admit_specs: tuple[str, ...],
    admit_timeout: float,
    dial_timeout: float,
    no_checkpoint: bool,
    verbose: bool,
) -> None:
    """Run the mock kubelet: Registration on DIR/kubelet.sock, pod-resources, pod admission."""
    specs = [parse_admit(spec) for spec in admit_specs]
    configure_logging(level=logging.INFO if verbose else logging.WARNING)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    mock = MockKubelet(
        device_plugin_dir, pod_resources_socket, dial_timeout_s=dial_timeout, checkpoint_enabled=not no_checkpoint
    )
    try:
        mock.start()
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot start the mock kubelet: {exc}") from exc
    try:
        click.echo(f"mock kubelet ready: {mock.socket_path} (pod-resources {mock.pod_resources_socket})")
        for spec in specs:
            _admit_when_free(mock, stop, spec, admit_timeout)
        stop.wait()
    finally:
        mock.stop()
    click.echo("mock kubelet stopped")
