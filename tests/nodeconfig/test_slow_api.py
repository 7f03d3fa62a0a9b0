"""`gpuslice plugin` with per-node configs and an API server that does not answer: it registers with the default
config after a bounded wait, switches when the label arrives, and stops on SIGTERM."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from gpuslice.kubelet import MockKubelet
from tests.nodeconfig.helpers import LABEL, NODE
from tests.nodeconfig.kube_server import TOKEN
from tests.nodeconfig.test_plugin_process import CONFIGS, kubeconfig, kubelet  # noqa: F401 (a fixture)
from tests.support.api_server import Exchange, HostileApi, hostile_api
from tests.support.process import WAIT_S, finish, plugin_process, reap

STOP_S = 5.0  # the promise is 2 s; room for a loaded machine, none for a plugin waiting on the API


@pytest.mark.parametrize("heals", [True, False], ids=["the API heals", "SIGTERM while the API is silent"])
def test_a_silent_api_server_delays_nothing(kubelet: MockKubelet, workdir: Path, heals: bool) -> None:  # noqa: F811
    configs = workdir / "configs"
    configs.mkdir()
    for name, text in CONFIGS.items():
        (configs / name).write_text(text)
    (configs / "loop").symlink_to("loop")  # a bad entry costs a warning, not the start
    healed = threading.Event()

    def silent_until_healed(ex: Exchange) -> bool:
        healed.wait()
        return False  # then the honest store answers (the node, labelled "sliced")

    state = HostileApi(behaviour=silent_until_healed, token=TOKEN, nodes={NODE: {LABEL: "sliced"}})
    with hostile_api(state) as (api, url):
        env = {
            "KUBECONFIG": str(kubeconfig(workdir / "kubeconfig", url)),
            "NODE_NAME": NODE,
            "CONFIG_FILE_SRCDIR": str(configs),
            "DEFAULT_CONFIG": "whole",
        }
        args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", str(kubelet.socket_path)]
        process = plugin_process(args, env, drop=("KUBERNETES_SERVICE_HOST",))
        try:
            assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=4, timeout=WAIT_S)
            assert api.count() >= 1  # it asked, got nothing, and started with DEFAULT_CONFIG
            if heals:
                healed.set()
                assert kubelet.wait_for(resource="nvidia.com/gpu", allocatable=12, timeout=WAIT_S)
            code, err = finish(process, signal.SIGTERM, timeout=STOP_S)
        finally:
            healed.set()
            reap(process)
    assert code == 0, err[-2000:]
    assert "skipping 'loop'" in err
