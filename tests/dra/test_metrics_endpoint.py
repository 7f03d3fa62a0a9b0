"""`gpuslice dra --metrics-port`: /metrics, /healthz and /readyz over real HTTP, from a process and in-process."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuslice.dra import DraSettings, InMemoryResourceApi, prepare_setup
from gpuslice.dra.app import DraApp
from gpuslice.dra.kube import LightkubeResourceApi
from gpuslice.dra.publish import SliceController
from gpuslice.dra.sockets import SocketError
from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.mps import FakeMpsControl
from tests.dra.support import DRIVER, GPU_CLASS, NODE, NODE_SPEC, Node, claim, device_classes, start_plugin
from tests.support.dirs import short_temp_dir
from tests.support.process import clean_env, finish, reap

WAIT_S = 20.0
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(port: int) -> Samples:
    status, text = get(port, "/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_dra_process_serves_its_metrics_health_and_readiness() -> None:
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE) as kubelet:
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        node = Node(root)
        process = start_plugin(node, kubelet, "--metrics-port", "0", "--metrics-address", "127.0.0.1")
        try:
            assert process.stderr is not None
            port = None
            for line in process.stderr:  # the metrics server starts first and logs its port
                if "serving /metrics" in line:
                    port = int(line.rsplit("port ", 1)[1].split()[0])
                    break
            assert port is not None, "no metrics server"
            wait_for(lambda: get(port, "/readyz")[0] == 200, "/readyz: registered and published")
            assert kubelet.watcher.wait_registered(DRIVER, timeout=WAIT_S)
            assert get(port, "/healthz") == (200, "ok\n")
            before = samples(port)
            kubelet.create_claim(claim("one", GPU_CLASS))
            kubelet.admit("pod-one", ["one"])
            assert kubelet.delete_pod("pod-one") == {}
            after = samples(port)
            code, err = finish(process, signal.SIGTERM, timeout=WAIT_S)
        finally:
            reap(process)
    assert code == 0, err[-2000:]
    assert value(before, "gpuslice_dra_claims_total", call="prepare", outcome="ok") is None
    for call in ("prepare", "unprepare"):
        assert value(after, "gpuslice_dra_claims_total", call=call, outcome="ok") == 1
        assert value(after, "gpuslice_dra_claim_seconds_count", call=call) == 1
    # the API client's counters, named as the device plugin's; they move with the claim read and the publishes
    requests = value(after, "gpuslice_kube_api_requests_total")
    assert requests is not None and requests > (value(before, "gpuslice_kube_api_requests_total") or 0)
    assert value(after, "gpuslice_kube_api_retries_total") is not None
    assert value(after, "gpuslice_dra_shared_counters", state="supported") == 1
    assert value(after, "gpuslice_dra_guarded_gpus") == 0
    assert value(after, "gpuslice_dra_registered") == 1
    assert (value(after, "gpuslice_dra_published_devices") or 0) >= 4
    assert (value(after, "gpuslice_dra_slice_publishes_total") or 0) >= 1
    assert value(after, "gpuslice_dra_publisher_restarts_total") == 0


@contextmanager
def running_app(socket_check_s: float = 3600.0) -> Iterator[tuple[DraApp, int, Path]]:
    """A DraApp on an in-memory API with its metrics server on a free port, and no kubelet."""
    with short_temp_dir("gs") as root:
        spec = root / "node.yaml"
        spec.write_text(NODE_SPEC)
        config = root / "config.yaml"
        config.write_text("version: v1\n")
        settings = DraSettings(
            plugins_dir=root / "p",
            registry_dir=root / "r",
            cdi_dir=root / "cdi",
            socket_check_s=socket_check_s,
            metrics_port=0,
            metrics_address="127.0.0.1",
        )
        api = InMemoryResourceApi()
        app = DraApp(prepare_setup("fake", str(spec), str(config)), settings, api, mps_control=FakeMpsControl())
        assert app.metrics_server is not None
        app.start()
        try:
            yield app, app.metrics_server.port, root
        finally:
            app.stop()


class Fatal(BaseException):
    """What no per-attempt handler catches, so the publishing thread dies."""


@pytest.fixture
def publisher_dies_once(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[int] = []
    original = SliceController._attempt

    def dies_once(self: SliceController) -> bool:
        attempts.append(1)
        if len(attempts) == 1:
            raise Fatal
        return original(self)

    monkeypatch.setattr(SliceController, "_attempt", dies_once)
    monkeypatch.setattr("threading.excepthook", lambda args: None)  # the death is the point


@pytest.mark.usefixtures("publisher_dies_once")
def test_healthz_is_red_while_the_publisher_is_dead_and_not_restarted() -> None:
    with running_app() as (app, port, _):
        assert app.plugin.slices is not None
        wait_for(lambda: not app.plugin.slices.alive, "the publisher's death")  # type: ignore[union-attr]
        assert get(port, "/healthz") == (503, "the ResourceSlice publisher stopped\n")
        assert get(port, "/readyz")[0] == 503


@pytest.mark.usefixtures("publisher_dies_once")
def test_a_restarted_publisher_turns_healthz_green_and_is_counted() -> None:
    with running_app(socket_check_s=0.05) as (app, port, _):
        assert app.plugin.slices is not None
        wait_for(lambda: app.plugin.slices.wait_synced(0), "a sync by the restarted publisher")  # type: ignore[union-attr]
        assert get(port, "/healthz") == (200, "ok\n")
        assert value(samples(port), "gpuslice_dra_publisher_restarts_total") == 1


@pytest.mark.parametrize("gone", ["dra.sock", "registration"])
def test_healthz_is_red_when_a_socket_the_kubelet_needs_is_gone(gone: str) -> None:
    with running_app() as (app, port, _):
        assert get(port, "/healthz") == (200, "ok\n")
        path = app.settings.dra_socket if gone == "dra.sock" else app.settings.registration_socket
        path.unlink()
        status, why = get(port, "/healthz")
        assert status == 503 and str(path) in why and "is gone" in why


def test_readyz_waits_for_the_kubelet_and_the_first_sync() -> None:
    with running_app() as (app, port, _):
        assert app.plugin.slices is not None and app.plugin.slices.wait_synced(WAIT_S)
        status, why = get(port, "/readyz")
        assert status == 503 and why.startswith("not registered with the kubelet")
        assert value(samples(port), "gpuslice_dra_registered") == 0
        assert get(port, "/nope")[0] == 404


def test_ready_with_a_kubelet_but_not_before_the_first_sync() -> None:
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE) as kubelet:
        node = Node(root)
        settings = DraSettings(
            registry_dir=kubelet.registry_dir, plugins_dir=kubelet.plugins_dir, cdi_dir=node.cdi, metrics_port=0
        )
        setup = prepare_setup("fake", str(node.spec), str(node.config))
        # an API server that cannot be reached: registered, never synced
        app = DraApp(setup, settings, LightkubeResourceApi("http://127.0.0.1:9"), mps_control=FakeMpsControl())
        assert app.metrics_server is not None
        app.start()
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=WAIT_S)
            port = app.metrics_server.port
            wait_for(lambda: app.plugin.registration.state.registered, "the registration notice")
            assert get(port, "/readyz") == (503, "ResourceSlices not published yet\n")
            assert get(port, "/healthz") == (200, "ok\n")

            # the failed publishes (the first starts at the registration) reach /metrics: errors counted, and
            # each waited its backoff
            def failures_counted() -> bool:
                found = samples(port)
                errors = sum(v for (name, _), v in found.items() if name == "gpuslice_kube_api_errors_total")
                return errors >= 1 and (value(found, "gpuslice_kube_api_retries_total") or 0) >= 1

            wait_for(failures_counted, "a failed publish counted")
        finally:
            app.stop()


def test_without_a_port_nothing_listens_and_no_metrics_are_made() -> None:
    with short_temp_dir("gs") as root:
        spec = root / "node.yaml"
        spec.write_text(NODE_SPEC)
        settings = DraSettings(plugins_dir=root / "p", registry_dir=root / "r", cdi_dir=root / "cdi")
        app = DraApp(prepare_setup("fake", str(spec), None), settings, InMemoryResourceApi())
        assert app.metrics is None and app.metrics_server is None
        assert app.plugin.driver is app.driver  # no metering wrapper


def test_a_busy_metrics_port_fails_the_start_with_one_line() -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy, short_temp_dir("gs") as root:
        port = busy.getsockname()[1]
        spec = root / "node.yaml"
        spec.write_text(NODE_SPEC)
        settings = DraSettings(plugins_dir=root / "p", registry_dir=root / "r", cdi_dir=root / "cdi")
        setup = prepare_setup("fake", str(spec), None)
        with pytest.raises(SocketError, match=f"--metrics-port {port}: cannot listen"):
            DraApp(setup, replace(settings, metrics_port=port, metrics_address="127.0.0.1"), InMemoryResourceApi())
        command = [sys.executable, "-m", "gpuslice", "dra", "--backend", "fake", "--node-spec", str(spec),
                   "--plugins-registry", str(root / "r"), "--plugins-dir", str(root / "p"),
                   "--cdi-spec-dir", str(root / "cdi"), "--kube-api-server", "http://127.0.0.1:9",
                   "--metrics-port", str(port), "--metrics-address", "127.0.0.1"]  # fmt: skip
        done = subprocess.run(command, env=clean_env(), capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"gpuslice dra: error: --metrics-port {port}: cannot listen" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_dra_process_without_a_metrics_port_never_loads_the_prometheus_client() -> None:
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE) as kubelet:
        node = Node(root)
        log = root / "stderr.txt"
        command = [sys.executable, "-X", "importtime", "-m", "gpuslice", "dra", "--backend", "fake",
                   "--node-spec", str(node.spec), "--config-file", str(node.config),
                   "--plugins-registry", str(kubelet.registry_dir), "--plugins-dir", str(kubelet.plugins_dir),
                   "--cdi-spec-dir", str(node.cdi), "--kube-api-server", kubelet.api_url,
                   "--mps-control-command", str(node.mps_program.path), "--resync-interval", "0.2"]  # fmt: skip
        with log.open("w") as err:
            process = subprocess.Popen(command, env=clean_env(), stdout=subprocess.DEVNULL, stderr=err)
            try:
                assert kubelet.watcher.wait_registered(DRIVER, timeout=WAIT_S)
                assert kubelet.wait_for_slices(DRIVER, min_devices=4, timeout=WAIT_S)  # the counters probe ran
                process.send_signal(signal.SIGTERM)
                assert process.wait(timeout=WAIT_S) == 0
            finally:
                reap(process)
        imported = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", log.read_text(), flags=re.MULTILINE)
    assert "gpuslice.dra.counters" in imported  # the check sees the module that makes the metrics
    assert [name for name in imported if name.split(".")[0] == "prometheus_client"] == []
