"""One log set-up for every command: klog lines, hostile strings escaped, no second logging configuration."""

from __future__ import annotations

import io
import logging
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.logs import configure_logging
from tests.dra.support import DRIVER, NODE, Node, start_plugin
from tests.support.dirs import short_temp_dir
from tests.support.process import clean_env, finish

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuslice"
KLOG_LINE = re.compile(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.]+:\d+\] ")
# A claim UID and name as a hostile API client could send them: each would start a fake klog line, or
# reorder or split the line on a terminal, if it reached the log raw.
FORGED_UID = "u1\nE1202 10:00:00.000000       1 prepare.go:1] forged by the uid"
FORGED_NAME = "claim\u202eevil\u2028I1202 10:00:00.000000       1 x.go:1] forged by the name"
SETUP_CALLS = ("logging.basicConfig", ".setFormatter(", "logging.StreamHandler(", ".addHandler(")


def test_only_the_logs_package_configures_logging() -> None:
    offenders = [
        f"{path.relative_to(SRC)}: {call}"
        for path in sorted(SRC.rglob("*.py"))
        if path.parent.name != "logs"
        for call in SETUP_CALLS
        if call in path.read_text()
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("command", "serves"),
    [
        (["plugin", "--backend", "fake", "--kubelet-socket", "", "--socket-dir", "{dir}"], True),
        (["dra", "--backend", "fake", "--print-resource-slices", "--node-spec", "{dir}/missing.yaml"], False),
        (["labels", "--backend", "fake", "--node-spec", "{dir}/missing.yaml", "--oneshot"], False),
        (["sim", "compare", "--trace", "{dir}/missing.csv"], False),
    ],
    ids=["plugin", "dra", "labels", "sim"],
)
def test_every_command_logs_klog_lines(command: list[str], serves: bool) -> None:
    """What a command logs (a serving one until SIGTERM, the others on their way to an error) is klog."""
    with short_temp_dir("gs") as workdir:
        args = [part.format(dir=workdir) for part in command]
        process = subprocess.Popen(
            [sys.executable, "-m", "gpuslice", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )
        first = process.stderr.readline() if serves and process.stderr is not None else ""
        _, err = finish(process, signal.SIGTERM if serves else None)
    lines = (first + err).splitlines()
    assert not [line for line in lines if re.match(r"(INFO|WARNING|ERROR|DEBUG|[IWEF]) [\w.]+: ", line)], err
    if serves:
        assert lines and all(KLOG_LINE.match(line) for line in lines), err


def test_configure_logging_replaces_only_its_own_handler() -> None:
    root = logging.getLogger()
    foreign = logging.NullHandler()
    root.addHandler(foreign)
    try:
        first = configure_logging(stream=io.StringIO())
        second = configure_logging(stream=io.StringIO(), level=logging.ERROR)
        assert foreign in root.handlers and second in root.handlers and first not in root.handlers
        assert root.level == logging.WARNING, "a quiet command leaves warnings on for the rest of the process"
        assert second.level == logging.ERROR
    finally:
        root.removeHandler(foreign)
        root.removeHandler(second)


def test_forged_claim_names_and_uids_stay_on_one_dra_log_line() -> None:
    """`gpuslice dra`, as a process: a claim whose UID and name carry a newline, U+202E and U+2028."""
    with short_temp_dir("gs") as root:
        node = Node(root)
        kubelet = MockDraKubelet(root, NODE).start()
        process = start_plugin(node, kubelet)
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=20), kubelet.watcher.refused
            plugin = kubelet.watcher.plugin(DRIVER)
            assert plugin is not None
            claims = [
                plugin.pb.Claim(namespace="default", uid=FORGED_UID, name="ok"),
                plugin.pb.Claim(namespace="default", uid="0b3c9a1e-8f7d-4c3b-9a2e-1f0d9c8b7a61", name=FORGED_NAME),
            ]
            request = plugin.pb.NodePrepareResourcesRequest(claims=claims)
            answer = plugin.stub().NodePrepareResources(request, timeout=20)
            assert all(result.error for result in answer.claims.values()), "both claims are refused"
            plugin.stub().NodeUnprepareResources(plugin.pb.NodeUnprepareResourcesRequest(claims=claims), timeout=20)
        finally:
            code, err = finish(process, signal.SIGTERM)
            kubelet.stop()
    assert code == 0, err[-2000:]
    lines = err.splitlines()
    assert "\u202e" not in err and "\u2028" not in err
    assert not any("forged by" in line and not KLOG_LINE.match(line) for line in lines), err[-3000:]
    assert [line for line in lines if line and not KLOG_LINE.match(line) and not line.startswith("\t")] == []
    mentions = [line for line in lines if "forged by the uid" in line]
    assert mentions and all("u1\\nE1202" in line for line in mentions)
