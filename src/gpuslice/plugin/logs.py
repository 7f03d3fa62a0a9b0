"""Plugin logs: klog's text format by default (as Kubernetes components write), JSON lines on request."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Mapping
from typing import IO, Any, Literal

LogFormat = Literal["klog", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("klog", "json")
_JSON_LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error"}

# Device IDs, file lines and error texts reach log lines from clients and files. One value is cut at
# MAX_VALUE_CHARS and a whole message at MAX_MESSAGE_CHARS, each with its full length shown, so a 1 MB ID
# costs a short line. Every character that could end a line, rewrite the terminal (ANSI escapes start with
# ESC) or hide text (bidi overrides) is written as a visible escape, so a log line cannot be forged.
MAX_VALUE_CHARS = 512
MAX_MESSAGE_CHARS = 8192
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x00": "\\0"}


def escape(text: str, keep_newlines: bool = False) -> str:
    """`text` with control, ANSI-escape and bidi characters written as `\\n`, `\\x1b`, `\\u202e`, ..."""
    return (_UNSAFE_BUT_NEWLINE if keep_newlines else _UNSAFE).sub(_escaped, text)


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


def klog_level(levelno: int) -> str:
    """klog's severity letter; DEBUG is klog's INFO at a higher -v."""
    if levelno >= logging.CRITICAL:
        return "F"
    if levelno >= logging.ERROR:
        return "E"
    if levelno >= logging.WARNING:
        return "W"
    return "I"


class KlogFormatter(logging.Formatter):
    """`Lmmdd hh:mm:ss.uuuuuu threadid file:line] msg`, with klog's process id right-aligned in 7 columns."""

    def __init__(self, pid: int | None = None, utc: bool = False) -> None:
        super().__init__()
        self._pid = pid
        self._utc = utc

    def format(self, record: logging.LogRecord) -> str:
        seconds = int(record.created)
        moment = time.gmtime(seconds) if self._utc else time.localtime(seconds)
        micros = int((record.created - seconds) * 1_000_000)
        pid = self._pid if self._pid is not None else (record.process or os.getpid())
        header = (
            f"{klog_level(record.levelno)}{time.strftime('%m%d %H:%M:%S', moment)}.{micros:06d} "
            f"{pid:7d} {record.filename}:{record.lineno}] "
        )
        text = header + safe_message(record)
        if record.exc_info:
            # Indented, so that no line of a traceback (which quotes error texts) can pass for a log entry.
            trace = escape(self.formatException(record.exc_info), keep_newlines=True)
            text += "".join(f"\n\t{line}" for line in trace.splitlines())
        return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts (RFC 3339, UTC), level, logger, caller, msg, pid, and node when known."""

    def __init__(self, node_name: str | None = None) -> None:
        super().__init__()
        self._node_name = node_name

    def format(self, record: logging.LogRecord) -> str:
        moment = time.gmtime(record.created)
        micros = int((record.created - int(record.created)) * 1_000_000)
        entry: dict[str, Any] = {
            "ts": f"{time.strftime('%Y-%m-%dT%H:%M:%S', moment)}.{micros:06d}Z",
            "level": _JSON_LEVELS.get(record.levelno, record.levelname.lower()),
            "logger": record.name,
            "caller": f"{record.filename}:{record.lineno}",
            "msg": safe_message(record),
            "pid": record.process,
        }
        if self._node_name:
            entry["node"] = self._node_name
        if record.exc_info:
            entry["error"] = escape(self.formatException(record.exc_info), keep_newlines=True)
        return json.dumps(entry, ensure_ascii=False)


def configure_logging(
    log_format: LogFormat = "klog",
    verbosity: int = 0,
    node_name: str | None = None,
    stream: IO[str] | None = None,
    level: int | None = None,
) -> logging.Handler:
    """Install one handler on the root logger (replacing earlier ones) and return it.

    verbosity follows klog's -v: 0 logs INFO and above, 1 or more adds DEBUG. `level` overrides it.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}; choose one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(KlogFormatter() if log_format == "klog" else JsonFormatter(node_name))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level if level is not None else (logging.DEBUG if verbosity >= 1 else logging.INFO))
    return handler
