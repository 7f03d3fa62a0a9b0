"""The walkthrough as plain text: readable in a terminal and when piped to a file."""

from __future__ import annotations

from pathlib import Path

from gpuslice.demo.cdi import render_cdi_lines
from gpuslice.demo.dra import render_dra_lines
from gpuslice.demo.dynamic_part import render_dynamic_lines, row
from gpuslice.demo.walkthrough import DemoReport, ModeReport
from gpuslice.sharing import Isolation

_line = row


def render_text(report: DemoReport) -> str:
    lines = [
        "gpuslice demo: the device plugin and a mock kubelet over real gRPC (device plugin API v1beta1)",
        f"Unix sockets in a temp dir, {Path(report.socket_dir).name}/, removed at the end",
        "",
        f"Node {report.node} (the default node, preset h100x4):",
        *(f"  {gpu}" for gpu in report.gpus),
    ]
    for number, mode in enumerate(report.modes, start=1):
        lines += ["", *_mode_lines(number, mode)]
    dynamic = report.dynamic_mig
    if dynamic is not None:
        lines += ["", *render_dynamic_lines(len(report.modes) + 1, dynamic)]
    if report.cdi is not None:
        lines += ["", *render_cdi_lines(len(report.modes) + 1 + (dynamic is not None), report.cdi)]
    if report.dra is not None:
        number = len(report.modes) + 1 + (dynamic is not None) + (report.cdi is not None)
        lines += ["", *render_dra_lines(number, report.dra)]
    lines += ["", "Proofs"]
    claims = [(proof.holds, proof.claim, proof.evidence) for proof in report.proofs]
    if dynamic is not None:
        claims.append((dynamic.holds, dynamic.claim, dynamic.evidence))
    if report.cdi is not None:
        claims.append((report.cdi.holds, report.cdi.claim, report.cdi.evidence))
    if report.dra is not None:
        claims.append((report.dra.holds, report.dra.claim, report.dra.evidence))
    for holds, claim, evidence in claims:
        lines.append(f"  [{'ok' if holds else 'FAILED'}] {claim}")
        lines += [f"       {item}" for item in evidence]
    verdict = "all proofs hold" if report.ok else "SOME PROOFS FAILED"
    lines += ["", f"Done in {report.seconds:.1f} s: {verdict}."]
    return "\n".join(lines)


def _mode_lines(number: int, mode: ModeReport) -> list[str]:
    pod = mode.allocation
    env = [f"{key}={value}" for key, value in sorted(pod.envs.items())]
    return [
        f"{number}. {mode.title}",
        _line("mode", mode.mode),
        _line("node", mode.node),
        _line("config", mode.config),
        _line("resource", mode.resource),
        _line("advertised", f"{mode.advertised} = {mode.derivation.rsplit(' = ', 1)[0]}"),
        _line("kubelet sees", f"capacity {mode.kubelet_capacity}, allocatable {mode.kubelet_allocatable}"),
        _line("allocation", f"pod {pod.pod} asks for {pod.request}"),
        *(_line("device" if i == 0 else "", device_id, 5) for i, device_id in enumerate(pod.device_ids)),
        *(_line("env" if i == 0 else "", item, 5) for i, item in enumerate(env)),
        *(_line("device nodes" if i == 0 else "", node, 5) for i, node in enumerate(pod.device_nodes)),
        _line("isolation", f"{Isolation(mode.isolation).summary}: {mode.isolation_why}"),
    ]
