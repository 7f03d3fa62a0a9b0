"""The MIG profile catalogue per GPU model, placements, and layout validation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuslice.records import record


class InvalidMigLayout(ValueError):
    """A set of MIG profiles that cannot coexist on one GPU."""


@record
class MigProfile:
    """A GPU-instance profile: its slices, allowed placements and engines."""

    name: str  # e.g. "1g.10gb", "1g.10gb+me"
    profile_id: int  # nvidia-smi GI profile id
    sm_slices: int  # G in "<G>g.<M>gb"
    memory_slices: int  # placement size on the memory-slice axis
    memory_gb: int
    max_count: int
    starts: tuple[int, ...]  # allowed placement starts
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg: int
    ofa: int

    @property
    def resource_suffix(self) -> str:
        """The profile as it appears in NVIDIA resource names and label keys ('+' -> '.')."""
        return self.name.replace("+", ".")

    @property
    def media_extension(self) -> bool:
        return self.name.endswith("+me")

    def placements(self) -> tuple[tuple[int, int], ...]:
        """Every (start, size) this profile may occupy."""
        return tuple((start, self.memory_slices) for start in self.starts)


@record
class MigCatalogue:
    """All MIG profiles of one GPU model."""

    model_key: str
    memory_slices: int
    sm_slices: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile:
        for profile in self.profiles:
            if profile.name == name or profile.resource_suffix == name:
                return profile
        known = ", ".join(p.name for p in self.profiles)
        raise InvalidMigLayout(f"MIG profile {name!r} does not exist on {self.model_key} (known: {known})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)


def _eight_slice(
    key: str,
    gb: tuple[int, int, int, int, int, int],
    sms: tuple[int, int, int, int, int],
) -> MigCatalogue:
    """The A100/H100/H200 geometry: 8 memory slices, 7 SM slices, one naming scheme per memory size.

    gb = memory of (1g, 1g-double, 2g, 3g, 4g, 7g); sms = SMs of (1g, 2g, 3g, 4g, 7g).
    """
    one, one_double, two, three, four, seven = gb
    sm1, sm2, sm3, sm4, sm7 = sms
    every = tuple(range(7))
    return MigCatalogue(
        model_key=key,
        memory_slices=8,
        sm_slices=7,
        profiles=(
            MigProfile(f"1g.{one}gb", 19, 1, 1, one, 7, every, sm1, 1, 0, 0, 0, 0),
            MigProfile(f"1g.{one}gb+me", 20, 1, 1, one, 1, every, sm1, 1, 1, 0, 1, 1),
            MigProfile(f"1g.{one_double}gb", 15, 1, 2, one_double, 4, (0, 2, 4, 6), sm1, 1, 1, 0, 0, 0),
            MigProfile(f"2g.{two}gb", 14, 2, 2, two, 3, (0, 2, 4), sm2, 2, 1, 0, 0, 0),
            MigProfile(f"3g.{three}gb", 9, 3, 4, three, 2, (0, 4), sm3, 3, 2, 0, 0, 0),
            MigProfile(f"4g.{four}gb", 5, 4, 4, four, 1, (0,), sm4, 4, 2, 0, 0, 0),
            MigProfile(f"7g.{seven}gb", 0, 7, 8, seven, 1, (0,), sm7, 7, 5, 0, 1, 1),
        ),
    )


A100_40GB = _eight_slice("A100-40GB", (5, 10, 10, 20, 20, 40), (14, 28, 42, 56, 98))
A100_80GB = _eight_slice("A100-80GB", (10, 20, 20, 40, 40, 80), (14, 28, 42, 56, 98))
H100_80GB = _eight_slice("H100-80GB", (10, 20, 20, 40, 40, 80), (16, 32, 60, 64, 132))
H100_94GB = _eight_slice("H100-94GB", (12, 24, 24, 47, 47, 94), (16, 32, 60, 64, 132))
H200_141GB = _eight_slice("H200-141GB", (18, 35, 35, 71, 71, 141), (16, 32, 60, 64, 132))
A30_24GB = MigCatalogue(
    model_key="A30-24GB",
    memory_slices=4,
    sm_slices=4,
    profiles=(
        MigProfile("1g.6gb", 14, 1, 1, 6, 4, (0, 1, 2, 3), 14, 1, 0, 0, 0, 0),
        MigProfile("1g.6gb+me", 21, 1, 1, 6, 1, (0, 1, 2, 3), 14, 1, 1, 0, 1, 1),
        MigProfile("2g.12gb", 5, 2, 2, 12, 2, (0, 2), 28, 2, 2, 0, 0, 0),
        MigProfile("2g.12gb+me", 6, 2, 2, 12, 1, (0, 2), 28, 2, 2, 0, 1, 1),
        MigProfile("4g.24gb", 0, 4, 4, 24, 1, (0,), 56, 4, 4, 0, 1, 1),
    ),
)

CATALOGUES: tuple[MigCatalogue, ...] = (A100_40GB, A100_80GB, H100_80GB, H100_94GB, H200_141GB, A30_24GB)


def catalogue_for(product_name: str, memory_mib: int) -> MigCatalogue | None:
    """The MIG catalogue of a GPU model, or None when the model has no MIG support."""
    name = product_name.upper()
    if "H200" in name:
        return H200_141GB
    if "H100" in name or "H800" in name:
        return H100_94GB if memory_mib > 90_000 else H100_80GB
    if "A100" in name or "A800" in name:
        return A100_80GB if memory_mib > 60_000 else A100_40GB
    if "A30" in name:
        return A30_24GB
    return None


def assign_placements(
    catalogue: MigCatalogue,
    profile_names: Sequence[str],
    occupied: Iterable[tuple[int, int]] = (),
) -> list[int]:
    """Choose a start slice for each profile so that no two instances overlap.

    Returns the starts in the order of `profile_names`. Raises InvalidMigLayout (naming the
    profiles) when no placement exists or a per-profile cap is exceeded. Backtracks with the
    largest profiles first, which is how the hardware must be filled.
    """
    profiles = [catalogue.profile(name) for name in profile_names]
    counts: dict[str, int] = {}
    for profile in profiles:
        counts[profile.name] = counts.get(profile.name, 0) + 1
        if counts[profile.name] > profile.max_count:
            raise InvalidMigLayout(
                f"at most {profile.max_count} x {profile.name} fit on {catalogue.model_key}; "
                f"asked for {counts[profile.name]}"
            )
    busy = 0
    for start, size in occupied:
        busy |= _mask(start, size)
    order = sorted(range(len(profiles)), key=lambda i: (-profiles[i].memory_slices, i))
    chosen: dict[int, int] = {}

    def place(position: int, used: int) -> bool:
        if position == len(order):
            return True
        idx = order[position]
        profile = profiles[idx]
        for start in profile.starts:
            mask = _mask(start, profile.memory_slices)
            if used & mask:
                continue
            chosen[idx] = start
            if place(position + 1, used | mask):
                return True
        return False

    if not place(0, busy):
        wanted = " + ".join(profile_names) or "(nothing)"
        raise InvalidMigLayout(f"MIG layout {wanted} does not fit on one {catalogue.model_key} GPU")
    return [chosen[i] for i in range(len(profiles))]


def free_placements(catalogue: MigCatalogue, profile: MigProfile, occupied: Iterable[tuple[int, int]]) -> list[int]:
    """Starts at which `profile` could still be created, given occupied (start, size) ranges."""
    busy = 0
    for start, size in occupied:
        busy |= _mask(start, size)
    return [s for s in profile.starts if not busy & _mask(s, profile.memory_slices)]


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start
