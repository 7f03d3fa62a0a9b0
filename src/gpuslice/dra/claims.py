"""A ResourceClaim's allocation for our driver: its devices and, per request, the opaque config that applies."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuslice.records import record

if TYPE_CHECKING:  # the opaque models (pydantic) load with the first config of ours a claim carries
    from gpuslice.dra.opaque import DeviceConfig

MAX_RESULTS = 32  # AllocationResultsMaxSize
MAX_ALLOCATION_CONFIGS = 64  # 32 from the class and 32 from the claim
# Kubelet's Claim fields: a namespace is a DNS label, a name a DNS subdomain, a UID at most 128 characters.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_UID = re.compile(r"[A-Za-z0-9-]{1,128}")


class ClaimPrepareError(RuntimeError):
    """Why one claim cannot be prepared or unprepared; the kubelet shows it in the pod's events."""


@record
class ClaimRef:
    """What the kubelet sends for a claim."""

    namespace: str
    name: str
    uid: str

    def check(self) -> None:
        """ClaimPrepareError unless every field has the shape the API server gives it."""
        for field, pattern, value in (("namespace", _NAMESPACE, self.namespace), ("name", _NAME, self.name)):
            if not pattern.fullmatch(value):
                raise ClaimPrepareError(f"claim {field} {value[:64]!r} is not a valid Kubernetes name")
        if not _UID.fullmatch(self.uid):
            raise ClaimPrepareError(f"claim uid {self.uid[:64]!r} is not a valid UID")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


@record
class AllocatedDevice:
    """One allocation result of our driver, with the config that applies to it (None: no config)."""

    request: str  # the claim's request name (a `<request>/<subrequest>` result is stripped to the request)
    pool: str
    device: str
    admin_access: bool
    config: DeviceConfig | None


def allocation_for(claim: Mapping[str, Any], ref: ClaimRef, driver: str) -> tuple[AllocatedDevice, ...]:
    """Our driver's devices in the claim's allocation; ClaimPrepareError naming the claim when it cannot be used."""
    metadata = claim.get("metadata") or {}
    if metadata.get("uid") != ref.uid:
        raise ClaimPrepareError(
            f"claim {ref}: the API has a claim of that name with uid {metadata.get('uid')!r}: replaced"
        )
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        raise ClaimPrepareError(f"claim {ref} is not allocated")
    devices = allocation.get("devices") or {}
    results = _list(devices.get("results"), "status.allocation.devices.results", MAX_RESULTS, ref)
    configs = _list(devices.get("config"), "status.allocation.devices.config", MAX_ALLOCATION_CONFIGS, ref)
    decoded = _decode_configs(configs, driver, ref)
    found = []
    for position, result in enumerate(results):
        if not isinstance(result, Mapping) or result.get("driver") != driver:
            continue
        where = f"claim {ref}: results[{position}]"
        request_path, pool, device = result.get("request"), result.get("pool"), result.get("device")
        if not all(isinstance(value, str) and value for value in (request_path, pool, device)):
            raise ClaimPrepareError(f"{where}: request, pool and device are required")
        request = str(request_path).split("/", 1)[0]
        found.append(
            AllocatedDevice(
                request, str(pool), str(device), bool(result.get("adminAccess")), _config_for(decoded, request)
            )
        )
    if not found:
        raise ClaimPrepareError(f"claim {ref} has no device of driver {driver}")
    return tuple(found)


def _list(value: Any, where: str, limit: int, ref: ClaimRef) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ClaimPrepareError(f"claim {ref}: {where} must be a list")
    if len(value) > limit:
        raise ClaimPrepareError(f"claim {ref}: {where} has {len(value)} entries; at most {limit} are allowed")
    return value


def _decode_configs(
    configs: Sequence[Any], driver: str, ref: ClaimRef
) -> list[tuple[int, tuple[str, ...], DeviceConfig]]:
    """Our configs as (precedence, requests, config): class configs rank below claim configs, later above earlier."""
    decoded = []
    for position, entry in enumerate(configs):
        opaque = entry.get("opaque") if isinstance(entry, Mapping) else None
        if not isinstance(opaque, Mapping) or opaque.get("driver") != driver:
            continue  # another driver's config, or a kind of config we do not know: not ours to judge
        source = entry.get("source", "FromClaim")
        rank = (1 if source == "FromClaim" else 0) * 1000 + position
        requests = entry.get("requests") or []
        # imported here: pydantic and the models cost a DRA start ~100 ms, and a claim without a config of
        # ours needs neither
        from gpuslice.dra.opaque import ConfigDecodeError, decode_parameters

        try:
            config = decode_parameters(opaque.get("parameters"))
        except ConfigDecodeError as exc:
            raise ClaimPrepareError(f"claim {ref}: config[{position}] ({source}): {exc}") from exc
        decoded.append((rank, tuple(str(request) for request in requests), config))
    return sorted(decoded, key=lambda item: item[0])


def _config_for(decoded: Sequence[tuple[int, tuple[str, ...], DeviceConfig]], request: str) -> DeviceConfig | None:
    chosen = None
    for _, requests, config in decoded:
        if not requests or request in requests or any(r.split("/", 1)[0] == request for r in requests):
            chosen = config
    return chosen
