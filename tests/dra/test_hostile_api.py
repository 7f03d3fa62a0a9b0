"""`gpuslice dra` next to a silent or trickling API server: it registers, answers per claim, and stops on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable

import grpc
import pytest

from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.wire import dra_v1_grpc, dra_v1_pb2
from tests.dra.support import DRIVER, NODE, Node
from tests.support.api_server import Exchange, HostileApi, hostile_api
from tests.support.dirs import short_temp_dir
from tests.support.process import clean_env, finish

STOP_S = 5.0  # the promise is 2 s; more is left for a loaded test machine, far less than a hung plugin


def silent(ex: Exchange) -> bool:
    ex.closing.wait()
    return ex.drop()


def trickle(ex: Exchange) -> bool:
    return ex.trickle(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: yes\r\n" * 10_000, 0.2)


@pytest.mark.parametrize("behaviour", [silent, trickle], ids=["silent", "trickle"])
def test_dra_serves_before_the_api_answers_and_stops_at_once(behaviour: Callable[[Exchange], bool]) -> None:
    with (
        short_temp_dir("gs") as root,
        MockDraKubelet(root, NODE) as kubelet,
        hostile_api(HostileApi(behaviour=behaviour, token=None)) as (api, url),
    ):
        node = Node(root)
        command = [
            sys.executable, "-m", "gpuslice", "dra",
            "--backend", "fake",
            "--node-spec", str(node.spec),
            "--config-file", str(node.config),
            "--plugins-registry", str(kubelet.registry_dir),
            "--plugins-dir", str(kubelet.plugins_dir),
            "--cdi-spec-dir", str(node.cdi),
            "--kube-api-server", url,
            "--mps-control-command", str(node.mps_program.path),
        ]  # fmt: skip
        process = subprocess.Popen(
            command, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=20), kubelet.watcher.refused
            assert api.slices == {}  # registered while the API server has answered nothing
            with grpc.insecure_channel(f"unix:{kubelet.plugins_dir / DRIVER / 'dra.sock'}") as channel:
                stub = dra_v1_grpc.DRAPluginStub(channel)  # type: ignore[no-untyped-call]
                claims = [dra_v1_pb2.Claim(namespace="default", uid=f"uid-{n}", name=f"c-{n}") for n in range(3)]
                answer = stub.NodePrepareResources(dra_v1_pb2.NodePrepareResourcesRequest(claims=claims), timeout=45)
            for n in range(3):
                assert "cannot read it from the API server" in answer.claims[f"uid-{n}"].error
        finally:
            code, err = finish(process, signal.SIGTERM, timeout=STOP_S)
    assert code == 0, err[-2000:]
