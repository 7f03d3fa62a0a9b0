"""The kubelet's plugin watcher for DRA drivers: find registration sockets, GetInfo, validate, connect, notify."""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from gpuslice.wire import dra_v1_grpc, dra_v1_pb2, dra_v1beta1_grpc, dra_v1beta1_pb2, pluginregistration_grpc
from gpuslice.wire import pluginregistration_pb2 as registration_pb2

log = logging.getLogger("gpuslice.kubelet.dra")

DRA_PLUGIN_TYPE = "DRAPlugin"
# What a 1.34+ kubelet supports; the first entry of the *plugin's* list that is here wins.
KUBELET_VERSIONS = {"v1.DRAPlugin": "v1", "v1beta1.DRAPlugin": "v1beta1"}
GET_INFO_TIMEOUT_S = 1.0
NOTIFY_TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 1.0
RECONCILE_S = 0.1  # the real kubelet reconciles every second; the mock is quicker so tests are short


@dataclass
class DraPlugin:
    """A registered driver: its DRA socket, the service version chosen, and the live connection."""

    driver: str
    endpoint: str
    version: str  # "v1" or "v1beta1"
    registration_socket: Path
    identity: tuple[int, int]
    channel: Any

    @property
    def pb(self) -> Any:
        return dra_v1_pb2 if self.version == "v1" else dra_v1beta1_pb2

    def stub(self) -> Any:
        grpc_module = dra_v1_grpc if self.version == "v1" else dra_v1beta1_grpc
        return grpc_module.DRAPluginStub(self.channel)


def _sockets(directory: Path) -> dict[Path, tuple[int, int]]:
    """Socket -> (inode, ctime): a re-created socket may get the old inode back, never the old ctime too."""
    found: dict[Path, tuple[int, int]] = {}
    for root, _, files in os.walk(directory):
        for name in files:
            if name.startswith("."):
                continue
            path = Path(root) / name
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISSOCK(info.st_mode):
                found[path] = (info.st_ino, info.st_ctime_ns)
    return found


class PluginWatcher:
    """Registers every DRA driver that offers a socket in `registry_dir`; forgets those whose socket goes.

    `refused` records (socket, error) for each registration turned down, as the kubelet's log would.
    `on_deregistered(driver)` runs when a driver's socket disappears (the kubelet then wipes its slices).
    """

    def __init__(
        self,
        registry_dir: Path,
        reconcile_s: float = RECONCILE_S,
        on_deregistered: Callable[[str], None] | None = None,
    ) -> None:
        self.registry_dir = registry_dir
        self.reconcile_s = reconcile_s
        self.on_deregistered = on_deregistered
        self.plugins: dict[str, DraPlugin] = {}
        self.refused: list[tuple[str, str]] = []
        self.registrations = 0
        self._attempted: dict[Path, tuple[int, int]] = {}
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.registry_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="kubelet-plugin-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        with self.changed:
            for plugin in self.plugins.values():
                plugin.channel.close()
            self.plugins.clear()
            self._attempted.clear()
            self.changed.notify_all()

    def plugin(self, driver: str) -> DraPlugin | None:
        with self._lock:
            return self.plugins.get(driver)

    def wait_registered(self, driver: str, timeout: float = 10.0, min_registrations: int = 1) -> bool:
        with self.changed:
            return self.changed.wait_for(
                lambda: driver in self.plugins and self.registrations >= min_registrations, timeout
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.reconcile()
            except Exception:  # the watcher must survive anything a plugin does
                log.exception("plugin watcher")
            self._stop.wait(self.reconcile_s)

    def reconcile(self) -> None:
        present = _sockets(self.registry_dir)
        with self._lock:
            gone = [d for d, p in self.plugins.items() if present.get(p.registration_socket) != p.identity]
        for driver in gone:
            self._deregister(driver)
        for path, identity in present.items():
            if self._attempted.get(path) == identity:
                continue
            self._attempted[path] = identity
            self._register(path, identity)
        for path in list(self._attempted):
            if path not in present:
                del self._attempted[path]

    def _deregister(self, driver: str) -> None:
        with self.changed:
            plugin = self.plugins.pop(driver, None)
            self.changed.notify_all()
        if plugin is None:
            return
        plugin.channel.close()
        log.info("DRA driver %s deregistered (its registration socket went away)", driver)
        if self.on_deregistered is not None:
            self.on_deregistered(driver)

    def _register(self, path: Path, identity: tuple[int, int]) -> None:
        channel = grpc.insecure_channel(f"unix:{path}")
        try:
            stub = pluginregistration_grpc.RegistrationStub(channel)  # type: ignore[no-untyped-call]
            try:
                info = stub.GetInfo(registration_pb2.InfoRequest(), timeout=GET_INFO_TIMEOUT_S)
            except grpc.RpcError as exc:
                self.refused.append((str(path), f"GetInfo failed: {exc.code().name}"))
                self._attempted.pop(path, None)  # the reconciler retries a socket that did not answer
                return
            problem, version = self._validate(info)
            connection = None
            if problem is None:
                connection, problem = self._connect(info.endpoint or str(path))
            if problem is not None:
                self.refused.append((str(path), problem))
                self._notify(stub, False, problem)
                return
            assert version is not None and connection is not None
            with self.changed:
                previous = self.plugins.get(info.name)
                self.plugins[info.name] = DraPlugin(info.name, info.endpoint or str(path), version, path, identity,
                                                    connection)  # fmt: skip
                self.registrations += 1
                self.changed.notify_all()
            if previous is not None:
                previous.channel.close()
            self._notify(stub, True, "")
            log.info("registered DRA driver %s at %s (%s)", info.name, info.endpoint, version)
        finally:
            channel.close()

    def _validate(self, info: Any) -> tuple[str | None, str | None]:
        if info.type != DRA_PLUGIN_TYPE:
            return f"RegisterPlugin error -- no handler registered for plugin type: {info.type}", None
        if not info.name:
            return "RegisterPlugin error -- plugin name is empty", None
        for offered in info.supported_versions:
            if offered in KUBELET_VERSIONS:
                return None, KUBELET_VERSIONS[offered]
        offered_text = ", ".join(info.supported_versions) or "none"
        return (
            f"RegisterPlugin error -- none of the versions supported by the plugin ({offered_text}) "
            f"are supported by the kubelet ({', '.join(KUBELET_VERSIONS)})",
            None,
        )

    def _connect(self, endpoint: str) -> tuple[Any, str | None]:
        channel = grpc.insecure_channel(f"unix:{endpoint}")
        try:
            grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            channel.close()
            return None, f"RegisterPlugin error -- cannot connect to {endpoint}"
        return channel, None

    def _notify(self, stub: Any, registered: bool, error: str) -> None:
        try:
            stub.NotifyRegistrationStatus(
                registration_pb2.RegistrationStatus(plugin_registered=registered, error=error), timeout=NOTIFY_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            log.warning("NotifyRegistrationStatus failed: %s", exc.code().name)
