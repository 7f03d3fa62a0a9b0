"""`devices` list items: the forms NVIDIA takes (checked with the one parser, gpu.refs), nothing more."""

from __future__ import annotations

import pytest

from gpuslice.config import ConfigError, parse_config_text

UUID = "5ad9cf43-2f2b-4c11-8f8e-0a1b2c3d4e5f"
ACCEPTED = ["0", "3", "'0'", "'0:1'", f"GPU-{UUID}", f"MIG-{UUID}", f"MIG-GPU-{UUID}/1/2"]
# The replica suffix is ours (advertised IDs), not a config form; padding is not trimmed; -1 is no index.
REFUSED = ["-1", "'0::1'", "' 0'", "GPU-UUID", "''", "2.0", "true", "'0:'"]


def config(item: str) -> str:
    return f"sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 2\n      devices: [{item}]\n"


@pytest.mark.parametrize("item", ACCEPTED)
def test_accepted(item: str) -> None:
    assert parse_config_text(config(item)).config.sharing.time_slicing is not None


@pytest.mark.parametrize("item", REFUSED)
def test_refused_with_nvidias_text(item: str) -> None:
    with pytest.raises(ConfigError, match="unsupported type for device in devices list"):
        parse_config_text(config(item))
