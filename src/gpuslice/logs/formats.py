"""The log line formats: klog's text (as Kubernetes components write) and JSON lines, both sanitised."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Literal

from gpuslice.logs.sanitize import escape, safe_message

LogFormat = Literal["klog", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("klog", "json")
_JSON_LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error"}


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
        import json  # loaded only for --log-format json: the default klog start needs no JSON

        super().__init__()
        self._node_name = node_name
        self._encode = json.JSONEncoder(ensure_ascii=False).encode

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
        return self._encode(entry)
