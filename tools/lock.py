"""Regenerate the hashed lock files under requirements/ from pyproject.toml with uv (`make lock`)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
PYTHON_VERSION = "3.11"  # the oldest Python the project supports; the image and the tests use it
# Four locks, each constrained by the ones before it so that a package has one version in all of them:
# runtime.lock (the plugin image), build.lock (its build backend), demo.lock (what `make demo` installs: the
# runtime, the demo extra and the build backend) and dev.lock (everything `make test` needs).
BUILD_INPUT = LOCKS / "build.in"
BUILD_INPUT_HEADER = "# [build-system].requires of pyproject.toml, written by `make lock`: the input of build.lock.\n"


def build_requirements() -> list[str]:
    """[build-system].requires of pyproject.toml (the build backend)."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        requires: list[str] = tomllib.load(handle)["build-system"]["requires"]
    return requires


def compile_lock(name: str, inputs: list[str], constraints: list[Path], upgrade: bool, uv: str) -> None:
    """One `uv pip compile`: pinned, hashed, no index URL or local path in the output."""
    output = LOCKS / f"{name}.lock"
    command = [
        uv,
        "pip",
        "compile",
        *inputs,
        "--generate-hashes",
        "--python-version",
        PYTHON_VERSION,
        "--python-platform",
        "x86_64-manylinux_2_28",
        "--no-emit-index-url",
        "--no-emit-find-links",
        "--annotation-style",
        "line",
        "--custom-compile-command",
        "make lock",
        "--quiet",
        "--output-file",
        str(output.relative_to(ROOT)),
    ]
    for constraint in constraints:
        command += ["--constraint", str(constraint.relative_to(ROOT))]
    if upgrade:
        command.append("--upgrade")
    # The public index only: a pip configuration that points at a local mirror must not leak into the locks.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_INDEX", "UV_EXTRA_INDEX", "UV_FIND_LINKS"))}
    subprocess.run(command, cwd=ROOT, check=True, env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--upgrade", action="store_true", help="Move every pin to the newest allowed release.")
    parser.add_argument("--uv", default=str(Path(sys.executable).parent / "uv"), help="The uv binary.")
    args = parser.parse_args(argv)
    LOCKS.mkdir(exist_ok=True)
    # Written next to the locks (not in a temporary directory) so that their "via" notes name no local path.
    BUILD_INPUT.write_text(BUILD_INPUT_HEADER + "\n".join(build_requirements()) + "\n")
    build_in = str(BUILD_INPUT.relative_to(ROOT))
    runtime, build = LOCKS / "runtime.lock", LOCKS / "build.lock"
    compile_lock("runtime", ["pyproject.toml"], [], args.upgrade, args.uv)
    compile_lock("build", [build_in], [runtime], args.upgrade, args.uv)
    # The editable install in .venv builds with the same backend as the image.
    demo = LOCKS / "demo.lock"
    compile_lock("demo", ["pyproject.toml", "--extra", "demo", build_in], [runtime, build], args.upgrade, args.uv)
    compile_lock("dev", ["pyproject.toml", "--extra", "dev", build_in], [runtime, build, demo], args.upgrade, args.uv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
