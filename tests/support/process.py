"""gpuslice as a child process (mostly `gpuslice plugin`): a clean environment, always ended and collected."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

# What the plugin reads from the environment; a test that wants one sets it itself, so the caller's never leaks in.
PLUGIN_ENV = ("NODE_SPEC", "CONFIG_FILE", "KUBELET_SOCKET")
WAIT_S = 20.0


def clean_env(*also: str) -> dict[str, str]:
    """os.environ without PLUGIN_ENV (and `also`)."""
    dropped = {*PLUGIN_ENV, *also}
    return {key: value for key, value in os.environ.items() if key not in dropped}


def plugin_process(
    args: list[str], env: Mapping[str, str] | None = None, *, stdout: int = subprocess.PIPE, drop: tuple[str, ...] = ()
) -> subprocess.Popen[str]:
    """`python -m gpuslice plugin ARGS` with clean_env(*drop) plus `env`; stderr is a text pipe."""
    return subprocess.Popen(
        [sys.executable, "-m", "gpuslice", "plugin", *args],
        env={**clean_env(*drop), **(env or {})},
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def reap(process: subprocess.Popen[Any]) -> None:
    """Kill the process if it still runs and collect it: the `finally` of every test that starts one."""
    if process.poll() is None:
        process.kill()
        process.communicate()


def finish(
    process: subprocess.Popen[str], sig: signal.Signals | None = None, timeout: float = WAIT_S
) -> tuple[int, str]:
    """Send `sig` if the process still runs, wait for it to end (killed after `timeout`): exit code and stderr."""
    if sig is not None and process.poll() is None:
        process.send_signal(sig)
    try:
        _, err = process.communicate(timeout=timeout)
    finally:
        reap(process)
    return process.returncode, err
