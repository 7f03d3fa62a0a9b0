"""`gpuslice demo`: three modes and two proofs over real gRPC, as text and as JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.demo import render_text, run_demo
from tests.packaging.test_locks import pins


def test_walkthrough_covers_three_modes_and_both_proofs_hold() -> None:
    report = run_demo()
    assert [(m.key, m.resource, m.advertised, m.kubelet_allocatable) for m in report.modes] == [
        ("whole", "nvidia.com/gpu", 4, 4),
        ("timeslice", "nvidia.com/gpu", 16, 16),
        ("mig", "nvidia.com/mig-1g.10gb", 28, 28),
    ]
    assert [m.derivation for m in report.modes] == [
        "4 GPUs, one device each = 4",
        "4 GPUs x 4 replicas = 16",
        "4 GPUs x 7 x 1g.10gb = 28",
    ]
    assert [(m.isolation, m.isolation_strength) for m in report.modes] == [
        ("exclusive", "strong"),
        ("none", "none"),
        ("mig", "strong"),
    ]
    for mode in report.modes:
        assert mode.allocation.envs["NVIDIA_VISIBLE_DEVICES"]
        assert "/dev/nvidiactl" in mode.allocation.device_nodes
    assert len(report.proofs) == 2 and report.ok
    assert report.cdi is not None and report.cdi.holds
    assert any(m.endswith(".so." + "550.127.08") for m in report.cdi.mounts)
    assert {"create-symlinks", "update-ldcache"} <= set(report.cdi.hooks)
    assert "allocatable 16 -> 12" in " ".join(report.proofs[1].evidence)

    text = render_text(report)
    for needle in ("1. Whole GPUs", "16 = 4 GPUs x 4 replicas", "nvidia.com/mig-1g.10gb", "[ok]", "5. CDI"):
        assert needle in text
    assert "\x1b[" not in text, "plain text when piped"


def test_cli_json() -> None:
    result = CliRunner().invoke(cli, ["demo", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True
    assert [m["mode"] for m in data["modes"]] == ["whole", "time-slicing", "mig"]


def _normalised(text: str) -> str:
    text = re.sub(r"gs-demo-\w+/", "gs-demo-XXXX/", text)
    return re.sub(r"Done in \d+\.\d s", "Done in N s", text)


def test_docs_walkthrough_shows_the_real_output() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "walkthrough.md").read_text()
    pasted = doc.split("```\n", 2)[1].split("\n```", 1)[0]
    assert _normalised(pasted).strip() == _normalised(render_text(run_demo())).strip()


# Run as a program, the demo records which distributions its modules came from (the stdlib has none).
DISTRIBUTIONS_USED = """
import atexit, importlib.metadata, json, runpy, sys
def report():
    found = importlib.metadata.packages_distributions()
    used = {dist for name in list(sys.modules) for dist in found.get(name.partition(".")[0], ())}
    sys.__stdout__.write("\\n" + json.dumps(sorted(used)) + "\\n")
atexit.register(report)
sys.argv = ["gpuslice", "demo"]
runpy.run_module("gpuslice", run_name="__main__")
"""


def test_the_demo_needs_only_the_demo_lock() -> None:
    """`make demo` installs requirements/demo.lock only (the runtime, the demo extra, the build backend)."""
    done = subprocess.run([sys.executable, "-c", DISTRIBUTIONS_USED], capture_output=True, text=True, check=True)
    used = {name.lower().replace("_", "-") for name in json.loads(done.stdout.strip().splitlines()[-1])}
    assert "grpcio" in used and "gpuslice" in used  # the check sees what it looks for
    # grpc imports grpc_tools where it is installed (for its protos helpers): not needed
    assert used - {"gpuslice", "grpcio-tools"} <= set(pins("demo")), "make demo would lack these"
