"""The fake backend's health events: follow a text file, one `<uuid> <xid>` or `<uuid> ok` line per event."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Generator
from pathlib import Path
from typing import BinaryIO

from gpuslice.discovery.xid import XidEvent
from gpuslice.records import record

log = logging.getLogger(__name__)

HEALTH_FILE_POLL_S = 0.02
ALL_DEVICES_TOKEN = "all"  # `all <xid>`: an event without a device, which NVIDIA applies to every GPU
RECOVERY_WORD = "ok"
_READ_CHUNK = 1 << 20
# An event line is under 100 bytes; a longer one is skipped (with one warning) without being held in memory.
MAX_EVENT_LINE_BYTES = 4096


class HealthLineError(ValueError):
    """A line of the events file that is not `<uuid> <xid>` or `<uuid> ok`; the message says why."""


@record
class ProbePassed:
    """A recovery line: the device passed a health probe (it heals only if recovery is enabled)."""

    uuid: str
    reason: str = ""


HealthRecord = XidEvent | ProbePassed


def parse_health_line(line: str) -> HealthRecord | None:
    """One line: `<uuid> <xid> [note...]`, `<uuid> ok [note...]` or `all <xid>`; None for blank and `#` lines."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    fields = text.split(None, 2)
    if len(fields) < 2:
        raise HealthLineError("expected `<gpu-uuid> <xid>` or `<gpu-uuid> ok`")
    device, what = fields[0], fields[1]
    note = fields[2] if len(fields) > 2 else ""
    if what.lower() == RECOVERY_WORD:
        if device.lower() == ALL_DEVICES_TOKEN:
            raise HealthLineError("a recovery line must name one device, not `all`")
        return ProbePassed(device, note)
    if not what.isascii() or not what.isdigit():
        raise HealthLineError(f"{what!r} is neither an Xid number nor `ok`")
    uuid = None if device.lower() == ALL_DEVICES_TOKEN else device
    return XidEvent(uuid, int(what), reason=note)


class HealthFileSource:
    """Follows `path` like `tail -n0 -F`: lines already there when following starts are history, not events.

    Robust to a file that does not exist yet (every line counts once it appears), to a partial last line
    (held until its newline arrives), to truncation (reading restarts at the top) and to replacement by
    rename (the old file is drained, then the new one is read from the top). Bad lines are logged and
    skipped. Not thread-safe: one follower per source.
    """

    name = "health-file"

    def __init__(self, path: str | Path, poll_interval_s: float = HEALTH_FILE_POLL_S) -> None:
        self.path = Path(path)
        self.poll_interval_s = poll_interval_s
        self.bad_lines = 0
        self._file: BinaryIO | None = None
        self._identity: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""
        self._overlong = 0  # bytes of the current line already discarded for being over MAX_EVENT_LINE_BYTES
        self._line_number = 0
        self._primed = False
        self._last_error = ""

    def prime(self) -> None:
        """Start following now: what the file holds already is skipped. Idempotent."""
        if self._primed:
            return
        self._primed = True
        if self._open():
            assert self._file is not None
            self._offset = os.fstat(self._file.fileno()).st_size

    def records(self, stop: threading.Event) -> Generator[HealthRecord, None, None]:
        """Every event appended from now on, until `stop` is set (checked every poll interval)."""
        self.prime()
        try:
            while not stop.is_set():
                yield from self.poll()
                stop.wait(self.poll_interval_s)
        finally:
            self.close()

    def poll(self) -> list[HealthRecord]:
        """One non-blocking look at the file: the complete new lines since the last look."""
        self.prime()
        records: list[HealthRecord] = []
        identity = _identity(self.path)
        if self._identity is not None and identity != self._identity:
            records.extend(self._read_new())  # drain what the old file got before it was replaced or removed
            self._close_file()
        if self._file is None:
            if identity is None or not self._open():
                return records
            self._offset = 0
        records.extend(self._read_new())
        return records

    def close(self) -> None:
        """Stop following; a later prime() or records() starts afresh from the end of the file."""
        self._close_file()
        self._primed = False

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file, self._identity = None, None
        self._partial, self._line_number, self._overlong = b"", 0, 0

    def _open(self) -> bool:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - kept open across polls, closed in close()
        except FileNotFoundError:
            return False
        except OSError as exc:
            if str(exc) != self._last_error:  # once per distinct problem, not every poll
                log.warning("health events file %s cannot be read: %s", self.path, exc)
                self._last_error = str(exc)
            return False
        self._last_error = ""
        stat = os.fstat(handle.fileno())
        self._file, self._identity = handle, (stat.st_dev, stat.st_ino)
        self._partial, self._line_number, self._overlong = b"", 0, 0
        return True

    def _read_new(self) -> list[HealthRecord]:
        if self._file is None:
            return []
        size = os.fstat(self._file.fileno()).st_size
        if size < self._offset:
            log.info("health events file %s was truncated; reading it from the top", self.path)
            self._offset, self._partial, self._line_number, self._overlong = 0, b"", 0, 0
        records: list[HealthRecord] = []
        while self._offset < size:
            self._file.seek(self._offset)
            chunk = self._file.read(min(_READ_CHUNK, size - self._offset))
            if not chunk:
                break
            self._offset += len(chunk)
            pieces = chunk.split(b"\n")
            for position, piece in enumerate(pieces):
                ends_line = position < len(pieces) - 1
                if self._overlong or len(self._partial) + len(piece) > MAX_EVENT_LINE_BYTES:
                    # Held bytes stay bounded: an endless line is counted, not kept, and skipped once it ends.
                    self._overlong += len(self._partial) + len(piece)
                    self._partial = b""
                    if ends_line:
                        self._line_number += 1
                        self._skip(f"longer than the limit of {MAX_EVENT_LINE_BYTES} bytes ({self._overlong} bytes)")
                        self._overlong = 0
                elif ends_line:
                    line, self._partial = self._partial + piece, b""
                    self._line_number += 1
                    record = self._parse(line)
                    if record is not None:
                        records.append(record)
                else:
                    self._partial += piece
        return records

    def _parse(self, raw: bytes) -> HealthRecord | None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._skip(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})")
            return None
        try:
            return parse_health_line(text)
        except HealthLineError as exc:
            self._skip(f"{exc}: {text!r}")
            return None

    def _skip(self, why: str) -> None:
        self.bad_lines += 1
        log.warning("health events file %s line %d skipped: %s", self.path, self._line_number, why)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino
