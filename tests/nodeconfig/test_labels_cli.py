"""`gpuslice labels` with per-node configs: the node label picks the config the labels describe."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.labels_cmd import labels
from tests.nodeconfig.helpers import LABEL, NODE, wait_for
from tests.nodeconfig.kube_server import kube_api
from tests.nodeconfig.test_plugin_process import CONFIGS, kubeconfig
from tests.support.process import WAIT_S, clean_env, finish, reap

ARGS = ["--backend", "fake", "--node-spec", "preset:h100x4", "--oneshot", "--output-file", "-", "--no-timestamp"]


@pytest.mark.parametrize(("label", "replicas"), [("sliced", "3"), (None, "1")])
def test_the_label_picks_the_labelled_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, label: str | None, replicas: str
) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    for name, text in CONFIGS.items():
        (configs / name).write_text(text)
    with kube_api(NODE, {LABEL: label} if label else {}) as (_, url):
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig", url)))
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        env = {"CONFIG_FILE_SRCDIR": str(configs), "NODE_NAME": NODE, "DEFAULT_CONFIG": "whole"}
        result = CliRunner().invoke(labels, ARGS, env=env)
    assert result.exit_code == 0, result.output
    assert f"nvidia.com/gpu.replicas={replicas}" in result.output.splitlines()


def test_config_file_and_srcdir_exclude_each_other(tmp_path: Path) -> None:
    env = {"CONFIG_FILE_SRCDIR": str(tmp_path), "NODE_NAME": NODE}
    result = CliRunner().invoke(labels, [*ARGS, "--config-file", str(tmp_path / "c.yaml")], env=env)
    assert result.exit_code != 0
    assert "--config-file (CONFIG_FILE) and --config-file-srcdir (CONFIG_FILE_SRCDIR) exclude each other" in (
        result.output
    )


def test_a_label_change_relabels_a_running_label_writer(tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    for name, text in CONFIGS.items():
        (configs / name).write_text(text)
    output = tmp_path / "features"
    with kube_api(NODE, {LABEL: "whole"}) as (api, url):
        env = {
            **clean_env("KUBERNETES_SERVICE_HOST"),
            "KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", url)),
            "CONFIG_FILE_SRCDIR": str(configs),
            "NODE_NAME": NODE,
        }
        args = ["labels", "--backend", "fake", "--node-spec", "preset:h100x4", "--sleep-interval", "infinite"]
        command = [sys.executable, "-m", "gpuslice", *args, "--output-file", str(output), "--no-timestamp"]
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: output.exists() and "nvidia.com/gpu.replicas=1" in output.read_text(), "first labels")
            wait_for(lambda: len(api.watch_requests()) >= 1, "the label writer's watch of its node")
            api.actions.put(("event", "MODIFIED", {LABEL: "sliced"}, 2))
            wait_for(lambda: "nvidia.com/gpu.replicas=3" in output.read_text(), "labels of the sliced config")
            code, err = finish(process, signal.SIGTERM, timeout=WAIT_S)
        finally:
            reap(process)
    assert code == 0, err
