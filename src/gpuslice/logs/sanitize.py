"""Log sanitising: client and file strings cut to a bounded length and escaped, so no log line can be forged."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

# Device IDs, file lines and error texts reach log lines from clients and files. One value is cut at
# MAX_VALUE_CHARS and a whole message at MAX_MESSAGE_CHARS, each with its full length shown, so a 1 MB ID
# costs a short line. Every character that could end a line, rewrite the terminal (ANSI escapes start with
# ESC) or hide text (bidi overrides) is written as a visible escape, so a log line cannot be forged.
MAX_VALUE_CHARS = 512
MAX_MESSAGE_CHARS = 8192
# Every character below is in a Unicode category str.isprintable() refuses (Cc, Cf, Zl, Zp), so printable
# text, nearly every message, skips the patterns; they are compiled (by `re`, cached there) when first needed.
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]"
_UNSAFE_BUT_NEWLINE = "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]"
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x00": "\\0"}


def escape(text: str, keep_newlines: bool = False) -> str:
    """`text` with control, ANSI-escape and bidi characters written as `\\n`, `\\x1b`, `\\u202e`, ..."""
    if text.isprintable():
        return text
    return re.sub(_UNSAFE_BUT_NEWLINE if keep_newlines else _UNSAFE, _escaped, text)


def truncate(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """`text`, or its first `limit` characters and `...(N chars)` when it is longer."""
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} chars)"


def safe_message(record: logging.LogRecord) -> str:
    """The record's message with every string or error argument truncated, and the whole escaped."""
    args: Any = record.args
    if isinstance(args, tuple):
        args = tuple(_bounded(arg) for arg in args)
    elif isinstance(args, Mapping):
        args = {key: _bounded(arg) for key, arg in args.items()}
    try:
        message = str(record.msg) % args if args else str(record.msg)
    except (TypeError, ValueError, KeyError):
        message = record.getMessage()  # let logging report the bad format string as it always does
    return escape(truncate(message, MAX_MESSAGE_CHARS))


def _bounded(value: Any) -> Any:
    if isinstance(value, str | BaseException):
        return truncate(str(value))
    return value


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"
