"""A reader for the plain block YAML that config files are written in, answering only where PyYAML would agree."""

from __future__ import annotations

import re
from typing import Any

# Why: importing PyYAML costs a start about 7 ms (its reader compiles a large regular expression at import,
# and its package loads the emitter and representer too), the largest part of what a config file adds to a
# plugin's start. The files a DaemonSet mounts are plain: block mappings and sequences of plain keys and
# scalars. This reader takes exactly that and says None for anything else (anchors, tags, documents,
# multi-line or escaped scalars, any scalar whose YAML 1.1 type it is not sure of), and the caller then parses
# with PyYAML as before. So what it returns is what `yaml.safe_load` returns for the same text
# (tests/fsutil/test_plain_yaml.py holds the two side by side, on generated and on every shipped document).

# PyYAML's composer recurses once per level, and the interpreter's stack gives out near 1,000: both readers
# stop here (a deeper document goes to PyYAML, whose reader, fsutil.safe_yaml, refuses it with its message).
MAX_DEPTH = 100

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
# A plain scalar PyYAML 1.1 resolves to a string: it starts with a letter, '_' or '/' (no number, null, bool
# or timestamp starts so, other than the words below), keeps to these characters, single spaces inside.
_WORD = re.compile(r"[A-Za-z_/][A-Za-z0-9_./+=-]*(?: [A-Za-z0-9_./+=-]+)*")
# Digits then letters ("60s", "5m"): no YAML 1.1 int (a base needs a leading 0, sexagesimal a ':'), float (a
# '.') or timestamp (a '-') has that shape.
_DIGITS_THEN_LETTERS = re.compile(r"[1-9][0-9]*[A-Za-z]+")
_INT = re.compile(r"0|[1-9][0-9]*")
_FLOAT = re.compile(r"(?:0|[1-9][0-9]*)\.[0-9]+")
_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\\\n]*\"")
_BOOLS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULLS = frozenset(("", "~", "null", "Null", "NULL"))


class _NotPlain(Exception):
    """Something this reader does not take: PyYAML reads the document instead."""


def read_plain_yaml(text: str) -> tuple[bool, Any]:
    """(True, data) when `text` is plain block YAML whose meaning is certain, else (False, None)."""
    if "\t" in text or "\r" in text or text.startswith("\ufeff"):
        return False, None
    lines = []
    for number, raw in enumerate(text.split("\n"), 1):
        content = raw.rstrip(" ")
        stripped = content.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        lines.append((len(content) - len(stripped), stripped, number))
    if not lines:
        return True, None
    try:
        value, end = _block(lines, 0, lines[0][0], 0)
    except _NotPlain:
        return False, None
    return (True, value) if end == len(lines) else (False, None)


Line = tuple[int, str, int]  # indent, content, line number


def _block(lines: list[Line], at: int, indent: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH or lines[at][0] != indent:
        raise _NotPlain
    if _is_item(lines[at][1]):
        return _sequence(lines, at, indent, depth)
    return _mapping(lines, at, indent, depth)


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _mapping(lines: list[Line], at: int, indent: int, depth: int) -> tuple[dict[str, Any], int]:
    mapping: dict[str, Any] = {}
    while at < len(lines) and lines[at][0] == indent and not _is_item(lines[at][1]):
        entry = _entry(lines[at][1])
        if entry is None or entry[0] in mapping:
            raise _NotPlain
        key, rest = entry
        at += 1
        if rest:
            mapping[key] = _scalar_or_flow(rest)
        elif at < len(lines) and (lines[at][0] > indent or (lines[at][0] == indent and _is_item(lines[at][1]))):
            mapping[key], at = _block(lines, at, lines[at][0], depth + 1)
        else:
            mapping[key] = None
    if at < len(lines) and lines[at][0] > indent:
        raise _NotPlain
    return mapping, at


def _sequence(lines: list[Line], at: int, indent: int, depth: int) -> tuple[list[Any], int]:
    items: list[Any] = []
    while at < len(lines) and lines[at][0] == indent and _is_item(lines[at][1]):
        rest = lines[at][1][1:]
        inner = rest.lstrip(" ")
        if not inner:
            at += 1
            if at < len(lines) and lines[at][0] > indent:
                value, at = _block(lines, at, lines[at][0], depth + 1)
                items.append(value)
            else:
                items.append(None)
            continue
        column = indent + 1 + len(rest) - len(inner)
        if _is_item(inner) or _entry(inner) is not None:
            # "- name: x" opens a mapping (or "- - x" a sequence) whose first line starts at the text's column
            lines[at] = (column, inner, lines[at][2])
            value, at = _block(lines, at, column, depth + 1)
            items.append(value)
        else:
            items.append(_scalar_or_flow(inner))
            at += 1
    if at < len(lines) and lines[at][0] > indent:
        raise _NotPlain
    return items, at


def _entry(content: str) -> tuple[str, str] | None:
    """(key, the text after it) of a `key: value` line whose key is a plain string to YAML, else None."""
    key, colon, rest = content.partition(":")
    if not colon or (rest and not rest.startswith(" ")):  # "a:b" is one plain scalar to YAML, not a key
        return None
    if not _KEY.fullmatch(key) or key in _BOOLS or key in _NULLS:
        return None
    return key, rest.strip(" ")


def _scalar_or_flow(text: str) -> Any:
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip(" ")
        if not inner:
            return []
        if any(mark in inner for mark in "[]{}'\"#"):
            raise _NotPlain
        return [_scalar(item.strip(" ")) for item in inner.split(",")]
    if text == "{}":
        return {}
    return _scalar(text)


def _scalar(text: str) -> Any:
    if _QUOTED.fullmatch(text):
        return text[1:-1]
    if " #" in text or text.endswith(":") or ": " in text:
        raise _NotPlain
    if text in _NULLS:
        if not text:
            raise _NotPlain  # an empty flow item ("[a, ]"): PyYAML's business
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if _INT.fullmatch(text):
        if len(text) > 4000:  # past int()'s digit limit: PyYAML's error to give
            raise _NotPlain
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if _WORD.fullmatch(text) or _DIGITS_THEN_LETTERS.fullmatch(text):
        return text
    raise _NotPlain
