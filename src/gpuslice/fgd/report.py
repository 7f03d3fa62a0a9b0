"""Our openb results beside the published ones: rich tables, pair-wise comparisons and curve plots."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuslice.fgd import published
from gpuslice.fgd.metrics import curve_value, first_shortfall, seed_stat
from gpuslice.fgd.policies import OUR_POLICIES, PAPER_POLICIES
from gpuslice.plotting import figure_file

Record = dict[str, Any]
FRAG_POINTS = (50, 70, 80, 90, 95, 100, 110, 120, 130)
RATE_POINTS = (50, 70, 80, 90, 95, 100)


def select(records: Sequence[Record], workload: str | None = None, policy: str | None = None) -> list[Record]:
    return [
        r
        for r in records
        if (workload is None or r["workload"] == workload) and (policy is None or r["policy"] == policy)
    ]


def ordered_policies(records: Sequence[Record]) -> list[str]:
    present = list(dict.fromkeys(r["policy"] for r in records))
    known = [p for p in (*PAPER_POLICIES, *OUR_POLICIES) if p in present]
    return known + [p for p in present if p not in known]


def ordered_workloads(records: Sequence[Record]) -> list[str]:
    present = list(dict.fromkeys(r["workload"] for r in records))
    return sorted(present, key=lambda w: (w != "default", w))


def label(policy: str) -> str:
    return published.POLICY_LABELS.get(policy, policy)


def tolerance(sd: float) -> float:
    """The issue's match criterion: two published standard deviations or 0.5 points, whichever is larger."""
    return max(2 * sd, 0.5)


def comparison_rows(records: Sequence[Record], workload: str = "default") -> list[dict[str, Any]]:
    """Per policy: our mean ± sd at 100 % and 130 % arrived, the published value, and whether it matches."""
    rows = []
    for policy in ordered_policies(select(records, workload)):
        runs = select(records, workload, policy)
        row: dict[str, Any] = {"policy": policy, "seeds": len(runs)}
        for point in (100, 130):
            ours = seed_stat(runs, "unallocated_gpu_pct", point)
            row[f"ours_{point}"] = ours
            pub = published.UNALLOCATED.get(policy, {}).get(point) if workload == "default" else None
            row[f"published_{point}"] = pub
            row[f"match_{point}"] = None if pub is None else abs(ours.mean - pub.mean) <= tolerance(pub.sd)
        row["shortfall"] = first_shortfall(runs)
        rows.append(row)
    return rows


def ordering(records: Sequence[Record], point: int = 100) -> tuple[list[str], list[str]]:
    """Paper policies from fewest to most unallocated GPUs: ours, then the published order."""
    ours = {p: seed_stat(select(records, "default", p), "unallocated_gpu_pct", point).mean for p in PAPER_POLICIES}
    mine = sorted((p for p in PAPER_POLICIES if not math.isnan(ours[p])), key=lambda p: ours[p])
    paper = sorted((p for p in PAPER_POLICIES if p in mine), key=lambda p: published.UNALLOCATED[p][point].mean)
    return mine, paper


def pairwise(records: Sequence[Record], workload: str, ours: str, baseline: str, point: int = 100) -> dict[str, Any]:
    """Seed-by-seed comparison of unallocated GPU % at `point` arrived: wins = seeds where `ours` is lower."""
    mine = {r["seed"]: r for r in select(records, workload, ours)}
    base = {r["seed"]: r for r in select(records, workload, baseline)}
    diffs = [
        curve_value(mine[s], "unallocated_gpu_pct", point) - curve_value(base[s], "unallocated_gpu_pct", point)
        for s in sorted(set(mine) & set(base))
    ]
    diffs = [d for d in diffs if not math.isnan(d)]  # a run with --ratio below the point has no value there
    return {
        "seeds": len(diffs),
        "wins": sum(d < 0 for d in diffs),
        "losses": sum(d > 0 for d in diffs),
        "mean_diff": sum(diffs) / len(diffs) if diffs else math.nan,
        "worst_diff": max(diffs) if diffs else math.nan,
    }


def _num(value: float) -> str:
    return "—" if math.isnan(value) else f"{value:.2f}"


def _pm(mean: float, sd: float) -> str:
    return "—" if math.isnan(mean) else f"{mean:.2f} ± {sd:.2f}"


def _verdict(match: bool | None) -> str:
    return "" if match is None else ("[green]yes[/]" if match else "[red]no[/]")


def comparison_table(records: Sequence[Record], total_gpus: int = 6212) -> Table:
    table = Table(title="Unallocated GPU % on the default trace (mean ± sample sd over seeds); published = FGD paper")
    for column in ("Policy", "Seeds", "Ours @100", "Paper @100", "Match", "GPUs", "Ours @130", "Paper @130"):
        table.add_column(column, justify="left" if column == "Policy" else "right")
    table.add_column("Match")
    table.add_column("Shortfall (paper)", justify="right")
    for row in comparison_rows(records):
        p100, p130 = row["published_100"], row["published_130"]
        shortfall = published.FIRST_SHORTFALL.get(row["policy"])
        table.add_row(
            label(row["policy"]),
            str(row["seeds"]),
            _pm(row["ours_100"].mean, row["ours_100"].sd),
            _pm(p100.mean, p100.sd) if p100 else "—",
            _verdict(row["match_100"]),
            f"{row['ours_100'].mean * total_gpus / 100:.0f}",
            _pm(row["ours_130"].mean, row["ours_130"].sd),
            _pm(p130.mean, p130.sd) if p130 else "—",
            _verdict(row["match_130"]),
            f"{row['shortfall']} ({shortfall if shortfall is not None else '—'})",
        )
    return table


