"""Where a sweep's independent runs execute: in this process, a local process pool, or a Dask cluster."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")
LOCAL, DASK = "local", "dask"
_ADDRESS = re.compile(r"dask://([A-Za-z0-9.\-\[\]:]{1,255}):([0-9]{1,5})")
DASK_CONNECT_TIMEOUT_S = 30


class ExecutorError(ValueError):
    """An --executor value that cannot be used (the message names the forms that can)."""


@dataclass(frozen=True)
class ExecutorSpec:
    """`local` (the -j process pool), `dask` (a Dask cluster on this machine, -j workers) or
    `dask://HOST:PORT` (an existing Dask scheduler; `address` is then tcp://HOST:PORT)."""

    kind: str
    address: str = ""

    @property
    def is_dask(self) -> bool:
        return self.kind == DASK


def parse_executor(text: str) -> ExecutorSpec:
    text = text.strip()
    if text == LOCAL:
        return ExecutorSpec(LOCAL)
    if text == DASK:
        return ExecutorSpec(DASK)
    match = _ADDRESS.fullmatch(text)
    if match is None or not 0 < int(match[2]) < 65536:
        raise ExecutorError(f"{text[:80]!r} is not local, dask or dask://HOST:PORT")
    return ExecutorSpec(DASK, f"tcp://{match[1]}:{match[2]}")


@contextmanager
def dask_executor(spec: ExecutorSpec, workers: int, processes: bool = True) -> Iterator[Executor]:
    """A concurrent.futures Executor on Dask (dask.distributed's own executor interface): a LocalCluster of
    `workers` single-threaded workers (threads in this process when `processes` is False), or the
    scheduler at `spec.address`. The `dask` extra must be installed."""
    import importlib

    distributed: Any = importlib.import_module("dask.distributed")  # untyped; an optional extra
    Client, LocalCluster = distributed.Client, distributed.LocalCluster  # noqa: N806

    if spec.address:
        try:
            client = Client(spec.address, timeout=DASK_CONNECT_TIMEOUT_S)
        except OSError as exc:
            raise ExecutorError(f"cannot reach the Dask scheduler at {spec.address}: {exc}") from None
        with client:
            yield client.get_executor()
        return
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=processes,
            host="127.0.0.1" if processes else None,  # its own cluster listens on loopback only (threads: none)
            dashboard_address=":0",  # no fixed port to collide with another cluster
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client.get_executor()


def run_all(
    executor: Executor,
    function: Callable[[_Item], _Result],
    items: Sequence[_Item],
    first: Sequence[int] | None = None,
    done: Callable[[_Result], None] | None = None,
) -> list[_Result]:
    """function(item) for every item on `executor`, submitted in the order `first` gives (default: as
    given), each result handed to `done` as it is collected in that order; the results in item order."""
    ranked = list(first) if first is not None else list(range(len(items)))
    futures = {i: executor.submit(function, items[i]) for i in ranked}
    results: dict[int, Any] = {}
    for i in ranked:
        results[i] = futures[i].result()
        if done is not None:
            done(results[i])
    return [results[i] for i in range(len(items))]
