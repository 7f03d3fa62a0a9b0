"""`gpuslice.gpu` exports its model and MIG names; the units the simulators share load without them."""

from __future__ import annotations

import subprocess
import sys

import gpuslice.gpu as gpu_package
from gpuslice.gpu import mig, model


def test_every_exported_name_resolves_to_its_home_module() -> None:
    for name in gpu_package.__all__:
        value = getattr(gpu_package, name)
        home = mig if hasattr(mig, name) else model
        assert value is getattr(home, name), name


def test_units_alone_do_not_load_the_model() -> None:
    code = "import sys, gpuslice.units; print(*(f'gpuslice.gpu.{m}' in sys.modules for m in ('model', 'mig')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
