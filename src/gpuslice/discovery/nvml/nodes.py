"""Canned fake-NVML nodes: an 8-GPU NVSwitch H100, a DGX-1 V100 cube-mesh, and an A100 with MIG and Xids."""

from __future__ import annotations

import uuid as uuidlib

from gpuslice.discovery.nvml.fake import (
    DOUBLE_BIT_ECC_EVENT,
    GPU_END,
    SWITCH,
    TIMEOUT,
    XID_EVENT,
    FakeCi,
    FakeEvent,
    FakeGi,
    FakeGpu,
    FakeNvml,
)
from gpuslice.gpu import name_uuid

_NAMESPACE = uuidlib.UUID("6b7e1d36-3f1f-4d53-9e0c-63616e6e6564")

# nvmlGpuTopologyLevel_t values.
SINGLE, HOSTBRIDGE, NODE, SYSTEM = 10, 30, 40, 50

# DGX-1 (V100) hybrid cube-mesh NVLink counts per GPU pair; absent pairs have no NVLink.
DGX1_V100_LINKS: dict[tuple[int, int], int] = {
    **dict.fromkeys([(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)], 2),
    **dict.fromkeys([(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)], 1),
}


def _uuid(prefix: str, *parts: object) -> str:
    return f"{prefix}-{name_uuid(_NAMESPACE, '/'.join(map(str, parts)))}"


def _bus(bus: int) -> str:
    return f"00000000:{bus:02X}:00.0"


def dgx_h100() -> FakeNvml:
    """8 x H100 SXM5 behind 4 NVSwitch chips (18 links each); GPUs 0-3 on NUMA node 0, 4-7 on node 1."""
    buses = [0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDF]
    switches = [_bus(0x05 + k) for k in range(4)]
    per_switch = (5, 4, 4, 5)  # 18 links spread over the 4 switch chips
    links = [(switches[k], SWITCH) for k, count in enumerate(per_switch) for _ in range(count)]
    gpus = [
        FakeGpu(
            uuid=_uuid("GPU", "dgx-h100", i),
            name="NVIDIA H100 80GB HBM3",
            memory_mib=81559,
            capability=(9, 0),
            bus_id=_bus(bus),
            minor=i,
            numa_node=i // 4,
            mig_mode=0,
            nvlinks=list(links),
        )
        for i, bus in enumerate(buses)
    ]
    return FakeNvml(gpus, driver_version="550.127.08", cuda_version=12040, level=_socket_level)


def _socket_level(i: int, j: int) -> int:
    return NODE if i // 4 == j // 4 else SYSTEM


def dgx1_v100() -> FakeNvml:
    """DGX-1 with 8 x V100 SXM2 16GB: direct NVLink-2 cube-mesh, PCIe switch pairs {0,1} {2,3} {4,5} {6,7}."""
    buses = [0x06, 0x07, 0x0A, 0x0B, 0x85, 0x86, 0x89, 0x8A]
    gpus = []
    for i, bus in enumerate(buses):
        links = []
        for (a, b), count in sorted(DGX1_V100_LINKS.items()):
            if i in (a, b):
                links.extend([(_bus(buses[b if i == a else a]), GPU_END)] * count)
        gpus.append(
            FakeGpu(
                uuid=_uuid("GPU", "dgx1-v100", i),
                name="Tesla V100-SXM2-16GB",
                memory_mib=16160,
                capability=(7, 0),
                bus_id=_bus(bus),
                minor=i,
                numa_node=i // 4,
                mig_mode=None,  # pre-Ampere: NVML answers NOT_SUPPORTED
                nvlinks=links,
            )
        )
    return FakeNvml(gpus, driver_version="535.183.01", cuda_version=12020, level=_dgx1_level)


def _dgx1_level(i: int, j: int) -> int:
    if i // 2 == j // 2:
        return SINGLE
    return HOSTBRIDGE if i // 4 == j // 4 else SYSTEM


def a100_mig() -> FakeNvml:
    """2 x A100-SXM4-40GB, no NVLink. GPU 0 in MIG mode: 2g.10gb@0, 1g.5gb@2, 1g.5gb@3, 3g.20gb@4; GPU 1 whole.

    Its event stream: a timeout, Xid 79 on GPU 1 (critical), Xid 13 on GPU 0 (ignored), a double-bit ECC
    event (not an Xid), Xid 94 scoped to GI 1/CI 0 on GPU 0, Xid 31 on GPU 1 (ignored), Xid 48 on GPU 0.
    """
    parent = _uuid("GPU", "a100-mig", 0)
    layout = {1: (9, 4, 4, 3), 3: (14, 0, 2, 2), 9: (19, 2, 1, 1), 10: (19, 3, 1, 1)}  # gi: (id, start, size, g)
    gis = {
        gi: FakeGi(profile_id, start, size, slices, 40960 * size // 8, {0: FakeCi(slices, _uuid("MIG", parent, gi, 0))})
        for gi, (profile_id, start, size, slices) in layout.items()
    }
    gpus = [
        FakeGpu(parent, "NVIDIA A100-SXM4-40GB", 40960, (8, 0), _bus(0x07), 0, 0, mig_mode=1, gis=gis),
        FakeGpu(_uuid("GPU", "a100-mig", 1), "NVIDIA A100-SXM4-40GB", 40960, (8, 0), _bus(0x0F), 1, 0, mig_mode=0),
    ]
    events: list[FakeEvent | int] = [
        TIMEOUT,
        FakeEvent(1, XID_EVENT, 79),
        FakeEvent(0, XID_EVENT, 13),
        FakeEvent(0, DOUBLE_BIT_ECC_EVENT),
        FakeEvent(0, XID_EVENT, 94, gi=1, ci=0),
        FakeEvent(1, XID_EVENT, 31),
        FakeEvent(0, XID_EVENT, 48),
    ]
    return FakeNvml(gpus, driver_version="570.124.06", cuda_version=12080, level=lambda i, j: SINGLE, events=events)


CANNED = {"dgx-h100": dgx_h100, "dgx1-v100": dgx1_v100, "a100-mig": a100_mig}
