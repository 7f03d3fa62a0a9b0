"""Choosing a node's config from its label, a default and NVIDIA's fallbacks; listing a ConfigMap directory."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuslice.config.limits import MAX_CONFIG_BYTES
from gpuslice.config.node_config import (
    MAX_CONFIGS,
    NodeConfigChoice,
    NodeConfigError,
    NodeConfigSettings,
    choose_config,
    list_configs,
    parse_fallbacks,
)

NAMED_AND_SINGLE = ("named", "single")

# label value, available configs, DEFAULT_CONFIG, FALLBACK_STRATEGIES -> (name, source, problem)
CHOICES = [
    ("a100", {"a100", "l4"}, None, NAMED_AND_SINGLE, ("a100", "label", None)),
    ("a100", {"a100", "l4"}, "l4", NAMED_AND_SINGLE, ("a100", "label", None)),  # the label wins over the default
    (None, {"a100", "l4"}, "l4", NAMED_AND_SINGLE, ("l4", "default", None)),
    ("", {"a100", "l4"}, "l4", (), ("l4", "default", None)),  # an empty label value is no label
    (None, {"a100", "default"}, None, NAMED_AND_SINGLE, ("default", "named", None)),
    (None, {"only"}, None, NAMED_AND_SINGLE, ("only", "single", None)),
    (None, {"only", "default"}, None, ("single", "named"), ("default", "named", None)),  # single fails: two
    (None, {"a", "b"}, None, ("named", "single", "empty"), (None, "empty", None)),
    (None, set(), None, ("empty",), (None, "empty", None)),
    ("h100", {"a100", "l4"}, "l4", (), ("l4", "default", "specified config 'h100' does not exist")),
    ("h100", {"only"}, None, NAMED_AND_SINGLE, ("only", "single", "specified config 'h100' does not exist")),
]


@pytest.mark.parametrize(("label", "available", "default", "fallbacks", "expected"), CHOICES)
def test_choice(
    label: str | None,
    available: set[str],
    default: str | None,
    fallbacks: tuple[str, ...],
    expected: tuple[str | None, str, str | None],
) -> None:
    choice = choose_config(label, available, default, fallbacks)  # type: ignore[arg-type]
    assert (choice.name, choice.source, choice.problem) == expected


@pytest.mark.parametrize(
    ("label", "available", "default", "fallbacks", "message"),
    [
        (None, {"a", "b"}, None, NAMED_AND_SINGLE, "no config was set, no default was provided, and all fallbacks"),
        (None, set(), None, NAMED_AND_SINGLE, "available: none"),
        (None, {"a"}, None, (), "fallbacks: none"),
        ("x", {"a", "b"}, None, ("named",), "specified config 'x' does not exist; no config was set"),
        (None, {"a", "b"}, "c", NAMED_AND_SINGLE, "DEFAULT_CONFIG: specified config 'c' does not exist"),
    ],
)
def test_no_choice_says_why(
    label: str | None, available: set[str], default: str | None, fallbacks: tuple[str, ...], message: str
) -> None:
    with pytest.raises(NodeConfigError, match=message):
        choose_config(label, available, default, fallbacks)  # type: ignore[arg-type]


def test_an_overlong_label_value_is_cut_in_the_message() -> None:
    choice = choose_config("x" * 5000, {"x" * 5000, "default"}, None, ("named",))
    assert choice.name == "default" and choice.problem is not None and len(choice.problem) < 120


@pytest.mark.parametrize(
    ("text", "expected"),
    [("named,single", ("named", "single")), (" empty ", ("empty",)), ("", ()), ("single,single", ("single",))],
)
def test_fallback_strategies_parse(text: str, expected: tuple[str, ...]) -> None:
    assert parse_fallbacks(text) == expected


def test_an_unknown_fallback_strategy_is_named() -> None:
    with pytest.raises(NodeConfigError, match="FALLBACK_STRATEGIES: unknown strategy 'first'"):
        parse_fallbacks("named,first")


@pytest.mark.parametrize(
    ("label", "node", "default", "message"),
    [
        ("nvidia.com/", "n", None, "NODE_LABEL: 'nvidia.com/': the name"),
        ("Bad_Prefix/config", "n", None, "NODE_LABEL: 'Bad_Prefix/config': the prefix"),
        ("-config", "n", None, "the name must be 1-63"),
        ("x" * 64, "n", None, "the name must be 1-63"),
        ("nvidia.com/device-plugin.config", "", None, "NODE_NAME: required"),
        ("nvidia.com/device-plugin.config", "n", "../etc", "DEFAULT_CONFIG: '../etc' is not a config name"),
    ],
)
def test_bad_settings_name_the_setting(label: str, node: str, default: str | None, message: str) -> None:
    with pytest.raises(NodeConfigError, match=message):
        NodeConfigSettings(Path("/configs"), node, label, default)


def test_listing_skips_the_configmap_bookkeeping(tmp_path: Path) -> None:
    # What a ConfigMap volume looks like: ..data -> ..2026_12_01_..., and each key a symlink through ..data.
    stamp = tmp_path / "..2026_12_01_21_00_00.123"
    stamp.mkdir()
    for name in ("a100-mig", "l4-ts"):
        (stamp / name).write_text("version: v1\n")
    (tmp_path / "..data").symlink_to(stamp.name)
    for name in ("a100-mig", "l4-ts"):
        (tmp_path / name).symlink_to(Path("..data") / name)
    (tmp_path / "subdir").mkdir()
    assert list_configs(tmp_path) == ("a100-mig", "l4-ts")


def _unix_socket(path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()


# What a hostile or broken host can leave in CONFIG_FILE_SRCDIR, and the words of the warning.
BAD_ENTRIES: list[tuple[str, Callable[[Path], None], str]] = [
    ("a symlink loop", lambda p: p.symlink_to(p.name), "skipping 'bad'"),
    ("a dangling link", lambda p: p.symlink_to("nowhere"), "No such file"),
    ("a FIFO", lambda p: os.mkfifo(p), "not a regular file"),
    ("a socket", _unix_socket, "not a regular file"),
    ("a device", lambda p: p.symlink_to("/dev/null"), "not a regular file"),
    ("a huge file", lambda p: p.write_bytes(b"#" * (MAX_CONFIG_BYTES + 1)), f"over {MAX_CONFIG_BYTES}"),
]


@pytest.mark.parametrize(("make", "words"), [b[1:] for b in BAD_ENTRIES], ids=[b[0] for b in BAD_ENTRIES])
def test_bad_entries_are_skipped_with_a_warning(
    workdir: Path, make: Callable[[Path], None], words: str, caplog: pytest.LogCaptureFixture
) -> None:
    (workdir / "good").write_text("version: v1\n")
    make(workdir / "bad")
    assert list_configs(workdir) == ("good",)
    assert words in caplog.text


def test_listing_errors_name_the_directory(tmp_path: Path) -> None:
    with pytest.raises(NodeConfigError, match=f"CONFIG_FILE_SRCDIR {tmp_path / 'absent'}: cannot list"):
        list_configs(tmp_path / "absent")
    for index in range(MAX_CONFIGS + 1):
        (tmp_path / f"c{index}").touch()
    with pytest.raises(NodeConfigError, match=f"more than {MAX_CONFIGS} entries"):
        list_configs(tmp_path)


def test_the_choice_names_its_file(tmp_path: Path) -> None:
    assert NodeConfigChoice("l4", "label").path(tmp_path) == tmp_path / "l4"
    assert NodeConfigChoice(None, "empty").path(tmp_path) is None
