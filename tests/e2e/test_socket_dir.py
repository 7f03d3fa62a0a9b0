"""Where the plugin's sockets go: --socket-dir, the kubelet's directory, or a private one for a non-root user."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from gpuslice.fsutil.runtime_dir import RuntimeDirError, private_runtime_dir
from gpuslice.plugin.app import AppOptions
from gpuslice.plugin.run import SetupError
from tests.support.process import finish, plugin_process

FAKE = ["--backend", "fake", "--node-spec", "preset:h100x4"]


def serving_line(stderr: str) -> str:
    found = re.search(r"serving nvidia\.com/gpu on (\S+)", stderr)
    assert found is not None, stderr
    return found[1]


@pytest.mark.parametrize(
    ("fields", "writable_default", "expected"),
    [
        ({"kubelet_socket": "/k/kubelet.sock"}, False, "/k"),
        ({"kubelet_socket": "/k/kubelet.sock", "socket_dir": "/s"}, False, "/s"),
        ({"kubelet_socket": None, "socket_dir": "/s"}, True, "/s"),
        ({"kubelet_socket": None}, True, "/var/lib/kubelet/device-plugins"),
        ({"kubelet_socket": None}, False, "{runtime}/gpuslice"),  # a non-root user: the image's case
    ],
)
def test_the_socket_directory_rule(
    fields: dict[str, str | None],
    writable_default: bool,
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setattr("gpuslice.plugin.app.os.access", lambda path, mode: writable_default)
    options = AppOptions(**fields)  # type: ignore[arg-type]
    assert options.plugin_dir == Path(expected.format(runtime=tmp_path))
    assert options.checkpoint_path.parent == options.plugin_dir


def test_a_runtime_directory_that_is_not_ours_alone_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = private_runtime_dir({"XDG_RUNTIME_DIR": str(tmp_path)})
    assert made == tmp_path / "gpuslice" and made.stat().st_mode & 0o777 == 0o700
    assert private_runtime_dir({"XDG_RUNTIME_DIR": str(tmp_path)}) == made, "an existing one of ours is reused"
    made.chmod(0o755)
    with pytest.raises(RuntimeDirError, match="not a directory of this user's alone"):
        private_runtime_dir({"XDG_RUNTIME_DIR": str(tmp_path)})
    made.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    made.symlink_to(tmp_path / "elsewhere")  # planted before us in a shared directory
    with pytest.raises(RuntimeDirError):
        private_runtime_dir({"XDG_RUNTIME_DIR": str(tmp_path)})
    monkeypatch.setattr("gpuslice.plugin.app.os.access", lambda path, mode: False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    with pytest.raises(SetupError, match="--socket-dir"):
        _ = AppOptions(kubelet_socket=None).plugin_dir


def test_serving_without_registering_needs_no_kubelet_directory(workdir: Path) -> None:
    """README's `docker run IMAGE plugin ... --kubelet-socket ""`: serves, and stops cleanly on SIGTERM.
    (`workdir`, a short directory: pytest's tmp_path under xdist makes the socket path too long.)"""
    process = plugin_process([*FAKE, "--kubelet-socket", ""], {"XDG_RUNTIME_DIR": str(workdir)})
    assert process.stderr is not None
    seen = ""
    for line in process.stderr:
        seen += line
        if "plugin ready" in line:
            break
    code, err = finish(process, signal.SIGTERM)
    assert code == 0 and "Traceback" not in seen + err, seen + err
    socket = Path(serving_line(seen))
    default = Path("/var/lib/kubelet/device-plugins")
    assert socket.parent == (default if os.access(default, os.W_OK | os.X_OK) else workdir / "gpuslice")


def test_an_unusable_socket_directory_is_one_line_not_a_traceback(workdir: Path) -> None:
    blocker = workdir / "file"
    blocker.write_text("not a directory")
    process = plugin_process([*FAKE, "--kubelet-socket", "", "--socket-dir", str(blocker / "sockets")])
    code, err = finish(process)
    assert code == 1 and "Traceback" not in err, err
    assert "cannot use the socket directory" in err and "--socket-dir" in err
