"""Observability: Prometheus /metrics, /healthz and /readyz over HTTP, and the klog / JSON log formats."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuslice.kubelet import MockKubelet
from gpuslice.logs import JsonFormatter, KlogFormatter, configure_logging
from gpuslice.plugin.lifecycle import PluginRuntime
from tests.plugin.rpc import allocate_request
from tests.support.plugin import build_app
from tests.support.stack import TIME_SLICED_4, Stack, start_stack

WAIT_S = 10.0


def get(stack: Stack | PluginRuntime, path: str) -> tuple[int, str]:
    runtime = stack if isinstance(stack, PluginRuntime) else stack.runtime
    assert runtime.metrics_server is not None
    url = f"http://127.0.0.1:{runtime.metrics_server.port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=WAIT_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(stack: Stack | PluginRuntime) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = get(stack, "/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_cover_registrations_devices_allocations_health_and_streams(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir, config=TIME_SLICED_4, metrics_port=0)
    stacks.append(stack)
    gpu = "nvidia.com/gpu"
    stack.kubelet.admit_one("pod-a", gpu, 2)
    with pytest.raises(grpc.RpcError):
        stack.kubelet.plugin_stub(gpu).Allocate(allocate_request(["GPU-unknown::0"]), timeout=WAIT_S)
    broken = stack.node.gpus[0].uuid
    stack.write(f"{broken} 13", f"{broken} 79")
    assert stack.wait_health(stack.expected_health({broken}))
    found = samples(stack)
    assert value(found, "gpuslice_plugin_registrations_total", resource=gpu) == 1
    assert value(found, "gpuslice_plugin_advertised_devices", resource=gpu) == 16
    assert value(found, "gpuslice_plugin_healthy_devices", resource=gpu) == 12
    assert value(found, "gpuslice_plugin_allocations_total", resource=gpu) == 1
    assert sum(v for (name, _), v in found.items() if name == "gpuslice_plugin_allocation_errors_total") == 1
    assert value(found, "gpuslice_plugin_allocate_seconds_count", resource=gpu) == 1
    assert value(found, "gpuslice_plugin_health_events_total", xid="79", outcome="marked_unhealthy") == 1
    assert value(found, "gpuslice_plugin_health_events_total", xid="13", outcome="ignored") == 1
    assert value(found, "gpuslice_plugin_list_and_watch_streams", resource=gpu) == 1


def test_healthy_devices_leave_out_placements_that_a_held_mig_instance_blocks(
    kubelet: MockKubelet, workdir: Path
) -> None:
    spec = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0", "mig": []}
    app = build_app(
        workdir,
        "flags: {migStrategy: dynamic}",
        kubelet,
        backend={"name": "metrics-dyn", "gpus": [spec]},
        metrics_port=0,
        release_poll_s=0.05,
    )
    runtime = app.runtime
    app.start()
    try:
        assert kubelet.wait_for(resource="nvidia.com/mig-7g.80gb", allocatable=1, timeout=WAIT_S)
        kubelet.admit_one("big", "nvidia.com/mig-3g.40gb")
        found = samples(runtime)
    finally:
        app.stop()
    expected = {"mig-1g.10gb": (7, 3), "mig-1g.20gb": (4, 2), "mig-3g.40gb": (2, 2), "mig-7g.80gb": (1, 0)}
    for short, (advertised, healthy) in expected.items():
        resource = f"nvidia.com/{short}"
        assert value(found, "gpuslice_plugin_advertised_devices", resource=resource) == advertised
        assert value(found, "gpuslice_plugin_healthy_devices", resource=resource) == healthy, resource


def test_kubelet_restart_is_counted(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir, metrics_port=0)
    stacks.append(stack)
    stack.kubelet.restart()
    assert stack.wait_registered(min_registrations=2)
    assert stack.runtime.watcher is not None and stack.runtime.watcher.wait_registered(WAIT_S)
    found = samples(stack)
    assert value(found, "gpuslice_plugin_registrations_total", resource="nvidia.com/gpu") == 2
    assert value(found, "gpuslice_plugin_kubelet_restarts_total") == 1


def test_health_and_readiness_endpoints(stacks: list[Stack], workdir: Path) -> None:
    kubelet = MockKubelet(workdir / "dp", dial_timeout_s=2.0, checkpoint_enabled=False)
    stack = start_stack(workdir, kubelet=kubelet, metrics_port=0, wait=False)
    stacks.append(stack)
    assert get(stack, "/healthz") == (200, "ok\n")
    status, text = get(stack, "/readyz")
    assert status == 503 and "not registered with the kubelet" in text
    assert value(samples(stack), "gpuslice_plugin_registration_failures_total") >= 1
    kubelet.start()
    assert stack.wait_registered()
    assert stack.runtime.watcher is not None and stack.runtime.watcher.wait_registered(WAIT_S)
    assert get(stack, "/readyz") == (200, "ok\n")
    assert get(stack, "/nothing")[0] == 404


def record(message: str, level: int = logging.INFO, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("boom")
        except ValueError:
            info = sys.exc_info()
    item = logging.LogRecord("gpuslice.plugin", level, "/src/gpuslice/plugin/run.py", 42, message, (), info)
    item.created = 1_764_407_521.123456  # 2025-11-29 09:12:01.123456 UTC
    item.process = 12345
    return item


@pytest.mark.parametrize(
    ("level", "letter"),
    [(logging.DEBUG, "I"), (logging.INFO, "I"), (logging.WARNING, "W"), (logging.ERROR, "E"), (logging.CRITICAL, "F")],
)
def test_klog_line_format(level: int, letter: str) -> None:
    line = KlogFormatter(utc=True).format(record("plugin ready", level))
    assert line == f"{letter}1129 09:12:01.123456   12345 run.py:42] plugin ready"


def test_klog_line_carries_the_traceback() -> None:
    text = KlogFormatter(utc=True).format(record("failed", logging.ERROR, exc=True))
    assert text.startswith("E1129 09:12:01.123456   12345 run.py:42] failed\n\tTraceback")
    assert text.endswith("\n\tValueError: boom")  # indented: no traceback line can pass for a log entry


def test_json_line_format() -> None:
    entry = json.loads(JsonFormatter(node_name="node-1").format(record("plugin ready", logging.WARNING)))
    assert entry == {
        "ts": "2025-11-29T09:12:01.123456Z",
        "level": "warning",
        "logger": "gpuslice.plugin",
        "caller": "run.py:42",
        "msg": "plugin ready",
        "pid": 12345,
        "node": "node-1",
    }


def test_configure_logging_verbosity_and_format() -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        configure_logging("klog", verbosity=1, stream=stream)
        logging.getLogger("gpuslice.test").debug("shown at -v 1")
        configure_logging("json", verbosity=0, stream=stream)
        logging.getLogger("gpuslice.test").debug("hidden at -v 0")
        logging.getLogger("gpuslice.test").info("as json")
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)
    first, second = stream.getvalue().splitlines()
    assert re.fullmatch(r"I\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ test_metrics\.py:\d+\] shown at -v 1", first)
    assert json.loads(second)["msg"] == "as json"


def test_unknown_log_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        configure_logging("xml")  # type: ignore[arg-type]
