"""The kubelet's client side of one registered plugin: the dial-back channel and its ListAndWatch stream."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from gpuslice.kubelet.gotext import go_status_text
from gpuslice.kubelet.views import PluginOptions
from gpuslice.wire import deviceplugin_grpc, deviceplugin_pb2

log = logging.getLogger(__name__)

# The kubelet dials with authority "localhost"; some servers check it.
_CHANNEL_OPTIONS = [("grpc.default_authority", "localhost")]
_JOIN_TIMEOUT_S = 5.0
_DIAL_RETRY_S = 0.05

OnMessage = Callable[["PluginEndpoint", deviceplugin_pb2.ListAndWatchResponse], None]
OnEnd = Callable[["PluginEndpoint", str], None]


class EndpointStopped(Exception):
    """The endpoint was stopped (replaced, kubelet restart or shutdown) before or during the call."""


class DialTimeout(Exception):
    """The plugin socket did not accept a connection in time."""


def accepts_connection(path: Path, timeout_s: float) -> bool:
    """One connect attempt on a unix socket (the transport half of the kubelet's blocking dial)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(max(timeout_s, 0.001))
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


class PluginEndpoint:
    """One connection from the kubelet to a plugin socket, owned by one registration.

    Stopping it cancels a pending dial, cancels the stream, closes the channel and joins the
    stream thread, so nothing outlives it.
    """

    def __init__(self, resource: str, endpoint: str, socket_path: Path) -> None:
        self.resource = resource
        self.endpoint = endpoint
        self.socket_path = socket_path
        self._channel = grpc.insecure_channel(f"unix:{socket_path}", options=_CHANNEL_OPTIONS)
        self.stub: Any = deviceplugin_grpc.DevicePluginStub(self._channel)  # type: ignore[no-untyped-call]
        self._lock = threading.Lock()
        self._stopping = False
        self._ended = False
        self._closed = False
        self._stop_event = threading.Event()
        self._call: Any = None
        self._thread: threading.Thread | None = None

    @property
    def stopping(self) -> bool:
        """True once someone else stopped it: its stream end is then no news to the kubelet."""
        return self._stopping

    @property
    def usable(self) -> bool:
        """The channel is open and the stream has not ended."""
        with self._lock:
            return not (self._stopping or self._ended)

    def dial(self, timeout_s: float) -> None:
        """Wait until the plugin socket accepts a connection, retrying like the kubelet's blocking dial.

        Raises DialTimeout after `timeout_s`, EndpointStopped as soon as the endpoint is stopped.
        A plain socket probe, not grpc.channel_ready_future: grpc's connectivity-polling thread
        raises if the channel is closed under it, which a cancelled registration does.
        """
        deadline = time.monotonic() + timeout_s
        while not self._stop_event.is_set():
            remaining = deadline - time.monotonic()
            if accepts_connection(self.socket_path, remaining):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DialTimeout(str(self.socket_path))
            self._stop_event.wait(min(_DIAL_RETRY_S, remaining))
        raise EndpointStopped(self.resource)

    def get_options(self, timeout_s: float) -> PluginOptions:
        """`GetDevicePluginOptions` on the new connection; raises grpc.RpcError."""
        answer = self.stub.GetDevicePluginOptions(deviceplugin_pb2.Empty(), timeout=timeout_s, wait_for_ready=True)
        return PluginOptions.from_message(answer)

    def start_stream(self, on_message: OnMessage, on_end: OnEnd) -> bool:
        """Open ListAndWatch and consume it in a thread; False if the endpoint was stopped first."""
        with self._lock:
            if self._stopping:
                return False
            self._call = self.stub.ListAndWatch(deviceplugin_pb2.Empty())
            self._thread = threading.Thread(
                target=self._watch, args=(self._call, on_message, on_end), name=f"kubelet-law-{self.resource}"
            )
            self._thread.daemon = True
            self._thread.start()
        return True

    def _watch(self, call: Any, on_message: OnMessage, on_end: OnEnd) -> None:
        cause = "EOF"  # what Go's stream.Recv() reports when the plugin ends the stream cleanly
        try:
            for response in call:
                on_message(self, response)
        except grpc.RpcError as exc:
            cause = go_status_text(exc)
        except Exception as exc:  # a bug in a callback must still end the stream the kubelet way
            log.exception("ListAndWatch handling failed for %s", self.resource)
            cause = repr(exc)
        with self._lock:
            self._ended = True
        on_end(self, cause)
        self._close_channel()

    def stop(self) -> None:
        """Cancel everything in flight, close the channel and join the stream thread."""
        with self._lock:
            self._stopping = True
            call, thread = self._call, self._thread
        self._stop_event.set()
        if call is not None:
            call.cancel()
        self._close_channel()
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_TIMEOUT_S)
            if thread.is_alive():
                log.warning("ListAndWatch thread for %s did not stop", self.resource)

    def _close_channel(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._channel.close()
