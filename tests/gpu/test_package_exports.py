"""`gpuslice.gpu` exports its model, MIG and UUID names; the units the simulators share load without them."""

from __future__ import annotations

import subprocess
import sys

import gpuslice.gpu as gpu_package
from gpuslice.gpu import mig, model, uuids


def test_every_exported_name_resolves_to_its_home_module() -> None:
    for name in gpu_package.__all__:
        value = getattr(gpu_package, name)
        home = next(module for module in (mig, uuids, model) if hasattr(module, name) or module is model)
        assert value is getattr(home, name), name


def test_units_alone_do_not_load_the_model() -> None:
    code = "import sys, gpuslice.units; print(*(f'gpuslice.gpu.{m}' in sys.modules for m in ('model', 'mig')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
