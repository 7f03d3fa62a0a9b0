"""Bounded reading and safe YAML: size caps, UTF-8 errors naming byte and offset, alias bombs, deep nesting."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpuslice.fsutil.safe_yaml import MAX_DEPTH, UnsafeYaml, load_yaml
from gpuslice.fsutil.textread import InputTooLarge, NotUtf8, decode_utf8, read_bounded_text
from tests.support.hostile import BOMB


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"name: \xff\n", "invalid config {path}: not UTF-8 text (byte 0xff at offset 6)"),
        (b"\xc3(", "invalid config {path}: not UTF-8 text (byte 0xc3 at offset 0)"),
        (b"ok\n\xe2\x82", "invalid config {path}: not UTF-8 text (byte 0xe2 at offset 3)"),
        # the offset counts a byte-order mark: it is the file's byte
        (b"\xef\xbb\xbfname: \xff\n", "invalid config {path}: not UTF-8 text (byte 0xff at offset 9)"),
    ],
)
def test_bad_bytes_name_the_first_bad_byte_and_its_offset(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    with pytest.raises(NotUtf8) as caught:
        read_bounded_text(path, "config", 1024)
    assert str(caught.value) == message.format(path=path)


def test_size_cap_names_the_limit_and_reads_no_further(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_bytes(b"x" * 2049)
    with pytest.raises(InputTooLarge, match="larger than the limit of 2048 bytes"):
        read_bounded_text(path, "node spec", 2048)
    path.write_bytes(b"x" * 2048)
    assert len(read_bounded_text(path, "node spec", 2048)) == 2048
    with pytest.raises(InputTooLarge):  # a device that never ends is bounded too
        read_bounded_text("/dev/zero", "node spec", 4096)


def test_a_byte_order_mark_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_bounded_text(path, "config", 100) == "a: 1\n"


def test_an_alias_bomb_is_refused_at_once() -> None:
    started = time.perf_counter()
    with pytest.raises(UnsafeYaml, match="expands to more than"):
        load_yaml(BOMB)
    assert time.perf_counter() - started < 5.0  # generous: the point is that it ends; `make bench` measures


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("base: &b {x: 1}\nuse: *b\n", {"base": {"x": 1}, "use": {"x": 1}}),
        ("", None),
        ("- 1\n- [2, 3]\n", [1, [2, 3]]),
    ],
)
def test_ordinary_yaml_and_small_anchors_still_load(text: str, expected: object) -> None:
    assert load_yaml(text)[0] == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper than"),
        ("a: &a [*a]\n", "inside the node it names"),  # a cycle
        ("n: " + "9" * 5000 + "\n", "digits"),  # int() refuses 5,000 digits: a YAML error, not a ValueError
    ],
)
def test_shapes_that_break_the_loader_are_refused(text: str, message: str) -> None:
    with pytest.raises(yaml.YAMLError, match=message):
        load_yaml(text)


def test_several_documents_are_refused() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: 1\n---\nb: 2\n")


@given(st.binary() | st.text().map(lambda text: b"\xef\xbb\xbf" + text.encode("utf-8")))
def test_decoding_is_utf_8_sig_s_and_an_error_names_a_byte_of_the_file(data: bytes) -> None:
    body = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        expected = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        with pytest.raises(NotUtf8) as caught:
            decode_utf8(data, "file", "f")
        found = re.search(r"byte 0x([0-9a-f]{2}) at offset (\d+)\)", str(caught.value))
        assert found is not None
        at = int(found.group(2))
        data[body:at].decode("utf-8")  # all before it is text
        assert at < len(data) and data[at] == int(found.group(1), 16)
    else:
        assert decode_utf8(data, "file", "f") == expected
