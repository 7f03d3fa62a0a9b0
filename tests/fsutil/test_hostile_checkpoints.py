"""Odd things at a checkpoint's path: each is refused without blocking, set aside, and the start goes on."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuslice.discovery import RecordingMigControl
from gpuslice.dra.checkpoint import ClaimCheckpoint, gpus_with_prepared_migs
from gpuslice.fsutil.checkpoint import CORRUPT_SUFFIX
from gpuslice.fsutil.regular import NotRegularFile, read_regular_bytes
from gpuslice.sharing.dynamic.checkpoint import MigCheckpoint, claimed_gpus
from gpuslice.sharing.dynamic.geometry import DynamicMigGeometry
from gpuslice.sharing.dynamic.plan import dynamic_resources
from gpuslice.sharing.dynamic.runtime import DynamicMig
from tests.support.dirs import short_temp_dir
from tests.support.hostile import CHECKPOINT_NODE as NODE
from tests.support.hostile import sample_holdings

GUARD_S = 10.0  # a blocking open() of a FIFO would wait forever; the guard turns that into a failure


def _directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("x")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.close()  # the socket file stays


def _link_to_a_valid_file(path: Path) -> None:
    elsewhere = path.with_name("elsewhere")
    MigCheckpoint(elsewhere, NODE.name).save(sample_holdings())
    path.symlink_to(elsewhere)


def _link_loop(path: Path) -> None:
    path.symlink_to(path.name)


def _huge(path: Path) -> None:
    with path.open("wb") as handle:
        handle.truncate(100 << 20)  # 100 MiB, sparse: refused by its size before a byte is read


HOSTILE: list[tuple[str, Callable[[Path], None], str]] = [
    ("directory", _directory, "it is a directory"),
    ("fifo", _fifo, "it is a FIFO"),
    ("socket", _socket, "it is a socket"),
    ("symlink", _link_to_a_valid_file, "it is a symbolic link"),
    ("symlink-loop", _link_loop, "it is a symbolic link"),
    ("100-mib", _huge, "larger than the limit"),
]
IDS = [case[0] for case in HOSTILE]


@pytest.fixture
def folder() -> Iterator[Path]:
    with short_temp_dir("ck") as path:  # a socket path must stay under 107 bytes
        yield path


def _within_guard(call: Callable[[], object], unblock: Path) -> object:
    results: list[object] = []

    def run() -> None:
        try:
            results.append(call())
        except Exception as exc:  # handed back to the test's thread
            results.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    if thread.is_alive():
        if unblock.is_fifo():
            os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader
        pytest.fail(f"still blocked after {GUARD_S:g} s")
    if isinstance(results[0], Exception):
        raise results[0]
    return results[0]


@pytest.mark.parametrize(("make", "message"), [c[1:] for c in HOSTILE], ids=IDS)
def test_the_reader_refuses_what_is_not_a_small_regular_file(
    folder: Path, make: Callable[[Path], None], message: str
) -> None:
    path = folder / "ckpt"
    make(path)
    with pytest.raises((NotRegularFile, ValueError), match=message):
        _within_guard(lambda: read_regular_bytes(path, "checkpoint", 1 << 20), path)


@pytest.mark.parametrize("make", [c[1] for c in HOSTILE], ids=IDS)
def test_dra_start_sets_it_aside_and_can_save_again(folder: Path, make: Callable[[Path], None]) -> None:
    path = folder / "checkpoint.json"
    make(path)
    assert _within_guard(lambda: gpus_with_prepared_migs(path), path) == ()
    checkpoint = ClaimCheckpoint(path, NODE.name)
    assert _within_guard(checkpoint.load, path) == {}
    assert os.path.lexists(folder / ("checkpoint.json" + CORRUPT_SUFFIX)) and not os.path.lexists(path)
    checkpoint.save({})
    assert checkpoint.load() == {}


@pytest.mark.parametrize("make", [c[1] for c in HOSTILE], ids=IDS)
def test_dynamic_mig_resume_sets_it_aside_and_rebuilds(folder: Path, make: Callable[[Path], None]) -> None:
    path = folder / "ckpt"
    make(path)
    assert _within_guard(lambda: claimed_gpus(path, NODE.name), path) == frozenset()
    dynamic = DynamicMig(
        DynamicMigGeometry(dynamic_resources(NODE)), RecordingMigControl(NODE), MigCheckpoint(path, NODE.name)
    )
    report = _within_guard(lambda: dynamic.resume(None), path)
    assert report.problem is not None and report.source != "checkpoint"  # type: ignore[attr-defined]
    assert os.path.lexists(folder / ("ckpt" + CORRUPT_SUFFIX))
    assert MigCheckpoint(path, NODE.name).load() == (), "a fresh, trustworthy checkpoint in its place"


def test_a_corrupt_name_already_taken_by_a_directory_gives_way_to_a_timestamped_one(folder: Path) -> None:
    path = folder / "checkpoint.json"
    _directory(folder / ("checkpoint.json" + CORRUPT_SUFFIX))
    _directory(path)
    assert ClaimCheckpoint(path, NODE.name).load() == {}
    assert not os.path.lexists(path)
    assert [p.name for p in folder.iterdir() if p.name.startswith("checkpoint.json.corrupt-")]
