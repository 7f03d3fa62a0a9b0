"""The topology model: how every pair of GPUs on a node is connected, and NVIDIA's pair score for it."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from itertools import combinations

from gpuslice.gpu import Gpu
from gpuslice.records import record

# go-gpuallocator adds this many points per direct NVLink between two GPUs.
NVLINK_POINTS = 100


class PcieLevel(enum.Enum):
    """NVML's closest common PCIe ancestor of two GPUs, closest first (values are the spec spelling)."""

    INTERNAL = "internal"
    SINGLE = "single"
    MULTIPLE = "multiple"
    HOSTBRIDGE = "hostbridge"
    NODE = "node"
    SYSTEM = "system"

    @property
    def score(self) -> int:
        """go-gpuallocator's points for this level (SameBoard 60 ... CrossCPU 10)."""
        return _LEVEL_SCORES[self]

    @property
    def abbreviation(self) -> str:
        """The `nvidia-smi topo -m` spelling (INT, PIX, PXB, PHB, NODE, SYS)."""
        return _LEVEL_ABBREVIATIONS[self]


_LEVEL_SCORES = {
    PcieLevel.INTERNAL: 60,
    PcieLevel.SINGLE: 50,
    PcieLevel.MULTIPLE: 40,
    PcieLevel.HOSTBRIDGE: 30,
    PcieLevel.NODE: 20,
    PcieLevel.SYSTEM: 10,
}
_LEVEL_ABBREVIATIONS = {
    PcieLevel.INTERNAL: "INT",
    PcieLevel.SINGLE: "PIX",
    PcieLevel.MULTIPLE: "PXB",
    PcieLevel.HOSTBRIDGE: "PHB",
    PcieLevel.NODE: "NODE",
    PcieLevel.SYSTEM: "SYS",
}


@record
class PairLink:
    """How two GPUs reach each other: one PCIe-level record plus, optionally, NVLink (direct or via NVSwitch)."""

    pcie: PcieLevel
    nvlinks: int = 0  # direct NVLink links between the pair; with nvswitch, each GPU's links into the fabric
    nvswitch: bool = False

    def __post_init__(self) -> None:
        if self.nvlinks < 0:
            raise ValueError(f"nvlinks must be >= 0, got {self.nvlinks}")

    @property
    def nvlinked(self) -> bool:
        """True when the pair talks over NVLink, directly or through an NVSwitch fabric."""
        return self.nvswitch or self.nvlinks > 0

    @property
    def score(self) -> int:
        """NVIDIA's pair score. Through an NVSwitch the NVLink's remote end is the switch, not the peer GPU,
        so go-gpuallocator finds no GPU-to-GPU NVLink there and only the PCIe level counts."""
        nvlink_points = 0 if self.nvswitch else NVLINK_POINTS * self.nvlinks
        return self.pcie.score + nvlink_points

    @property
    def label(self) -> str:
        """The `nvidia-smi topo -m` cell: NV<k> when NVLinked (NVS when the switch link count is unknown)."""
        if self.nvlinked:
            return f"NV{self.nvlinks}" if self.nvlinks else "NVS"
        return self.pcie.abbreviation


class UnknownGpuError(ValueError):
    """A GPU reference (index or UUID) that is not part of the topology."""


GpuRef = int | str


