"""Logging for every command: one set-up, klog or JSON lines, every client or file string escaped."""

from gpuslice.logs.formats import LOG_FORMATS, JsonFormatter, KlogFormatter, LogFormat, klog_level
from gpuslice.logs.sanitize import MAX_MESSAGE_CHARS, MAX_VALUE_CHARS, escape, safe_message, truncate
from gpuslice.logs.setup import CHATTY_LOGGERS, configure_logging

__all__ = [
    "CHATTY_LOGGERS",
    "LOG_FORMATS",
    "MAX_MESSAGE_CHARS",
    "MAX_VALUE_CHARS",
    "JsonFormatter",
    "KlogFormatter",
    "LogFormat",
    "configure_logging",
    "escape",
    "klog_level",
    "safe_message",
    "truncate",
]
