"""`gpuslice labels` with per-node configs: the node label picks the config the labels describe."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.labels_cmd import labels
from tests.nodeconfig.helpers import LABEL, NODE
from tests.nodeconfig.kube_server import kube_api
from tests.nodeconfig.test_plugin_process import CONFIGS, kubeconfig

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
