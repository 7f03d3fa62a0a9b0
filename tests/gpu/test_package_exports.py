"""`gpuslice.gpu` loads its model and MIG modules on first use, and every exported name resolves."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gpuslice.gpu as gpu_package
from gpuslice.gpu import mig, model


def test_every_exported_name_resolves_to_its_home_module() -> None:
    for name in gpu_package.__all__:
        value = getattr(gpu_package, name)
        home = mig if hasattr(mig, name) else model
        assert value is getattr(home, name), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        gpu_package.Nope  # noqa: B018


def test_units_alone_do_not_load_the_model() -> None:
    code = "import sys, gpuslice.gpu.units; print(*(f'gpuslice.gpu.{m}' in sys.modules for m in ('model', 'mig')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
