"""The MPS control program behind a Protocol: `nvidia-cuda-mps-control -d` to start, commands on stdin after."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Protocol

PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"  # where an MPS client finds its control daemon's pipes

DEFAULT_CONTROL_COMMAND = ("nvidia-cuda-mps-control",)
COMMAND_TIMEOUT_S = 10.0


class MpsDaemonError(RuntimeError):
    """The control program failed; the message says which command, and NVIDIA's wording where it has one."""


class MpsControl(Protocol):
    """What the manager needs from the MPS control program (the hardware boundary)."""

    def start_daemon(self, env: Mapping[str, str]) -> None:
        """Start a control daemon (`-d`) whose pipe and log directories are named in `env`."""

    def send(self, command: str, env: Mapping[str, str]) -> str:
        """Send one command to the daemon reached through `env`'s pipe directory; return its answer."""


class CommandControl:
    """Runs the real control program (or any stand-in with the same command line) as a subprocess.

    `env` is added to this process's environment, so the program still finds PATH and the driver.
    """

    def __init__(self, command: Sequence[str] = DEFAULT_CONTROL_COMMAND, timeout_s: float = COMMAND_TIMEOUT_S) -> None:
        if not command:
            raise ValueError("the MPS control command must not be empty")
        self.command = tuple(command)
        self.timeout_s = timeout_s

    def _run(self, args: Sequence[str], env: Mapping[str, str], stdin: str | None, what: str) -> str:
        try:
            done = subprocess.run(
                [*self.command, *args],
                input=stdin,
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                check=False,
            )
        except FileNotFoundError as exc:
            raise MpsDaemonError(
                f"{what}: MPS control program {self.command[0]!r} not found (set --mps-control-command)"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise MpsDaemonError(f"{what}: no answer from {self.command[0]} within {self.timeout_s:g} s") from exc
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()
            suffix = f": {detail}" if detail else ""
            raise MpsDaemonError(f"{what}: exit status {done.returncode}{suffix}")
        return done.stdout.strip()

    def start_daemon(self, env: Mapping[str, str]) -> None:
        self._run(["-d"], env, None, "failed to start MPS daemon")

    def send(self, command: str, env: Mapping[str, str]) -> str:
        return self._run([], env, command + "\n", f"failed to send command to MPS daemon ({command})")
