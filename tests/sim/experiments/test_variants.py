"""Run variants (`preempt:ckpt=900`, `drf`, `kueue`, sharing plans), the hooked engine, the extension traces' CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gpuslice.cli.main import cli
from gpuslice.sim.core.engine import Engine, Listener, SimConfig
from gpuslice.sim.experiments.variants import UnknownVariant, default_policies, parse_variant, run_variant
from gpuslice.sim.policies import make_policy
from gpuslice.sim.traces import resolve_trace


@pytest.mark.parametrize(
    ("text", "name", "options"),
    [
        ("best-fit", "best-fit", {}),
        ("preempt:ckpt=900:grace=inf", "preempt", {"ckpt": "900", "grace": "inf"}),
        (" kueue:overcommit=2:block=1 ", "kueue", {"overcommit": "2", "block": "1"}),
        ("tiered:mig=1:mps=1", "tiered", {"mig": "1", "mps": "1"}),
        ("wdrf", "wdrf", {}),
    ],
)
def test_parse_variant(text: str, name: str, options: dict[str, str]) -> None:
    variant = parse_variant(text)
    assert (variant.name, dict(variant.options), variant.text) == (name, options, text.strip())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("worst-fit", "unknown policy worst-fit"),
        ("preempt:ckpt", "must be key=value"),
        ("preempt:colour=red", "unknown option"),
        ("best-fit:ckpt=5", "unknown option"),
        ("drf:weights=2", "unknown option"),
    ],
)
def test_bad_variants_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(UnknownVariant, match=message):
        parse_variant(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [("preempt:ckpt=soon", "must be seconds"), ("preempt:grace=-2", "grace"), ("fifo:policy=worst-fit", "placement")],
)
def test_bad_variant_values_fail_before_running(text: str, message: str) -> None:
    with pytest.raises(UnknownVariant, match=message):
        run_variant(resolve_trace("two-gang"), text, SimConfig())


def test_every_extension_trace_has_default_policies() -> None:
    for name in ("preemption", "tenants", "topology", "sharing", "two-gang"):
        defaults = default_policies(name)
        assert defaults and all(parse_variant(text) for text in defaults)
    assert default_policies("synthetic") is None


def test_a_listener_that_steers_nothing_leaves_the_run_exactly_as_the_bare_engine() -> None:
    trace = resolve_trace("synthetic:jobs=300,nodes=8", seed=2)
    for policy in ("first-fit", "gang"):
        plain = Engine(trace.cluster, trace.jobs, make_policy(policy), trace_name=trace.name).run()
        listened = Engine(
            trace.cluster, trace.jobs, make_policy(policy), trace_name=trace.name, listeners=[Listener()]
        ).run()
        assert listened.summary() == plain.summary()


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["sim", "compare", *args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_preemption_results_carry_preemptions() -> None:
    code, out, err = invoke("--trace", "preemption:hours=4,nodes=4", "--json", "-")
    assert code == 0, err
    results = json.loads(out)["results"]
    assert [r["policy"] for r in results] == list(default_policies("preemption") or ())
    assert all(isinstance(r["preemptions"], int) for r in results)
    assert "preemption and checkpoints" in err


def test_cli_tenants_results_carry_a_jain_index() -> None:
    code, out, err = invoke("--trace", "tenants:hours=2,nodes=2,burst=4", "--policies", "fifo,drf", "--json", "-")
    assert code == 0, err
    assert {r["policy"]: 0 < r["jain_index"] <= 1 for r in json.loads(out)["results"]} == {"fifo": True, "drf": True}


def test_cli_sharing_markdown_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "tiers.png"
    code, out, err = invoke("--trace", "sharing:jobs=120,nodes=2", "--markdown", "--plot", str(plot))
    assert code == 0, err
    assert "*sharing tiers" in out and "| mig |" in out
    assert plot.stat().st_size > 10_000


def test_cli_topology_plot(tmp_path: Path) -> None:
    plot = tmp_path / "topology.png"
    code, out, err = invoke("--trace", "topology:jobs=80,nodes=4", "--plot", str(plot))
    assert code == 0, err
    assert "NVLink topology" in out and "nvlink-aware" in out
    assert plot.stat().st_size > 10_000


def test_cli_drf_queue_order_and_policy_errors() -> None:
    code, _, err = invoke("--trace", "synthetic:jobs=50,nodes=4", "--policies", "best-fit", "--queue-order", "drf")
    assert code == 0, err
    code, _, err = invoke("--trace", "two-gang", "--policies", "mig")
    assert code == 2 and "only on the sharing trace" in err
    code, _, err = invoke("--trace", "two-gang", "--policies", "preempt:nope=1")
    assert code == 2 and "unknown option" in err


def test_preemption_on_the_tenants_trace_keeps_the_fairness_metrics() -> None:
    trace = resolve_trace("tenants:hours=2,nodes=2,burst=4")
    record = run_variant(trace, "preempt:ckpt=600", SimConfig()).summary()
    assert "jain_index" in record and "preemptions" in record
