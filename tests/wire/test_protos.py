"""The committed generated code matches protos/, and our messages encode like the kubelet's."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from gpuslice.wire import deviceplugin_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]


def _load_generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "tools" / "gen_protos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_protos"] = module
    spec.loader.exec_module(module)
    return module


def test_committed_generated_code_is_not_stale(tmp_path: Path) -> None:
    generator = _load_generator()
    generator.generate(tmp_path)
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert fresh, "the generator produced nothing"
    for relative in fresh:
        committed = ROOT / "src" / relative
        assert committed.exists(), f"{relative} is not committed; run `make protos`"
        assert committed.read_bytes() == (tmp_path / relative).read_bytes(), f"{relative} is stale; run `make protos`"


@pytest.mark.parametrize(
    ("message", "expected_hex"),
    [
        (
            pb.Device(ID="GPU-0", health="Healthy", topology=pb.TopologyInfo(nodes=[pb.NUMANode(ID=1)])),
            "0a054750552d3012074865616c7468791a040a020801",
        ),
        (
            pb.RegisterRequest(
                version="v1beta1",
                endpoint="x.sock",
                resource_name="example.com/foo",
                options=pb.DevicePluginOptions(get_preferred_allocation_available=True),
            ),
            "0a07763162657461311206782e736f636b1a0f6578616d706c652e636f6d2f666f6f22021001",
        ),
    ],
)
def test_encoding_matches_the_kubelet_vectors(message: object, expected_hex: str) -> None:
    assert message.SerializeToString().hex() == expected_hex  # type: ignore[attr-defined]


def test_method_paths_use_the_v1beta1_package() -> None:
    service = pb.DESCRIPTOR.services_by_name["DevicePlugin"]
    assert service.full_name == "v1beta1.DevicePlugin"
    assert {m.name for m in service.methods} == {
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    }
    assert pb.DESCRIPTOR.services_by_name["Registration"].full_name == "v1beta1.Registration"
