"""Every simulator's policy names, so that an unknown policy's error lists the others' too."""

from __future__ import annotations


def policies_elsewhere(command: str) -> str:
    """The policies the simulator commands other than `command` (compare, openb, snapshot) run."""
    from gpuslice.fgd.policies import FACTORIES
    from gpuslice.sim.policies import POLICIES

    event = f"sim compare and lab run {', '.join(POLICIES)}"
    openb = f"sim openb and openb-replay run {', '.join(FACTORIES)}"
    snapshot = f"sim snapshot runs first-fit, {', '.join(FACTORIES)}"
    others = {"compare": (openb, snapshot), "openb": (event, snapshot), "snapshot": (event, openb)}[command]
    return "; ".join(others)
