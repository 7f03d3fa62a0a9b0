"""Device references (GPU/MIG index, GPU/MIG UUID, legacy MIG, optional replica): the one parser."""

from __future__ import annotations

import re
from typing import Literal

from gpuslice.records import record

# NVIDIA's replica annotation: "<physical id>::<n>". An ID is annotated iff it contains the separator.
REPLICA_SEPARATOR = "::"

UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# Patterns as text, compiled by `re` (and cached there) at their first use: compiling them all at import
# cost every plugin start a few tenths of a millisecond, for checks it may never make.
_GPU_UUID = rf"GPU-{UUID_PATTERN}"
_MIG_UUID = rf"MIG-{UUID_PATTERN}"
_LEGACY_MIG = rf"MIG-(GPU-{UUID_PATTERN})/(\d+)/(\d+)"
_GPU_INDEX = r"\d+"
_MIG_INDEX = r"(\d+):(\d+)"

ReferenceKind = Literal["gpu-index", "mig-index", "gpu-uuid", "mig-uuid", "legacy-mig"]


class InvalidDeviceReference(ValueError):
    """Text that is not a device reference; the message quotes it and says which forms are accepted."""


@record
class DeviceReference:
    """A parsed reference to a GPU or MIG device, optionally to one replica of it.

    Accepted forms (those of NVIDIA's config `devices` lists, plus the replica suffix of advertised IDs):
    GPU index `0`, MIG index `0:1`, `GPU-<uuid>`, `MIG-<uuid>`, legacy `MIG-GPU-<uuid>/<gi>/<ci>`,
    each optionally followed by `::<n>`.
    """

    text: str
    kind: ReferenceKind
    gpu_index: int | None = None
    mig_index: int | None = None
    uuid: str | None = None  # GPU or MIG UUID; the parent GPU UUID for the legacy MIG form
    gi: int | None = None
    ci: int | None = None
    replica: int | None = None

    @property
    def is_mig(self) -> bool:
        return self.kind in ("mig-index", "mig-uuid", "legacy-mig")


def parse_device_reference(item: str | int) -> DeviceReference:
    """Parse a device reference (see DeviceReference); raises InvalidDeviceReference naming the text."""
    if isinstance(item, bool) or not isinstance(item, str | int):
        raise InvalidDeviceReference(f"unsupported type for device reference: {item!r} ({type(item).__name__})")
    if isinstance(item, int):
        if item < 0:
            raise InvalidDeviceReference(f"device index must not be negative: {item}")
        return DeviceReference(str(item), "gpu-index", gpu_index=item)
    text = item.strip()
    base, replica = text, None
    if REPLICA_SEPARATOR in text:
        base, _, suffix = text.partition(REPLICA_SEPARATOR)
        if not re.fullmatch(_GPU_INDEX, suffix):
            raise InvalidDeviceReference(f"replica suffix of {item!r} must be '::<n>' with n >= 0")
        replica = int(suffix)
    if re.fullmatch(_GPU_INDEX, base):
        return DeviceReference(text, "gpu-index", gpu_index=int(base), replica=replica)
    if match := re.fullmatch(_MIG_INDEX, base):
        return DeviceReference(text, "mig-index", gpu_index=int(match[1]), mig_index=int(match[2]), replica=replica)
    if re.fullmatch(_GPU_UUID, base):
        return DeviceReference(text, "gpu-uuid", uuid=base, replica=replica)
    if re.fullmatch(_MIG_UUID, base):
        return DeviceReference(text, "mig-uuid", uuid=base, replica=replica)
    if match := re.fullmatch(_LEGACY_MIG, base):
        return DeviceReference(text, "legacy-mig", uuid=match[1], gi=int(match[2]), ci=int(match[3]), replica=replica)
    raise InvalidDeviceReference(
        f"not a device reference: {item!r} (expected an index such as 0 or 0:1, GPU-<uuid>, MIG-<uuid> "
        "or MIG-GPU-<uuid>/<gi>/<ci>, optionally with ::<n>)"
    )
