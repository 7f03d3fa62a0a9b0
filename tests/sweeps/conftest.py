"""A small openb trace folder (four nodes, 40 pods, with the replay's time columns) for the sweep tests."""

from __future__ import annotations

import random
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def small_openb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four nodes and 40 pods in the openb format, with the replay's time columns."""
    folder = tmp_path_factory.mktemp("openb")
    nodes = ["sn,cpu_milli,memory_mib,gpu,model"]
    nodes += [
        f"node-{i},32000,262144,{gpus},{model}"
        for i, (gpus, model) in enumerate([(8, "V100"), (4, "T4"), (2, "T4"), (0, "")])
    ]
    (folder / "openb_node_list_gpu_node.csv").write_text("\n".join(nodes) + "\n")
    rng = random.Random(5)
    pods = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,deletion_time,scheduled_time"]
    for i in range(40):
        count, milli = rng.choice([(1, 1000), (1, 500), (1, 250), (2, 1000), (0, 0)])
        start, cpu = rng.randrange(0, 1000), rng.choice([1000, 4000])
        pods.append(f"pod-{i:03d},{cpu},4096,{count},{milli},,{start},{start + rng.randrange(10, 500)},{start + 1}")
    (folder / "openb_pod_list_small.csv").write_text("\n".join(pods) + "\n")
    return folder
