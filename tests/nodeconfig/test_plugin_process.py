"""`gpuslice plugin` with per-node configs: the node label picks the config, a change re-registers, a bad one
is refused (the old one keeps serving) and the refusal shows in the log and in /metrics."""

from __future__ import annotations

import re
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gpuslice.kubelet import MockKubelet
from tests.nodeconfig.helpers import LABEL, NODE, wait_for
from tests.nodeconfig.kube_server import TOKEN, kube_api
from tests.support.process import WAIT_S, finish, plugin_process, reap

CONFIGS = {
    "whole": "version: v1\n",
    "sliced": "version: v1\nsharing: {timeSlicing: {resources: [{name: nvidia.com/gpu, replicas: 3}]}}\n",
    "broken": "version: v1\nsharing: {timeSlicing: {resources: []}}\n",
}


@pytest.fixture
def kubelet(workdir: Path) -> Iterator[MockKubelet]:
    with MockKubelet(workdir / "dp", dial_timeout_s=5.0, checkpoint_enabled=False) as running:
        yield running


def kubeconfig(path: Path, url: str) -> Path:
    """A kubeconfig for the stand-in API (what lightkube reads outside a cluster)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": url}}],
                "users": [{"name": "test", "user": {"token": TOKEN}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT_S) as response:
        text: str = response.read().decode()
    return text


def test_the_node_label_chooses_and_switches_the_plugin_config(kubelet: MockKubelet, workdir: Path) -> None:
    configs = workdir / "configs"
    configs.mkdir()
    for name, text in CONFIGS.items():
        (configs / name).write_text(text)
    with kube_api(NODE, {LABEL: "whole"}) as (api, url):
        env = {
            "KUBECONFIG": str(kubeconfig(workdir / "kubeconfig", url)),
            "NODE_NAME": NODE,
            "CONFIG_FILE_SRCDIR": str(configs),
            "NO_PROXY": "127.0.0.1",
        }
        args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", str(kubelet.socket_path)]
        process = plugin_process([*args, "--metrics-port", "0", "-v", "1"], env, drop=("KUBERNETES_SERVICE_HOST",))
        try:
            assert process.stderr is not None
            port = None
            for line in process.stderr:
                if "serving /metrics" in line:
                    port = int(line.rsplit("port ", 1)[1].split()[0])
                    break
            assert port is not None
            assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=4, timeout=WAIT_S)
            wait_for(lambda: len(api.watch_requests()) >= 1, "the plugin's watch of its node")
            api.actions.put(("event", "MODIFIED", {LABEL: "sliced"}, 2))
            assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=12, timeout=WAIT_S)
            # the watcher records what serves once the reload has returned, which is after the kubelet saw it
            serving = 'gpuslice_node_config_serving{config="sliced",source="label"} 1.0'
            wait_for(lambda: serving in scrape(port), "the new config in /metrics")
            assert re.search(r"^gpuslice_kube_api_requests_total [1-9]", scrape(port), re.MULTILINE)
            api.actions.put(("event", "MODIFIED", {LABEL: "broken"}, 3))
            refused = 'gpuslice_node_config_refused{reason="invalid_config",wanted="broken"} 1.0'
            wait_for(lambda: refused in scrape(port), "the refusal in /metrics")
            assert kubelet.resource("nvidia.com/gpu").allocatable == 12  # type: ignore[union-attr]
            code, err = finish(process, signal.SIGTERM, timeout=WAIT_S)
        finally:
            reap(process)
    assert code == 0, err
    assert "no resources specified" in err and re.search(r"could not be applied; keeping config 'sliced'", err)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"CONFIG_FILE_SRCDIR": "/nonexistent"}, "NODE_NAME: required with CONFIG_FILE_SRCDIR"),
        ({"CONFIG_FILE_SRCDIR": "/nonexistent", "NODE_NAME": NODE, "CONFIG_FILE": "/c.yaml"}, "exclude each other"),
        # The value rules themselves (NODE_LABEL, FALLBACK_STRATEGIES, ...) are tested in tests/config.
        ({"CONFIG_FILE_SRCDIR": "/x", "NODE_NAME": NODE, "FALLBACK_STRATEGIES": "any"}, "unknown strategy 'any'"),
    ],
)
def test_bad_per_node_settings_stop_the_plugin_with_the_reason(env: dict[str, str], message: str) -> None:
    args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", ""]
    process = plugin_process(args, env)
    code, err = finish(process, timeout=WAIT_S)
    assert code == 2 and message in err, err
