"""A stand-in for nvidia-cuda-mps-control: an executable script that records argv, env and stdin, keeps state."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCRIPT = """#!{python}
import json, os, sys
from pathlib import Path
record = Path({record!r})
fail_on = {fail_on!r}
stdin = "" if "-d" in sys.argv[1:] else sys.stdin.read()
env = {{k: v for k, v in os.environ.items() if k.startswith("CUDA_")}}
with record.open("a") as out:
    out.write(json.dumps({{"argv": sys.argv[1:], "env": env, "stdin": stdin}}) + "\\n")
pipe = Path(os.environ["CUDA_MPS_PIPE_DIRECTORY"])
control = pipe / "control"
if "-d" in sys.argv[1:]:
    if control.exists():
        print("An instance of this daemon is already running", file=sys.stderr)
        sys.exit(1)
    control.write_text("running")
    Path(os.environ["CUDA_MPS_LOG_DIRECTORY"], "control.log").write_text("started\\n")
    sys.exit(0)
command = stdin.strip()
if not control.exists() or (fail_on and command.startswith(fail_on)):
    print("Cannot find MPS control daemon process", file=sys.stderr)
    sys.exit(1)
words = command.split()
if words[0] == "quit":
    control.unlink()
elif words[0] == "set_default_active_thread_percentage":
    (pipe / "thread").write_text(words[1])
elif words[0] == "get_default_active_thread_percentage":
    print((pipe / "thread").read_text() if (pipe / "thread").exists() else "100.0")
"""


@dataclass(frozen=True)
class FakeProgram:
    """The script's path and what it recorded."""

    path: Path
    record: Path

    def calls(self) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def commands(self) -> list[str]:
        """Each call as `-d` or the command sent on stdin."""
        return ["-d" if call["argv"] == ["-d"] else call["stdin"].strip() for call in self.calls()]


def write_fake_program(directory: Path, fail_on: str | None = None) -> FakeProgram:
    """Write an executable fake control program into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    record = directory / "calls.jsonl"
    path = directory / "fake-mps-control"
    path.write_text(_SCRIPT.format(python=sys.executable, record=str(record), fail_on=fail_on))
    path.chmod(0o755)
    return FakeProgram(path, record)
