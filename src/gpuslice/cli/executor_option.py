"""`--executor local|dask|dask://HOST:PORT`: the sweep commands' choice of where their runs execute."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from gpuslice.executors import LOCAL, ExecutorError, ExecutorSpec, dask_executor, parse_executor

_Command = TypeVar("_Command", bound=Callable[..., Any])


def _parse(ctx: click.Context, param: click.Parameter, value: str) -> ExecutorSpec:
    try:
        return parse_executor(value)
    except ExecutorError as exc:
        raise click.BadParameter(str(exc)) from None


def executor_option(function: _Command) -> _Command:
    return click.option(
        "--executor",
        "executor",
        default=LOCAL,
        show_default=True,
        metavar="local|dask|dask://HOST:PORT",
        callback=_parse,
        help="Where the runs execute: here (-j processes), a Dask cluster on this machine (-j workers), "
        "or an existing Dask scheduler. Dask needs pip install 'gpuslice[dask]'; results are the same.",
    )(function)


@contextmanager
def open_executor(spec: ExecutorSpec, workers: int) -> Iterator[Executor | None]:
    """None for `local` (the command's own pool), else a Dask executor for the command's lifetime."""
    if not spec.is_dask:
        yield None
        return
    try:
        with dask_executor(spec, workers) as executor:
            yield executor
    except ExecutorError as exc:
        raise click.ClickException(str(exc)) from None


@contextmanager
def local_pool(jobs: int, executor: Executor | None) -> Iterator[Executor]:
    """`executor` when there is one, else a forked pool of `jobs` processes (they inherit what is loaded)."""
    if executor is not None:
        yield executor
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        yield pool
