"""The one log set-up of every gpuslice command: one sanitising handler on the root logger."""

from __future__ import annotations

import logging
import sys
from typing import IO

from gpuslice.logs.formats import LOG_FORMATS, JsonFormatter, KlogFormatter, LogFormat

# Libraries that log a line per request at INFO (the Kubernetes API client); their warnings still show.
CHATTY_LOGGERS = ("httpx", "httpx2")
_OURS = "_gpuslice_handler"


def configure_logging(
    log_format: LogFormat = "klog",
    verbosity: int = 0,
    node_name: str | None = None,
    stream: IO[str] | None = None,
    level: int | None = None,
) -> logging.Handler:
    """Install one handler on the root logger (replacing earlier ones) and return it.

    Every command calls this first (plugin, dra, kubelet, labels, demo, sim, advise), so every line any
    of them logs is klog (or JSON) and has its arguments escaped and bounded (gpuslice.logs.sanitize).
    verbosity follows klog's -v: 0 logs INFO and above, 1 or more adds DEBUG, 2 or more the chatty
    libraries' INFO lines too. `level` overrides the root level.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}; choose one of {', '.join(LOG_FORMATS)}")
    chosen = level if level is not None else (logging.DEBUG if verbosity >= 1 else logging.INFO)
    handler: logging.Handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(KlogFormatter() if log_format == "klog" else JsonFormatter(node_name))
    handler.setLevel(chosen)
    setattr(handler, _OURS, True)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, _OURS, False):  # ours from an earlier call; handlers others installed stay
            root.removeHandler(old)
    root.addHandler(handler)
    # The root's level only lets records through; the handler's decides. Kept at WARNING or lower, so
    # that a quiet command never silences warnings for code running after it in the same process.
    root.setLevel(min(chosen, logging.WARNING))
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbosity >= 2 else logging.WARNING)
    return handler


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever sys.stderr is when a record comes (a test runner may swap it)."""

    @property  # type: ignore[override]
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, value: IO[str]) -> None:
        pass
