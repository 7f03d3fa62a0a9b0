"""The real-GPU check script, rehearsed on canned fake-NVML nodes (the plugin serves a fake node spec)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "device_check.py"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rehearsal_without_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script()
    assert script.main(["--canned", "a100-mig", "--skip-plugin", "--watch-seconds", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "GPU 0 MIG 0:0: MIG-" in out and "3g.20gb  GI 1 CI 0" in out
    assert "GPU 0 - GPU 1: level single, NVLink 0, NVSwitch False" in out
    assert "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB" in out
    assert "PASS  Xid health events" in out
    assert "SKIP  plugin + mock kubelet: skipped: --skip-plugin" in out


@pytest.mark.slow
def test_rehearsal_allocates_through_the_plugin(capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script()
    assert script.main(["--canned", "dgx-h100", "--watch-seconds", "0.2", "--plugin-timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert "PASS  plugin + mock kubelet: Allocate answered with GPU-" in out
    assert 'key: "NVIDIA_VISIBLE_DEVICES"' in out


def test_no_gpu_is_a_clear_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script()
    assert script.main(["--backend", "hostpath", "--driver-root", str(tmp_path)]) == 1
    assert "no GPU backend could start: backend 'hostpath': no NVIDIA GPU found under" in capsys.readouterr().out
