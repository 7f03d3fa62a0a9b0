"""Bounded reading of input files: a size cap and a UTF-8 check, with errors that name the file and the limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

_MIB = 1 << 20


class InputFileError(ValueError):
    """An input file refused before it is parsed: too large, not UTF-8, or unreadable; the message says which."""


class InputTooLarge(InputFileError):
    """The file is larger than its kind allows."""


class NotUtf8(InputFileError):
    """The file holds bytes that are not UTF-8 text."""


def read_bounded_bytes(path: str | Path, kind: str, max_bytes: int) -> bytes:
    """At most `max_bytes` of `path`; InputTooLarge beyond that, without ever reading more than one byte over.

    Reading past the cap instead of trusting stat() also bounds a FIFO, /dev/zero or a file that grows.
    OSError (missing file, permissions) passes through for the caller's own message.
    """
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputTooLarge(f"invalid {kind} {path}: larger than the limit of {max_bytes} bytes ({_mib(max_bytes)})")
    return data


_BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def decode_utf8(data: bytes, kind: str, source: str | Path) -> str:
    """`data` as UTF-8 text (a leading byte-order mark dropped); NotUtf8 naming the first bad byte and its offset."""
    # utf-8-sig's rule, by hand: its codec is one more module at every start
    skip = len(_BYTE_ORDER_MARK) if data.startswith(_BYTE_ORDER_MARK) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start + skip
        bad = data[at] if at < len(data) else 0
        raise NotUtf8(f"invalid {kind} {source}: not UTF-8 text (byte 0x{bad:02x} at offset {at})") from None


def read_bounded_text(path: str | Path, kind: str, max_bytes: int) -> str:
    """read_bounded_bytes, then decode_utf8: the one way every input file is read."""
    return decode_utf8(read_bounded_bytes(path, kind, max_bytes), kind, path)


def _mib(size: int) -> str:
    return f"{size / _MIB:g} MiB" if size >= _MIB else f"{size / 1024:g} KiB"


def iter_text_lines(path: str | Path, kind: str, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """(line number, text without its line ending) of a UTF-8 file, read one bounded line at a time.

    A file of any size streams in constant memory; a line over `max_line_bytes` is InputTooLarge
    (naming file and line), a bad byte NotUtf8 with its offset in the file. OSError passes through.
    """
    offset = 0
    with open(path, "rb") as handle:
        number = 0
        while raw := handle.readline(max_line_bytes + 1):
            number += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                raise InputTooLarge(
                    f"invalid {kind} {path}:{number}: a line longer than the limit of {max_line_bytes} bytes"
                )
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = raw[exc.start]
                raise NotUtf8(
                    f"invalid {kind} {path}: not UTF-8 text (byte 0x{bad:02x} at offset {offset + exc.start})"
                ) from None
            offset += len(raw)
            if number == 1:
                text = text.removeprefix("\ufeff")
            yield number, text.rstrip("\r\n")
