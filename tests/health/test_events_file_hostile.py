"""Hostile lines in the health events file: each is skipped with one warning naming the line; nothing is held."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuslice.discovery.health_file import MAX_EVENT_LINE_BYTES, HealthFileSource
from gpuslice.discovery.xid import XidEvent

GPU = "GPU-d7ba11ef-6db1-5d54-a28e-f84d79c26838"


def follow(tmp_path: Path) -> tuple[Path, HealthFileSource]:
    path = tmp_path / "events"
    path.touch()
    source = HealthFileSource(path)
    source.prime()
    return path, source


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_non_utf8_line_is_skipped_naming_line_byte_and_offset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gpuslice.discovery.health_file")
    path, source = follow(tmp_path)
    append(path, GPU.encode() + b" 79 note \xff\n" + GPU.encode() + b" 48\n")
    assert source.poll() == [XidEvent(GPU, 48)]
    (warning,) = warnings(caplog)
    assert "line 1 skipped: not UTF-8 text (byte 0xff at offset 49)" in warning
    source.close()


def test_an_endless_line_is_not_held_and_is_skipped_once_it_ends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gpuslice.discovery.health_file")
    path, source = follow(tmp_path)
    for _ in range(5):  # 5 MiB without a newline, in several polls
        append(path, b"x" * (1 << 20))
        assert source.poll() == []
        assert len(source._partial) <= MAX_EVENT_LINE_BYTES, "an endless line is counted, not kept"
    append(path, f"\n{GPU} 79\n".encode())
    assert source.poll() == [XidEvent(GPU, 79)]
    (warning,) = warnings(caplog)
    assert f"line 1 skipped: longer than the limit of {MAX_EVENT_LINE_BYTES} bytes (5242880 bytes)" in warning
    assert source.bad_lines == 1
    source.close()
