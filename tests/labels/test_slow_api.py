"""`gpuslice labels` writing NodeFeature objects to an API server that never answers: SIGTERM still ends it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.nodeconfig.kube_server import TOKEN
from tests.nodeconfig.test_plugin_process import kubeconfig
from tests.support.api_server import Exchange, HostileApi, hostile_api
from tests.support.process import WAIT_S, clean_env, finish, reap

STOP_S = 5.0  # the promise is 2 s; the request in flight has a 10 s deadline, so only close() meets this


def silent(ex: Exchange) -> bool:
    ex.closing.wait()
    return ex.drop()


def test_sigterm_ends_a_pass_blocked_on_the_api(tmp_path: Path) -> None:
    with hostile_api(HostileApi(behaviour=silent, token=TOKEN)) as (api, url):
        env = {**clean_env("KUBERNETES_SERVICE_HOST"), "KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", url))}
        args = ["labels", "--backend", "fake", "--node-spec", "preset:h100x4", "--use-node-feature-api"]
        command = [sys.executable, "-m", "gpuslice", *args, "--node-name", "n1", "--sleep-interval", "60s"]
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + WAIT_S
            while api.count() == 0:
                assert time.monotonic() < deadline and process.poll() is None, "the label writer never asked"
                time.sleep(0.05)
            code, err = finish(process, signal.SIGTERM, timeout=STOP_S)
        finally:
            reap(process)
    assert code == 0, err[-2000:]