def fragment_tables(records: Sequence[Record]) -> tuple[Table, Table]:
    """Fragmentation amount / allocation and fragmentation rate by arrived %, ours (paper)."""
    policies = list(ordered_policies(select(records, "default")))
    amount = Table(title="Fragmentation amount % / GPU allocation % by arrived %, ours (paper), mean of seeds")
    rate = Table(title="Fragmentation rate % (share of idle GPU capacity) by arrived %, ours (paper)")
    for table in (amount, rate):
        table.add_column("Arrived", justify="right")
        for policy in policies:
            table.add_column(label(policy), justify="right")
    for point in FRAG_POINTS:
        cells = []
        for policy in policies:
            runs = select(records, "default", policy)
            frag = seed_stat(runs, "frag_amount_pct", point).mean
            alloc = seed_stat(runs, "allocated_gpu_pct", point).mean
            pub_f, pub_a = published.FRAG_AMOUNT[point].get(policy), published.ALLOCATION[point].get(policy)
            paper = f" ({pub_f:.2f} / {pub_a:.2f})" if pub_f is not None and pub_a is not None else ""
            cells.append(f"{_num(frag)} / {_num(alloc)}{paper}")
        amount.add_row(f"{point} %", *cells)
    for point in RATE_POINTS:
        cells = []
        for policy in policies:
            value = seed_stat(select(records, "default", policy), "frag_rate_pct", point).mean
            pub = published.FRAG_RATE[point].get(policy)
            cells.append(_num(value) + (f" ({pub:.2f})" if pub is not None else ""))
        rate.add_row(f"{point} %", *cells)
    return amount, rate


def workloads_table(records: Sequence[Record], ours: Sequence[str] = OUR_POLICIES, baseline: str = "fgd") -> Table:
    """Per workload: every policy's unallocated GPU % at 100 / 130 % arrived, and each of our policies
    against `baseline` seed by seed (mean difference at 100 %, seeds where ours is lower)."""
    table = Table(title=f"Unallocated GPU % at 100 % / 130 % arrived per workload; ours vs {label(baseline)} pair-wise")
    policies = ordered_policies(records)
    mine = [p for p in ours if p in policies and p != baseline]
    table.add_column("Workload")
    for policy in policies:
        table.add_column(label(policy), justify="right")
    for policy in mine:
        table.add_column(f"{policy} - {baseline} @100 (lower on)", justify="right")
    for workload in ordered_workloads(records):
        cells = []
        for policy in policies:
            runs = select(records, workload, policy)
            a = seed_stat(runs, "unallocated_gpu_pct", 100).mean
            b = seed_stat(runs, "unallocated_gpu_pct", 130).mean
            cells.append("—" if not runs else f"{_num(a)} / {_num(b)}")
        for policy in mine:
            pair = pairwise(records, workload, policy, baseline)
            cells.append("—" if not pair["seeds"] else f"{pair['mean_diff']:+.2f} ({pair['wins']}/{pair['seeds']})")
        table.add_row(workload, *cells)
    return table


def render(records: Sequence[Record], console: Console) -> None:
    """Everything `gpuslice sim openb-report` prints."""
    if select(records, "default"):
        console.print(comparison_table(records))
        mine, paper = ordering(records)
        same = mine == paper
        console.print(
            f"Ordering at 100 % (fewest unallocated first): ours {' < '.join(label(p) for p in mine)}; "
            f"paper {' < '.join(label(p) for p in paper)} -> {'[green]same[/]' if same else '[yellow]differs[/]'}"
        )
        for table in fragment_tables(records):
            console.print(table)
    if len(ordered_workloads(records)) > 1 or any(select(records, policy=p) for p in OUR_POLICIES):
        console.print(workloads_table(records))


def plot_curves(records: Sequence[Record], path: str | Path, workload: str = "default") -> Path:
    """Unallocated GPU % and fragmentation rate vs arrived %, one line per policy (mean of seeds)."""
    runs = select(records, workload)
    if not runs:
        raise ValueError(f"no records for workload {workload!r} to plot")
    with figure_file(path, 2, (12, 4.5)) as (figure, (left, right)):
        points = list(range(len(runs[0]["curve"])))
        for policy in ordered_policies(runs):
            mine = select(runs, workload, policy)
            unallocated = [seed_stat(mine, "unallocated_gpu_pct", b).mean for b in points]
            rate = [seed_stat(mine, "frag_rate_pct", b).mean for b in points]
            style = "--" if policy in OUR_POLICIES else "-"
            left.plot(points, unallocated, style, label=label(policy))
            right.plot(points, rate, style, label=label(policy))
        left.set(xlabel="Arrived workload (% of GPU capacity)", ylabel="Unallocated GPU (%)", xlim=(60, points[-1]))
        left.set_ylim(0, 30)
        right.set(xlabel="Arrived workload (% of GPU capacity)", ylabel="Fragmentation rate (% of idle GPU)")
        right.set_xlim(0, points[-1])
        for axis in (left, right):
            axis.grid(alpha=0.3)
            axis.legend(fontsize=8)
        figure.suptitle(f"openb {workload}: mean over {len({r['seed'] for r in runs})} seeds")
    return Path(path)
