"""Log lines cannot be forged: client and file strings are escaped and truncated in klog and JSON output."""

from __future__ import annotations

import json
import logging
import re
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuslice.logs import MAX_MESSAGE_CHARS, MAX_VALUE_CHARS, JsonFormatter, KlogFormatter, sanitize

FORGED = "GPU-1\nI1129 09:12:02.000000   12345 run.py:1] forged"

ESCAPES = [
    # (id, value from a client, how it must appear)
    ("newline", FORGED, "GPU-1\\nI1129 09:12:02.000000   12345 run.py:1] forged"),
    ("carriage-return", "a\rb", "a\\rb"),
    ("nul", "a\x00b", "a\\0b"),
    ("tab", "a\tb", "a\\tb"),
    ("ansi", "\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("del-and-c1", "a\x7fb\x9bc", "a\\x7fb\\x9bc"),
    ("line-separator", "a\u2028b", "a\\u2028b"),
    ("bidi-override", "a\u202egnp.exe", "a\\u202egnp.exe"),
    ("plain-unicode", "GPU-ünïcødé-✓", "GPU-ünïcødé-✓"),
]


def record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    info = None
    if exc is not None:
        try:
            raise exc
        except BaseException:
            info = sys.exc_info()
    item = logging.LogRecord("gpuslice.plugin", logging.WARNING, "/x/service.py", 7, message, args, info)
    item.created, item.process = 1_764_407_521.0, 1
    return item


@pytest.mark.parametrize(("value", "shown"), [c[1:] for c in ESCAPES], ids=[c[0] for c in ESCAPES])
def test_client_strings_are_escaped_in_klog_and_json(value: str, shown: str) -> None:
    klog = KlogFormatter(utc=True).format(record("Allocate refused: unknown device %s", value))
    assert klog.endswith(f"service.py:7] Allocate refused: unknown device {shown}")
    assert "\n" not in klog and "\r" not in klog and "\x00" not in klog and "\x1b" not in klog
    line = JsonFormatter().format(record("Allocate refused: unknown device %s", value))
    assert "\n" not in line and "\u2028" not in line and "\x7f" not in line
    assert json.loads(line)["msg"] == f"Allocate refused: unknown device {shown}"


def test_escaping_covers_text_already_in_the_message_and_in_errors() -> None:
    klog = KlogFormatter(utc=True).format(record(f"bad id {FORGED}"))
    assert klog.count("\n") == 0
    klog = KlogFormatter(utc=True).format(record("refused: %s", ValueError(FORGED)))
    assert klog.count("\n") == 0 and "GPU-1\\nI1129" in klog


def test_a_traceback_cannot_forge_a_line() -> None:
    klog = KlogFormatter(utc=True).format(record("failed", exc=ValueError(FORGED + "\x1b[2J")))
    continuation = klog.splitlines()[1:]
    assert continuation and all(line.startswith("\t") for line in continuation)
    assert "\x1b" not in klog
    entry = json.loads(JsonFormatter().format(record("failed", exc=ValueError("x\x1b[2J"))))
    assert "\\x1b[2J" in entry["error"]


def test_long_values_are_truncated_with_their_length_shown() -> None:
    huge = "G" * 1_000_000
    klog = KlogFormatter(utc=True).format(record("unknown device %s", huge))
    assert klog.endswith(f"unknown device {'G' * MAX_VALUE_CHARS}...(1000000 chars)")
    message = json.loads(JsonFormatter().format(record("many: " + "x" * (MAX_MESSAGE_CHARS * 2))))["msg"]
    assert message.endswith(f"...({MAX_MESSAGE_CHARS * 2 + 6} chars)") and len(message) < MAX_MESSAGE_CHARS + 32


def test_numbers_and_format_specs_still_work() -> None:
    klog = KlogFormatter(utc=True).format(record("%d devices, %.1f s, %r", 16, 0.25, "a\nb"))
    assert klog.endswith("] 16 devices, 0.2 s, 'a\\nb'")  # repr already escaped it; nothing doubled


def test_every_escaped_character_is_one_printable_text_cannot_hold() -> None:
    """escape() returns printable text untouched without its pattern: exact only while no character the
    pattern escapes counts as printable."""
    for pattern in (sanitize._UNSAFE, sanitize._UNSAFE_BUT_NEWLINE):
        matched = [chr(code) for code in range(0x3000) if re.fullmatch(pattern, chr(code))]
        assert matched and not any(char.isprintable() for char in matched)


@given(st.text())
def test_escape_is_the_pattern_s_substitution_for_any_text(text: str) -> None:
    for keep_newlines, pattern in ((False, sanitize._UNSAFE), (True, sanitize._UNSAFE_BUT_NEWLINE)):
        assert sanitize.escape(text, keep_newlines) == re.sub(pattern, sanitize._escaped, text)
