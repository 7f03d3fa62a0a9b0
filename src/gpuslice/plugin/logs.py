"""Plugin logs: klog's text format by default (as Kubernetes components write), JSON lines on request."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import IO, Any, Literal

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
        text = header + record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
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
            "msg": record.getMessage(),
            "pid": record.process,
        }
        if self._node_name:
            entry["node"] = self._node_name
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
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