@record
class Topology:
    """Pair links of one node's GPUs, keyed by GPU index; every pair of distinct GPUs has exactly one link."""

    gpus: tuple[int, ...]
    links: Mapping[tuple[int, int], PairLink]
    uuids: tuple[str, ...] = ()  # aligned with `gpus` when known
    source: str = ""

    def __post_init__(self) -> None:
        if list(self.gpus) != sorted(set(self.gpus)):
            raise ValueError(f"GPU indices must be distinct and ascending, got {list(self.gpus)}")
        if self.uuids and len(self.uuids) != len(self.gpus):
            raise ValueError(f"{len(self.uuids)} UUIDs for {len(self.gpus)} GPUs")
        expected = set(combinations(self.gpus, 2))
        missing = sorted(expected - set(self.links))
        if missing:
            raise ValueError(f"no link given for GPU pair {missing[0][0]}-{missing[0][1]}")
        extra = sorted(set(self.links) - expected)
        if extra:
            raise ValueError(f"link {extra[0]} is not an ascending pair of this topology's GPUs")

    @classmethod
    def from_gpus(cls, gpus: Sequence[Gpu], links: Mapping[tuple[int, int], PairLink], source: str = "") -> Topology:
        """A topology over discovered GPUs (indices and UUIDs from `gpus`), e.g. with links NVML reported."""
        ordered = sorted(gpus, key=lambda g: g.index)
        return cls(tuple(g.index for g in ordered), dict(links), tuple(g.uuid for g in ordered), source)

    def link(self, a: int, b: int) -> PairLink:
        """The link between GPUs `a` and `b` (in either order)."""
        if a == b:
            raise ValueError(f"GPU {a} has no link to itself")
        try:
            return self.links[(a, b) if a < b else (b, a)]
        except KeyError:
            unknown = a if a not in self.gpus else b
            raise UnknownGpuError(f"GPU {unknown} is not part of this topology") from None

    def pair_score(self, a: int, b: int) -> int:
        """go-gpuallocator's score for the pair; 0 for a GPU with itself."""
        return 0 if a == b else self._score_table[(a, b) if a < b else (b, a)]

    def set_score(self, gpus: Iterable[int]) -> int:
        """Sum of the pair scores of every pair in the set."""
        table = self._score_table
        members = sorted(set(gpus))
        return sum(table[pair] for pair in combinations(members, 2))

    def score_matrix(self, gpus: Sequence[int]) -> list[list[int]]:
        """Pair scores among `gpus`, in that order (diagonal 0): the weights the partition search uses."""
        return [[self.pair_score(a, b) for b in gpus] for a in gpus]

    def resolve(self, ref: GpuRef) -> int:
        """GPU index for an index (int or decimal string) or a GPU UUID; UnknownGpuError otherwise."""
        if isinstance(ref, bool):
            raise UnknownGpuError(f"GPU reference must be an index or a UUID, got {ref!r}")
        if isinstance(ref, int):
            if ref in self._positions:
                return ref
        else:
            found = self._index_by_uuid.get(ref)
            if found is not None:
                return found
            if ref.isdecimal() and int(ref) in self._positions:
                return int(ref)
        raise UnknownGpuError(f"unknown GPU {ref!r}: not one of this node's GPUs")

    def nvlink_islands(self) -> tuple[frozenset[int], ...]:
        """Connected groups of GPUs over NVLink or NVSwitch, ordered by lowest index; lone GPUs are their own."""
        parent = {gpu: gpu for gpu in self.gpus}

        def root(gpu: int) -> int:
            while parent[gpu] != gpu:
                parent[gpu] = parent[parent[gpu]]
                gpu = parent[gpu]
            return gpu

        for (a, b), link in self.links.items():
            if link.nvlinked:
                ra, rb = root(a), root(b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
        groups: dict[int, set[int]] = {}
        for gpu in self.gpus:
            groups.setdefault(root(gpu), set()).add(gpu)
        return tuple(frozenset(members) for _, members in sorted(groups.items()))

    def island_of(self, gpu: int) -> frozenset[int]:
        """The NVLink island holding `gpu`."""
        for island in self.nvlink_islands():
            if gpu in island:
                return island
        raise UnknownGpuError(f"GPU {gpu} is not part of this topology")

    def matrix(self) -> str:
        """A `nvidia-smi topo -m`-style table of link labels."""
        header = ["", *(f"GPU{g}" for g in self.gpus)]
        rows = [header]
        for a in self.gpus:
            rows.append([f"GPU{a}", *("X" if a == b else self.link(a, b).label for b in self.gpus)])
        width = max(len(cell) for row in rows for cell in row) + 1
        return "\n".join("".join(cell.ljust(width) for cell in row).rstrip() for row in rows)

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {gpu: position for position, gpu in enumerate(self.gpus)}

    @cached_property
    def _index_by_uuid(self) -> dict[str, int]:
        return dict(zip(self.uuids, self.gpus, strict=False))  # empty when UUIDs are unknown

    @cached_property
    def _score_table(self) -> dict[tuple[int, int], int]:
        return {pair: link.score for pair, link in self.links.items()}


def uniform_links(gpus: Sequence[int], link: PairLink) -> dict[tuple[int, int], PairLink]:
    """The same link for every pair of `gpus`."""
    return dict.fromkeys(combinations(sorted(gpus), 2), link)
