"""Kubelet restarts: re-registration every time, no leaks, and a kubelet that is not there yet."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from gpuslice.kubelet import MockKubelet
from gpuslice.plugin.kubelet_watch import SETTLE_S
from tests.support.process import finish, plugin_process, reap
from tests.support.stack import TIME_SLICED_4, Stack, start_stack

RESTARTS = 50
WAIT_S = 10.0


def open_fds() -> list[str]:
    fds = []
    for name in os.listdir("/proc/self/fd"):
        try:
            fds.append(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:  # the fd of the listdir itself is gone by now
            continue
    return fds


THREAD_POOL_SLACK = 2


def resource_counts(directory: Path) -> dict[str, int]:
    fds = open_fds()
    return {
        "threads": threading.active_count(),
        "fds": len(fds),
        "socket fds": sum(1 for target in fds if target.startswith("socket:")),
        "socket files": sum(1 for entry in directory.iterdir() if stat.S_ISSOCK(entry.lstat().st_mode)),
    }


def settled_counts(directory: Path, limit: dict[str, int], timeout: float = 10.0) -> dict[str, int]:
    """Counts once they are back within `limit`, or the last counts after `timeout`.

    A connection being closed or a worker finishing can lag the registration by a few milliseconds;
    a leak never comes back down, so waiting a little tells the two apart.
    """
    deadline = time.monotonic() + timeout
    while True:
        counts = resource_counts(directory)
        if all(counts[key] <= limit[key] for key in limit) or time.monotonic() > deadline:
            return counts
        time.sleep(0.02)


def test_fifty_restarts_in_a_row_reregister_every_time_without_leaks(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir, config=TIME_SLICED_4)
    stacks.append(stack)
    resource = stack.plan.resources[0]
    kubelet = stack.kubelet
    for warm_up in range(1, 4):  # grpc's lazily created pollers and pools settle in the first cycles
        kubelet.restart()
        assert kubelet.wait_for(resource=resource.name, min_registrations=1 + warm_up, allocatable=16, timeout=WAIT_S)
    before = resource_counts(kubelet.device_plugin_dir)
    registrations = kubelet.registration_count(resource.name)
    for n in range(1, RESTARTS + 1):
        kubelet.restart()
        assert kubelet.wait_for(
            resource=resource.name, min_registrations=registrations + n, allocatable=16, timeout=WAIT_S
        ), f"not registered again after restart {n}"
        assert kubelet.resource(resource.name).registered  # type: ignore[union-attr]
    # A gRPC server's thread pool may add a worker when two calls overlap on a loaded machine: bounded by
    # the pool size and not a leak. A leak grows with every restart, so 50 restarts would show >= 50.
    limit = {**before, "threads": before["threads"] + THREAD_POOL_SLACK}
    after = settled_counts(kubelet.device_plugin_dir, limit)
    assert all(after[key] <= limit[key] for key in limit), (before, after)
    assert stack.runtime.watcher is not None and stack.runtime.watcher.wait_registered(WAIT_S)
    assert stack.runtime.ready() == (True, "ok")


def test_health_marks_survive_a_kubelet_restart(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir, config=TIME_SLICED_4)
    stacks.append(stack)
    gpu = stack.node.gpus[0].uuid
    stack.write(f"{gpu} 79")
    assert stack.wait_health(stack.expected_health({gpu}))
    stack.kubelet.restart()
    assert stack.kubelet.wait_for(resource="nvidia.com/gpu", min_registrations=2, timeout=WAIT_S)
    assert stack.wait_health(stack.expected_health({gpu}))


def test_own_socket_removed_triggers_registration(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir)
    stacks.append(stack)
    (socket,) = stack.manager.socket_paths
    socket.unlink()
    assert stack.kubelet.wait_for(resource="nvidia.com/gpu", min_registrations=2, allocatable=4, timeout=WAIT_S)
    assert socket.is_socket()


def test_kubelet_absent_at_start_is_retried_until_it_comes(
    stacks: list[Stack], workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="gpuslice.plugin.kubelet")
    kubelet = MockKubelet(workdir / "dp", dial_timeout_s=2.0, checkpoint_enabled=False)
    stack = start_stack(workdir, kubelet=kubelet, wait=False)
    stacks.append(stack)
    assert stack.runtime.ready() == (False, f"not registered with the kubelet at {kubelet.socket_path}")
    assert "cannot register with the kubelet" in caplog.text and "retrying in" in caplog.text
    kubelet.start()
    assert stack.wait_registered()
    assert stack.runtime.watcher is not None and stack.runtime.watcher.wait_registered(WAIT_S)
    assert stack.runtime.ready() == (True, "ok")


def test_kubelet_stopped_and_started_again(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir)
    stacks.append(stack)
    stack.kubelet.stop()
    stack.kubelet.start()  # a new kubelet process: wipes the directory, new kubelet.sock
    assert stack.wait_registered(min_registrations=2)


def test_no_registration_without_a_change(stacks: list[Stack], workdir: Path) -> None:
    stack = start_stack(workdir)
    stacks.append(stack)
    assert stack.runtime.watcher is not None
    for _ in range(5):
        stack.runtime.watcher.check()
    assert stack.kubelet.registration_count("nvidia.com/gpu") == 1


def test_plugin_process_waits_for_an_absent_kubelet(workdir: Path) -> None:
    """`gpuslice plugin` started before the kubelet: no crash, a log line, registered once the kubelet is up."""
    directory = workdir / "dp"
    args = ["--backend", "fake", "--node-spec", "preset:h100x4", "--kubelet-socket", str(directory / "kubelet.sock")]
    process = plugin_process(args, stdout=subprocess.DEVNULL)
    kubelet = MockKubelet(directory, dial_timeout_s=5.0, checkpoint_enabled=False)
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if "cannot register with the kubelet" in line:
                assert "retrying in" in line
                break
        assert process.poll() is None, "the plugin must keep running without a kubelet"
        kubelet.start()
        assert kubelet.wait_for(resource="nvidia.com/gpu", registered=True, allocatable=4, timeout=WAIT_S * 2)
        code, _ = finish(process, signal.SIGTERM, timeout=WAIT_S * 2)
    finally:
        reap(process)
        kubelet.stop()
    assert code == 0


def test_a_replaced_server_socket_is_not_a_kubelet_restart(stacks: list[Stack], workdir: Path) -> None:
    """A reload that restarts one resource's server gives it a new socket file: no re-registration of all."""
    stack = start_stack(workdir, config=TIME_SLICED_4)
    stacks.append(stack)
    watcher = stack.runtime.watcher
    assert watcher is not None
    watcher.stop()  # drive the checks by hand
    (resource,) = stack.plan.resources
    (old_server,) = stack.manager.servers
    assert stack.manager.update([dataclasses.replace(resource, devices=resource.devices[:-1])]) == (resource.name,)
    assert stack.kubelet.wait_for(resource=resource.name, min_registrations=2, capacity=15, timeout=WAIT_S)
    assert stack.manager.servers[0] is not old_server  # a new server on a new socket file (often the same inode)
    watcher.check()
    time.sleep(SETTLE_S + 0.05)  # past the settle time, a suspicion would have turned into a re-registration
    watcher.check()
    assert watcher.registrations == 1
    assert stack.kubelet.registration_count(resource.name) == 2
