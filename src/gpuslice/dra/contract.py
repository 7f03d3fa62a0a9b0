"""`ClaimDriver`: what the DRA kubelet plumbing asks of a driver, and the contract every driver keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gpuslice.dra.claims import ClaimRef


class DeviceAnswer(Protocol):
    """One device handed to a claim's containers, as the kubelet's NodePrepareResources reply names it."""

    @property
    def requests(self) -> Sequence[str]:
        """The claim's request names this device was allocated for."""
        ...

    @property
    def pool(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def cdi_ids(self) -> Sequence[str]:
        """The fully qualified CDI device names the container runtime resolves."""
        ...


class ClaimDriver(Protocol):
    """The driver half of a DRA kubelet plugin; the kubelet half (dra.kubelet_plugin) serves it.

    The plumbing relies on this contract, and every driver keeps it:

    - Idempotent: preparing a claim that is already prepared answers the same devices and CDI names
      and changes nothing; unpreparing a claim that is not prepared (never, or already undone) succeeds.
    - Refuses double use: a device prepared for one claim (or, for MIG, one whose memory slices overlap
      it) is refused to every other claim until that claim is unprepared (a claim with admin access
      apart, as the API allows); concurrent calls cannot race past that rule.
    - CDI names unique per claim UID: every CDI name answered carries the claim's UID, so no two claims
      share a name, and a spec a claim left behind can never serve another one. The one exception is a
      node-wide name every device answers alike (GpuDriver: the base spec with the driver's hooks, which
      no claim owns and which a container must name once, whatever number of claims it has).
    - Unprepare may run in another process: after a restart (crash, upgrade, SIGKILL) a new process
      unprepares what an earlier one prepared, from what that one persisted before answering.
    - Errors are per claim: a claim that cannot be (un)prepared raises ClaimPrepareError naming the
      claim, and nothing of it is left half-done; `budget_s` is the time left for this claim.
    Calls arrive on the kubelet's gRPC threads, several at once.
    """

    def prepare(self, ref: ClaimRef, budget_s: float) -> Sequence[DeviceAnswer]:
        """The claim's devices, prepared (or as already prepared); ClaimPrepareError says why not."""
        ...

    def unprepare(self, ref: ClaimRef, budget_s: float) -> None:
        """Undo exactly what prepare did for the claim; ClaimPrepareError leaves the rest for a retry."""
        ...
