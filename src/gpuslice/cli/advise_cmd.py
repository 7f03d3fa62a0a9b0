"""`gpuslice advise`: recommend whole GPUs, MIG, MPS or time-slicing for a tenant, with the config to use."""

from __future__ import annotations

import json
from pathlib import Path

import click

from gpuslice.advise import (
    LATENCIES,
    TENANCIES,
    AdviceError,
    TenantNeeds,
    UnknownGpuModel,
    as_json,
    config_yaml,
    node_spec_yaml,
    recommend,
    report_text,
    resolve_gpu,
)
from gpuslice.advise.decide import DEFAULT_GPUS_PER_NODE
from gpuslice.discovery.nodespec import MAX_GPUS_PER_NODE


@click.command()
@click.option("--latency", type=click.Choice(LATENCIES), required=True, help="Latency-sensitive serving or batch.")
@click.option("--tenancy", type=click.Choice(TENANCIES), required=True, help="One trusted team, or several tenants.")
@click.option("--memory-gib", type=float, required=True, help="GPU memory one workload needs, in GiB.")
@click.option("--per-gpu", type=click.IntRange(min=1), required=True, help="Workloads wanted on each GPU.")
@click.option(
    "--gpu-model", default="NVIDIA H100 80GB HBM3", show_default=True, help="Product name as nvidia-smi prints it."
)
@click.option("--gpu-memory-mib", type=click.IntRange(min=1), help="GPU memory as NVML reports it (default: known).")
@click.option("--compute-capability", help="e.g. 9.0 (default: known from the product name).")
@click.option(
    "--gpus-per-node",
    type=click.IntRange(1, MAX_GPUS_PER_NODE),
    default=DEFAULT_GPUS_PER_NODE,
    show_default=True,
    help="The most GPUs one node of your cluster has (a pod cannot span nodes).",
)
@click.option("--json", "as_json_output", is_flag=True, help="Print the advice as JSON.")
@click.option("--config-out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the config file.")
@click.option(
    "--node-spec-out", type=click.Path(dir_okay=False, path_type=Path), help="Also write the MIG node spec (MIG only)."
)
def advise(
    latency: str,
    tenancy: str,
    memory_gib: float,
    per_gpu: int,
    gpu_model: str,
    gpu_memory_mib: int | None,
    compute_capability: str | None,
    gpus_per_node: int,
    as_json_output: bool,
    config_out: Path | None,
    node_spec_out: Path | None,
) -> None:
    """Recommend how to share GPUs for one tenant, say what isolation that gives, print the config."""
    try:
        gpu = resolve_gpu(gpu_model, gpu_memory_mib, compute_capability)
        needs = TenantNeeds(latency, tenancy, memory_gib, per_gpu, gpus_per_node)  # type: ignore[arg-type]  # Choice
        rec = recommend(needs, gpu)
    except (AdviceError, UnknownGpuModel, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    if config_out is not None:
        config_out.write_text(config_yaml(rec))
    if node_spec_out is not None:
        spec = node_spec_yaml(rec)
        if spec is None:
            raise click.UsageError(f"--node-spec-out: the advice is {rec.mechanism}, which has no MIG layout")
        node_spec_out.write_text(spec)
    if as_json_output:
        click.echo(json.dumps(as_json(rec), indent=2))
    else:
        click.echo(report_text(rec), nl=False)
