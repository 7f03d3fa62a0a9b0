"""The events-file contract: `<uuid> <xid>` / `<uuid> ok` lines, followed like `tail -n0 -F`."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from gpuslice.discovery.health_file import HealthFileSource, HealthLineError, ProbePassed, parse_health_line
from gpuslice.discovery.xid import XidEvent

GPU = "GPU-d7ba11ef-6db1-5d54-a28e-f84d79c26838"


@pytest.mark.parametrize(
    ("line", "record"),
    [
        (f"{GPU} 79", XidEvent(GPU, 79)),
        (f"  {GPU}\t48  \n", XidEvent(GPU, 48)),
        (f"{GPU} 79 fell off the bus", XidEvent(GPU, 79, reason="fell off the bus")),
        (f"{GPU} ok", ProbePassed(GPU)),
        (f"{GPU} OK after reset", ProbePassed(GPU, "after reset")),
        ("all 79", XidEvent(None, 79)),
        ("MIG-1234 31", XidEvent("MIG-1234", 31)),
        ("", None),
        ("   ", None),
        ("# a comment", None),
    ],
)
def test_parse_line(line: str, record: object) -> None:
    assert parse_health_line(line) == record


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (GPU, "expected `<gpu-uuid> <xid>`"),
        (f"{GPU} -1", "neither an Xid number nor `ok`"),
        (f"{GPU} seventy", "neither an Xid number nor `ok`"),
        (f"{GPU} 0x4f", "neither an Xid number nor `ok`"),
        ("all ok", "must name one device"),
    ],
)
def test_bad_lines_say_why(line: str, message: str) -> None:
    with pytest.raises(HealthLineError, match=message.replace("`", ".")):
        parse_health_line(line)


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def test_history_is_skipped_and_new_lines_count(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.write_text(f"{GPU} 79\n")
    source = HealthFileSource(path)
    source.prime()
    assert source.poll() == []
    append(path, f"{GPU} 48\n{GPU} ok\n")
    assert source.poll() == [XidEvent(GPU, 48), ProbePassed(GPU)]
    assert source.poll() == []
    source.close()


def test_a_file_created_later_is_read_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "later"
    source = HealthFileSource(path)
    source.prime()
    assert source.poll() == []
    path.write_text(f"{GPU} 79\n")
    assert source.poll() == [XidEvent(GPU, 79)]
    source.close()


def test_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.touch()
    source = HealthFileSource(path)
    source.prime()
    append(path, GPU[:10])
    assert source.poll() == []
    append(path, GPU[10:] + " 7")
    assert source.poll() == []
    append(path, "9\nall 4")
    assert source.poll() == [XidEvent(GPU, 79)]
    append(path, "8\n")
    assert source.poll() == [XidEvent(None, 48)]
    source.close()


def test_truncation_restarts_at_the_top(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.touch()
    source = HealthFileSource(path)
    source.prime()
    append(path, f"{GPU} 79\n{GPU} 48\n")
    assert len(source.poll()) == 2
    path.write_text(f"{GPU} 94\n")  # truncate and write less than before
    assert source.poll() == [XidEvent(GPU, 94)]
    source.close()


def test_replacement_by_rename_drains_the_old_file_first(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.touch()
    source = HealthFileSource(path)
    source.prime()
    append(path, f"{GPU} 79\n")
    fresh = tmp_path / "events.new"
    fresh.write_text(f"{GPU} 48\n")
    os.replace(fresh, path)
    assert source.poll() == [XidEvent(GPU, 79), XidEvent(GPU, 48)]
    source.close()


def test_removed_file_then_recreated(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.touch()
    source = HealthFileSource(path)
    source.prime()
    path.unlink()
    assert source.poll() == []
    path.write_text(f"{GPU} ok\n")
    assert source.poll() == [ProbePassed(GPU)]
    source.close()


def test_bad_lines_are_skipped_and_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="gpuslice.discovery.health_file")
    path = tmp_path / "events"
    path.touch()
    source = HealthFileSource(path)
    source.prime()
    append(path, f"garbage\n{GPU} 79\n{GPU} x\n")
    assert source.poll() == [XidEvent(GPU, 79)]
    assert source.bad_lines == 2
    assert "line 1 skipped" in caplog.text and "line 3 skipped" in caplog.text
    source.close()


def test_records_follow_until_stopped(tmp_path: Path) -> None:
    path = tmp_path / "events"
    source = HealthFileSource(path, poll_interval_s=0.005)
    stop = threading.Event()
    got: list[object] = []
    done = threading.Event()

    def follow() -> None:
        for record in source.records(stop):
            got.append(record)
            done.set()

    thread = threading.Thread(target=follow, name="test-follow")
    source.prime()
    thread.start()
    path.write_text(f"{GPU} 79\n")
    assert done.wait(5.0)
    stop.set()
    thread.join(5.0)
    assert not thread.is_alive()
    assert got == [XidEvent(GPU, 79)]


def test_unreadable_file_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "dir-not-file"
    path.mkdir()
    source = HealthFileSource(path)
    assert source.poll() == []
    source.close()


def test_following_again_after_close_starts_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.write_text("")
    source = HealthFileSource(path)
    source.prime()
    append(path, f"{GPU} 79\n")
    assert source.poll() == [XidEvent(GPU, 79)]
    source.close()
    append(path, f"{GPU} 48\n")  # written while nobody follows: history for the next follower
    source.prime()
    assert source.poll() == []
    source.close()
