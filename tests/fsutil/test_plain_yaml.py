"""The plain-YAML reader answers only where PyYAML agrees: side by side on written, tricky, generated and shipped
documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuslice.fsutil.plain_yaml import read_plain_yaml

ROOT = Path(__file__).resolve().parents[2]


def agrees(text: str) -> bool:
    """The reader's answer is PyYAML's whenever it answers; returns whether it answered."""
    plain, data = read_plain_yaml(text)
    if plain:
        assert data == yaml.safe_load(text), text
        assert type(data) is type(yaml.safe_load(text))
    return plain


# Documents the reader must take (a config file of the usual shapes), each with PyYAML's meaning.
TAKEN = [
    "version: v1\n",
    "version: v1\nflags:\n  migStrategy: none\n  failOnInitError: true\n",
    "flags:\n  plugin:\n    deviceListStrategy: [envvar, volume-mounts]\n    passDeviceSpecs: false\n",
    "sharing:\n  timeSlicing:\n    resources:\n      - name: nvidia.com/gpu\n        replicas: 2\n",
    "sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n    - name: x\n",
    "gfd:\n  sleepInterval: 60s\n  noTimestamp: no\n",
    "a: 'quoted: value'\nb: \"double # not a comment\"\n",
    "# a comment\n\nkey: value with spaces\n  # an indented comment\nother: /\n",
    "empty:\nlist: []\nmap: {}\nnull_word: null\ntilde: ~\n",
    "n: 0\nf: 1.50\nbig: 123456789012345678901234567890\n",
    "items:\n-\n  - a\n  - b\n- c\n",
    "  indented: top\n  level: 1\n",
    "",
    "# only a comment\n",
]

# Shapes where YAML 1.1 means something other than the text, or that need PyYAML: the reader must decline or
# agree, never differ.
TRICKY_SCALARS = [
    "yes",
    "No",
    "ON",
    "off",
    "y",
    "n",
    "~",
    "null",
    "NULL",
    "Null",
    "0x1F",
    "0o17",
    "017",
    "0b101",
    "1_000",
    "1:30",
    "190:20:30",
    "2001-12-14",
    "2001-12-14t21:59:43.10-05:00",
    ".inf",
    "-.inf",
    ".nan",
    "1e5",
    "1.0e+5",
    "-1",
    "+1",
    "-0.5",
    "=",
    "<<",
    "60s",
    "5m",
    "0s",
    "a: b",
    "a #b",
    "#c",
    "'single'",
    "'it''s'",
    '"esc\\n"',
    '"plain"',
    "[a, b]",
    "[a, [b]]",
    "[a, ]",
    "{a: 1}",
    "&anchor x",
    "*alias",
    "!!str 1",
    "|",
    ">",
    "@x",
    "`x`",
    "%x",
    "a  b",
    "über",
    "x:",
    "- x",
    "?x",
    "a,b",
    "true",
    "True",
    "TRUE",
    "tRUE",
]


@pytest.mark.parametrize("text", TAKEN)
def test_plain_documents_are_read_as_pyyaml_reads_them(text: str) -> None:
    assert agrees(text)


@pytest.mark.parametrize("scalar", TRICKY_SCALARS)
@pytest.mark.parametrize("shape", ["key: {}\n", "- {}\n", "key: [{}]\n", "outer:\n  key: {}\n"])
def test_a_tricky_scalar_is_declined_or_read_as_pyyaml_reads_it(scalar: str, shape: str) -> None:
    text = shape.format(scalar)
    try:
        yaml.safe_load(text)
    except yaml.YAMLError:
        assert read_plain_yaml(text) == (False, None)
        return
    agrees(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # a duplicate key
        "a: &x 1\nb: *x\n",  # anchors and aliases
        "--- \na: 1\n",  # a document marker
        "a: 1\n---\nb: 2\n",  # two documents
        "a:\tb\n",  # a tab
        "a: 1\r\n",  # a CR
        "a: b\n  c\n",  # a folded plain scalar
        "a: |\n  text\n",  # a block scalar
        "yes: 1\n",  # a key YAML 1.1 reads as a bool
        "1: x\n",  # a key it reads as an int
        "a:\n  - x\n b: 1\n",  # indentation PyYAML refuses
        "- a\nb: 1\n",  # a sequence, then a mapping at the same level
        "x" * 10 + ":b\n",  # no space after the colon: one scalar to YAML
        "a: 1\n" + "  " * 0 + "b:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 103)),  # too deep
    ],
)
def test_what_needs_pyyaml_is_declined(text: str) -> None:
    assert read_plain_yaml(text) == (False, None)


def shipped_yaml() -> list[Path]:
    found = [*ROOT.glob("docs/**/*.yaml"), *ROOT.glob("deploy/**/*.yaml"), *ROOT.glob("tests/**/*.yaml")]
    return sorted(path for path in found if path.stat().st_size < 1 << 20)


@pytest.mark.parametrize("path", shipped_yaml(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_document_is_declined_or_read_as_pyyaml_reads_it(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        plain, _ = read_plain_yaml(text)
        assert not plain or yaml.safe_load(text) is not None
        return
    if len(list(yaml.safe_load_all(text))) == 1:
        agrees(text)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet="abcXYZ019 ./_-:#'\"[]{},yesnotrufl~", max_size=12),
)
KEYS = st.text(alphabet="abcyesnotrufl019_./-", min_size=1, max_size=8)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=300)
@given(document=DOCUMENTS, flow=st.sampled_from([False, None]), indent=st.sampled_from([2, 4]))
def test_generated_documents_are_declined_or_read_as_pyyaml_reads_them(document: Any, flow: Any, indent: int) -> None:
    agrees(yaml.safe_dump(document, default_flow_style=flow, indent=indent, sort_keys=False))


@settings(max_examples=300)
@given(lines=st.lists(st.text(alphabet="ab01 :-#[],'\"~", max_size=10), max_size=6))
def test_arbitrary_text_is_declined_or_read_as_pyyaml_reads_it(lines: list[str]) -> None:
    text = "\n".join(lines)
    try:
        yaml.safe_load(text)
    except yaml.YAMLError:
        assert read_plain_yaml(text) == (False, None), text
        return
    agrees(text)
