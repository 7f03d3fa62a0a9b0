"""`gpuslice labels`: options, precedence (flag > env > file), sinks, backends, and SIGHUP in a real process."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gpuslice.cli.labels_cmd import labels
from gpuslice.config import GFD_FLAGS
from gpuslice.labels import (
    FeatureFileSink,
    InMemoryNodeFeatureStore,
    NodeFeatureApiSink,
    NodeFeatureYamlSink,
    StreamSink,
    parse_features,
)
from gpuslice.labels.settings import LabelOptions, choose_sink, effective_config
from tests.support.process import reap

# Variables the command reads; cleared so that the developer's shell cannot change a test's outcome.
_READ = ("BACKEND", "CONFIG_FILE", "GFD_CONFIG_FILE", "NODE_SPEC", "NODE_NAME", "NAMESPACE", "NVIDIA_DRIVER_ROOT")
CLEAN_ENV: dict[str, str | None] = dict.fromkeys(
    (*_READ, "KUBERNETES_SERVICE_HOST", *(name for spec in GFD_FLAGS for name in spec.envvars))
)


def run(*args: str, env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(labels, list(args), env={**CLEAN_ENV, **(env or {})})
    return result.exit_code, result.stdout, result.stderr


def test_oneshot_to_stdout(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO")
    code, out, err = run("--oneshot", "--output-file", "-", "--node-spec", "preset:a100x8")
    assert code == 0, err
    labels = parse_features(out)
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert "nvidia.com/gfd.timestamp" in labels
    assert f"wrote {len(labels)} labels to standard output" in caplog.text  # logs (stderr) never mix with the labels


def test_oneshot_to_a_file_without_timestamp(tmp_path: Path) -> None:
    out = tmp_path / "features.d" / "gfd"
    code, _, err = run("--oneshot", "-o", str(out), "--no-timestamp")
    assert code == 0, err
    labels = parse_features(out.read_text())
    assert labels["nvidia.com/gpu.count"] == "4"
    assert "nvidia.com/gfd.timestamp" not in labels


@pytest.mark.parametrize(
    ("file_value", "env", "flag", "expected"),
    [
        ("single", {}, None, "single"),
        ("single", {"MIG_STRATEGY": "mixed"}, None, "mixed"),
        ("single", {"MIG_STRATEGY": "mixed", "GFD_MIG_STRATEGY": "none"}, None, None),  # GFD_ name first
        ("single", {"MIG_STRATEGY": "mixed"}, "none", None),  # the flag wins
        (None, {}, "mixed", "mixed"),
    ],
)
def test_mig_strategy_precedence(
    tmp_path: Path, file_value: str | None, env: dict[str, str | None], flag: str | None, expected: str | None
) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"version: v1\nflags: {{migStrategy: {file_value}}}\n" if file_value else "version: v1\n")
    args = ["--oneshot", "-o", "-", "--node-spec", "preset:h100x4-mig", "--config-file", str(cfg)]
    if flag:
        args += ["--mig-strategy", flag]
    code, out, err = run(*args, env=env)
    assert code == 0, err
    assert parse_features(out).get("nvidia.com/mig.strategy") == expected


def test_config_file_from_environment_and_bad_value_is_a_clear_error(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 3}]\n")
    code, out, _ = run("--oneshot", "-o", "-", env={"CONFIG_FILE": str(cfg)})
    assert code == 0
    assert parse_features(out)["nvidia.com/gpu.replicas"] == "3"
    code, _, err = run("--oneshot", "-o", "-", "--mig-strategy", "bogus")
    assert code == 2  # a usage mistake: usage and the flag's name, as in every command
    assert "unknown MIG strategy: bogus" in err and "Invalid value for --mig-strategy" in err and "Usage:" in err


def test_sleep_interval_in_the_file_survives_env_overrides(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("version: v1\nflags: {gfd: {sleepInterval: 30s}}\n")
    options = LabelOptions(config_file=str(cfg), environ={"MIG_STRATEGY": "mixed"})
    merged, _ = effective_config(options)
    assert merged.flags.mig_strategy == "mixed"
    assert merged.flags.gfd.sleep_interval == pytest.approx(30.0)
    cfg.write_text("version: v1\nflags: {gfd: {sleepInterval: infinite}}\n")
    assert effective_config(options)[0].flags.gfd.sleep_interval is None


def test_machine_type_file(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    machine = tmp_path / "product_name"
    machine.write_text("PowerEdge XE9680\n")
    code, out, _ = run("--oneshot", "-o", "-", "--machine-type-file", str(machine))
    assert code == 0
    assert parse_features(out)["nvidia.com/gpu.machine"] == "PowerEdge-XE9680"
    code, out, _ = run("--oneshot", "-o", "-", "--machine-type-file", str(tmp_path / "missing"))
    assert code == 0
    assert parse_features(out)["nvidia.com/gpu.machine"] == "unknown"
    assert "Error getting machine type" in caplog.text


def test_node_feature_yaml_on_stdout() -> None:
    code, out, err = run("--oneshot", "--node-feature", "yaml", "--node-name", "worker-7", "--namespace", "nfd")
    assert code == 0, err
    obj = yaml.safe_load(out)
    assert obj["kind"] == "NodeFeature"
    assert obj["metadata"]["name"] == "nvidia-features-for-worker-7"
    assert obj["metadata"]["namespace"] == "nfd"
    assert obj["spec"]["labels"]["nvidia.com/gpu.count"] == "4"


def test_hostpath_backend_with_nothing_found(tmp_path: Path) -> None:
    args = ["--oneshot", "-o", "-", "--backend", "hostpath", "--driver-root", str(tmp_path)]
    code, out, _ = run(*args, "--no-fail-on-init-error")
    assert code == 0
    assert list(parse_features(out)) == ["nvidia.com/gfd.timestamp"]  # GFD labels a GPU-less node so
    code, _, err = run(*args)
    assert code == 1
    assert "no NVIDIA GPU found" in err


def test_bad_node_spec_is_a_clear_error() -> None:
    code, _, err = run("--oneshot", "-o", "-", "--node-spec", "preset:nope")
    assert code == 2
    assert "unknown preset 'nope'" in err and "Invalid value for --node-spec" in err


def choose(config_text: str, **options: object) -> object:
    from tests.labels.helpers import config

    stdout = io.StringIO()
    opts = LabelOptions(stdout=stdout, store_factory=InMemoryNodeFeatureStore, **options)  # type: ignore[arg-type]
    return choose_sink(config(config_text), opts, "node-a")


@pytest.mark.parametrize(
    ("config_text", "options", "kind"),
    [
        ("", {"running_in_cluster": False}, FeatureFileSink),
        ("", {"running_in_cluster": True}, NodeFeatureApiSink),  # NVIDIA's default inside a cluster
        ("flags: {gfd: {outputFile: /x/gfd}}", {"running_in_cluster": True}, FeatureFileSink),  # explicit file wins
        ("flags: {useNodeFeatureAPI: false}", {"running_in_cluster": True}, FeatureFileSink),
        ("flags: {useNodeFeatureAPI: true}", {"running_in_cluster": False}, NodeFeatureApiSink),
        ("", {"running_in_cluster": False, "node_feature": "apply"}, NodeFeatureApiSink),
        ("", {"running_in_cluster": True, "node_feature": "yaml"}, NodeFeatureYamlSink),
        ("flags: {gfd: {outputFile: '-'}}", {"running_in_cluster": False}, StreamSink),
        ("flags: {gfd: {outputFile: ''}}", {"running_in_cluster": False}, StreamSink),
    ],
)
def test_sink_choice(config_text: str, options: dict[str, object], kind: type) -> None:
    assert isinstance(choose(config_text, **options), kind)


def labels_process(*args: str) -> subprocess.Popen[bytes]:
    """`python -m gpuslice labels ARGS` in a real process, without the variables the command reads."""
    env = {key: value for key, value in os.environ.items() if key not in CLEAN_ENV}
    return subprocess.Popen([sys.executable, "-m", "gpuslice", "labels", *args], env=env, stderr=subprocess.PIPE)


def _wait_for(path: Path, predicate: object, process: subprocess.Popen[bytes], deadline: float = 30) -> dict[str, str]:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        if path.exists():
            labels = parse_features(path.read_text())
            if callable(predicate) and predicate(labels):
                return labels
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached the expected state")


def test_sighup_reloads_the_config_in_a_real_process(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    out = tmp_path / "gfd"
    cfg.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 4}]\n")
    process = labels_process("--config-file", str(cfg), "-o", str(out), "--sleep-interval", "1h")
    try:
        _wait_for(out, lambda labels: labels.get("nvidia.com/gpu.replicas") == "4", process)
        cfg.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: gpu, replicas: 8}]\n")
        process.send_signal(signal.SIGHUP)
        labels = _wait_for(out, lambda labels: labels.get("nvidia.com/gpu.replicas") == "8", process)
        assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert not out.exists()  # a periodic labeller takes its file away on exit, as GFD does
    finally:
        reap(process)
        if process.stderr:
            process.stderr.close()


def test_without_a_backend_factory_only_the_fake_backend_is_available() -> None:
    from gpuslice.labels.settings import load_settings

    with pytest.raises(ValueError, match="backend 'nvml' is not available here"):
        load_settings(LabelOptions(backend="nvml"))
    settings = load_settings(LabelOptions(node_spec="preset:dgx-h100", running_in_cluster=False, stdout=io.StringIO()))
    assert len(settings.discover().gpus) == 8


def test_a_short_interval_relabels_periodically_in_a_real_process(tmp_path: Path) -> None:
    out = tmp_path / "gfd"
    process = labels_process("-o", str(out), "--sleep-interval", "20ms", "-q")
    try:
        _wait_for(out, lambda labels: labels.get("nvidia.com/gpu.count") == "4", process)
        first = out.stat()
        versions = {(first.st_ino, first.st_mtime_ns)}  # inodes may be reused, so the write time counts too
        end = time.monotonic() + 30
        while len(versions) < 3 and time.monotonic() < end:
            with contextlib.suppress(FileNotFoundError):
                current = out.stat()
                versions.add((current.st_ino, current.st_mtime_ns))
            time.sleep(0.005)
        assert len(versions) >= 3  # each pass renamed a freshly written file into place
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert not out.exists()
    finally:
        reap(process)
        if process.stderr:
            process.stderr.close()
