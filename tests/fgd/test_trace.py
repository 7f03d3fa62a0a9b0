"""The openb loader: the real trace's published counts, the folder rules, and clear errors on bad files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gpuslice.fgd.trace import (
    DEFAULT_RELATIVE_DIR,
    ENV_TRACE_DIR,
    OpenbTraceError,
    list_workloads,
    load_nodes,
    load_pods,
    load_trace,
    project_root,
    resolve_trace_dir,
    spec_mask,
)

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n"


def test_the_real_default_trace_has_the_published_counts(trace_dir: Path) -> None:
    trace = load_trace("default", trace_dir)
    nodes, pods = trace.nodes, trace.pods
    assert len(nodes.names) == 1213 and nodes.total_gpus == 6212
    gpus_by_model = Counter()
    for model, count in zip(nodes.model.tolist(), nodes.gpus.tolist(), strict=True):
        gpus_by_model[nodes.models[model]] += count
    assert gpus_by_model == {"G2": 4392, "T4": 842, "G3": 312, "P100": 265, "V100M32": 204, "V100M16": 195, "A10": 2}
    assert len(pods) == 8152
    assert int((pods.num_gpu == 0).sum()) == 1088
    assert int(((pods.num_gpu == 1) & (pods.gpu_milli < 1000) & (pods.gpu_milli > 0)).sum()) == 3078
    assert Counter(k for k in pods.num_gpu.tolist() if k > 1) == {2: 16, 4: 15, 8: 44}
    assert int(pods.gpu_request.sum()) == 6_086_800
    assert list(pods.names) == sorted(pods.names) and list(nodes.names) == sorted(nodes.names)


def test_every_workload_in_the_folder_loads(trace_dir: Path) -> None:
    names = list_workloads(trace_dir)
    assert names[0] == "default" and {"cpu050", "gpushare40", "gpuspec33", "multigpu50"} <= set(names)
    for name in names:
        pods = load_pods(trace_dir / f"openb_pod_list_{name}.csv")
        assert len(pods) > 7000, name


def test_gpu_spec_lists_allowed_models() -> None:
    models = ("A10", "G2", "T4")
    assert spec_mask("", models) == 0b111
    assert spec_mask("T4", models) == 0b100
    assert spec_mask("G2|T4|V100M32", models) == 0b110  # a model absent from the cluster matches nothing
    assert spec_mask("V100M16", models) == 0


def test_default_folder_is_shared_traces_next_to_the_project(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_TRACE_DIR, raising=False)
    expected = (project_root() / DEFAULT_RELATIVE_DIR).resolve()
    assert (project_root() / "src" / "gpuslice").is_dir()
    if expected.is_dir():
        assert resolve_trace_dir() == expected
    else:
        with pytest.raises(OpenbTraceError, match=str(expected)):
            resolve_trace_dir()


def test_explicit_folder_beats_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_TRACE_DIR, str(tmp_path / "from-env"))
    with pytest.raises(OpenbTraceError, match="from-env"):
        resolve_trace_dir()
    assert resolve_trace_dir(tmp_path) == tmp_path


def test_a_missing_folder_or_workload_is_named(tmp_path: Path) -> None:
    with pytest.raises(OpenbTraceError, match=r"nowhere.*--trace-dir"):
        resolve_trace_dir(tmp_path / "nowhere")
    (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODE_HEADER + "n0,8000,1000,1,T4\n")
    (tmp_path / "openb_pod_list_default.csv").write_text(POD_HEADER + "p0,1000,10,1,500,\n")
    with pytest.raises(OpenbTraceError, match=r"openb_pod_list_busy.csv does not exist \(available: default\)"):
        load_trace("busy", tmp_path)
    assert len(load_trace("default", tmp_path).pods) == 1


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p1,1000,10,1,1200,", r"pods.csv:3: pod p1: gpu_milli 1200 is above 1000"),
        ("p1,1000,10,0,500,", r"pods.csv:3: pod p1: num_gpu 0 and gpu_milli 500 disagree"),
        ("p1,1000,10,2,500,", r"pods.csv:3: pod p1: a fractional GPU share \(500 milli\) needs num_gpu 1"),
        ("p1,lots,10,1,500,", r"pods.csv:3: column cpu_milli = 'lots' is not an integer"),
        ("p1,1000,-5,1,500,", r"pods.csv:3: column memory_mib = -5 is negative"),
    ],
)
def test_bad_pod_rows_are_named_by_file_line_and_column(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(POD_HEADER + "p0,1000,10,1,500,\n" + row + "\n")
    with pytest.raises(OpenbTraceError, match=message):
        load_pods(path)


def test_bad_node_files_are_explained(tmp_path: Path) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,gpu,model\nn0,1000,1,T4\n")
    with pytest.raises(OpenbTraceError, match="missing column"):
        load_nodes(path)
    path.write_text(NODE_HEADER + "n0,1000,10,2,\n")
    with pytest.raises(OpenbTraceError, match="node n0 has 2 GPUs but no model"):
        load_nodes(path)
