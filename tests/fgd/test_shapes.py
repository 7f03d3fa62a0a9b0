"""Pod shapes and FGD's typical tasks (the popular shapes covering 95 % of pods, CPU-only pods included)."""

from __future__ import annotations

import numpy as np

from gpuslice.fgd.engine import Workload
from gpuslice.fgd.shapes import build_shapes, typical_tasks
from gpuslice.fgd.trace import PodTable


def pods(*rows: tuple[int, int, int, str], repeat: tuple[int, ...]) -> PodTable:
    expanded = [row for row, times in zip(rows, repeat, strict=True) for _ in range(times)]
    return PodTable(
        names=tuple(f"p{i:03d}" for i in range(len(expanded))),
        cpu=np.array([r[0] for r in expanded], dtype=np.int64),
        memory=np.zeros(len(expanded), dtype=np.int64),
        num_gpu=np.array([r[2] for r in expanded], dtype=np.int64),
        gpu_milli=np.array([r[1] for r in expanded], dtype=np.int64),
        spec=tuple(r[3] for r in expanded),
    )


def test_shapes_group_by_cpu_gpu_count_and_model_constraint() -> None:
    table = build_shapes(
        pods((1000, 500, 1, ""), (1000, 500, 1, "T4"), (2000, 0, 0, ""), repeat=(3, 2, 1)), ("G2", "T4")
    )
    assert [(s.cpu, s.gpu_milli, s.num_gpu, s.spec, s.mask) for s in table.shapes] == [
        (1000, 500, 1, "", 0b11),
        (1000, 500, 1, "T4", 0b10),
        (2000, 0, 0, "", 0b11),
    ]
    assert table.counts == (3, 2, 1)
    assert table.pod_shape.tolist() == [0, 0, 0, 1, 1, 2]
    assert [s.cluster_class for s in table.shapes] == ["share", "share", ""]


def test_typical_tasks_stop_once_95_percent_of_pods_are_covered() -> None:
    # 60 + 30 = 90 % < 95 %: a third shape is needed; the tie at 5 pods goes to the larger shape first
    table = build_shapes(
        pods((1000, 500, 1, ""), (3000, 1000, 1, ""), (500, 0, 0, ""), (9000, 0, 0, ""), repeat=(60, 30, 5, 5)),
        ("G2",),
    )
    typical = typical_tasks(table)
    assert [(s.cpu, s.gpu_milli) for s in typical.shapes] == [(1000, 500), (3000, 1000), (9000, 0)]
    assert typical.weights == (60, 30, 5)
    assert typical.probabilities() == [60 / 95, 30 / 95, 5 / 95]


def test_default_trace_has_91_shapes_and_35_typical_ones(default_workload: Workload) -> None:
    shapes, typical = default_workload.shapes, default_workload.typical
    assert len(shapes.shapes) == 91
    assert len(typical.shapes) == 35
    total = sum(shapes.counts)
    assert typical.total_weight * 100 >= 95 * total
    assert (typical.total_weight - typical.weights[-1]) * 100 < 95 * total
    assert any(s.num_gpu == 0 for s in typical.shapes)  # CPU-only pods are part of the target workload
    assert typical.shapes[0].gpu_milli == 810 and typical.weights[0] == 1047
