"""Follow this node's config label and switch the served config when it changes (keeping the old one on error)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from gpuslice.config.node_config import (
    NodeConfigChoice,
    NodeConfigError,
    NodeConfigSettings,
    choose_config,
    list_configs,
)
from gpuslice.kube import RetryBackoff
from gpuslice.nodeconfig.source import NodeSource, NodeSourceError, WatchExpired

log = logging.getLogger("gpuslice.nodeconfig")

# True when the chosen config now serves; False when it was refused and the previous one still serves.
ApplyConfig = Callable[[NodeConfigChoice], bool]
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0
# How long the start waits for the node's label before choosing without it (the thread reads it later).
START_WAIT_S = 5.0
# A watch that ends sooner than this without an error was no success: the next one waits its backoff
# (a server that answers 200 and closes at once must not be asked again at once).
HEALTHY_STREAM_S = 10.0
_UNSEEN = object()  # the label has not been read yet (so None, "no label", is a change)


class NodeConfigObserver(Protocol):
    """What the watcher reports (NodeConfigMetrics turns it into Prometheus metrics)."""

    def serving(self, choice: NodeConfigChoice) -> None:
        """`choice` serves now, and is what the label asks for."""

    def refused(self, wanted: str | None, reason: str) -> None:
        """The label asks for `wanted` (None: no label) and it is not served: `reason` is a short code."""

    def api_error(self) -> None:
        """A GET or watch of the node failed (it is retried)."""


class NodeConfigWatcher:
    """Reads the node's label at start (`initial_choice`), then follows it on a thread (`start`/`stop`).

    The thread GETs the node, then watches it from that resource version; bookmarks move the version on,
    a dropped connection resumes the watch from the last version seen, and a 410 Gone (version too old)
    starts again with a GET. Every fault (an error, a 410, a watch that ends early) waits a RetryBackoff
    before the next request, and only a watch that ran HEALTHY_STREAM_S resets it: events do not, so a
    server that answers with one event and hangs up is asked at most once a second, then ever more slowly.
    Only a change of this node's label value leads to a choice (nodes are MODIFIED every few seconds by
    status updates). An unexpected error in an attempt is logged and retried; it never ends the thread.
    """

    def __init__(
        self,
        settings: NodeConfigSettings,
        source: NodeSource,
        observer: NodeConfigObserver | None = None,
        *,
        retry_first_s: float = RETRY_FIRST_S,
        retry_max_s: float = RETRY_MAX_S,
        start_wait_s: float = START_WAIT_S,
        healthy_stream_s: float = HEALTHY_STREAM_S,
    ) -> None:
        self.settings = settings
        self.source = source
        self.observer = observer
        self.retry_first_s = retry_first_s
        self.retry_max_s = retry_max_s
        self.start_wait_s = start_wait_s
        self.healthy_stream_s = healthy_stream_s
        self.current: NodeConfigChoice | None = None
        self._seen: object = _UNSEEN
        self._apply: ApplyConfig | None = None
        self._stop = threading.Event()
        self._applying = threading.Lock()  # held while a choice is made and applied; stop() waits for it
        self._thread: threading.Thread | None = None
        self._resource_version: str | None = None

    def initial_choice(self) -> NodeConfigChoice:
        """The config to start with; NodeConfigError when none can be chosen (the process should not start).

        The label is waited for at most `start_wait_s`; when the API cannot answer by then the label counts
        as absent (default, then fallbacks) and the thread keeps trying, switching when it arrives. A label
        naming no config falls back too, and says so.
        """
        value: str | None = None
        try:
            state = self.source.get(self.settings.node_name, self.start_wait_s)
        except NodeSourceError as exc:
            self._api_error(exc)
            log.warning("node %s: label unreadable at start, choosing without it", self.settings.node_name)
        else:
            self._resource_version = state.resource_version
            value = state.labels.get(self.settings.label)
            self._seen = value
        choice = self._choose(value)
        if choice.problem:
            log.error("node label %s: %s; starting with %s", self.settings.label, choice.problem, choice.describe())
            self._refused(value, "unknown_config")
        else:
            log.info("node %s: starting with %s", self.settings.node_name, choice.describe())
            if self.observer is not None:
                self.observer.serving(choice)
        self.current = choice
        return choice

    def start(self, apply: ApplyConfig) -> None:
        """Follow the label on a daemon thread; `apply` switches the served config."""
        if self._thread is not None:
            return
        self._apply = apply
        self._thread = threading.Thread(target=self._run, name="gpuslice-node-config", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        """False when the following thread was started and has died (the /healthz answer)."""
        return self._thread is None or self._thread.is_alive() or self._stop.is_set()

    def stop(self, timeout_s: float = 0.5) -> None:
        """Stop following: waits for a reload in progress, and nothing is applied after this returns.

        The thread itself is only briefly waited for: a watch blocked on a quiet stream may not notice
        that the client was closed, and as a daemon thread it cannot keep the process alive.
        """
        self._stop.set()
        self.source.close()
        with self._applying:
            pass
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        backoff = RetryBackoff(self.retry_first_s, max(self.retry_max_s, self.retry_first_s))
        while not self._stop.is_set():
            if self._attempt():
                backoff.success()
            elif backoff.wait(self._stop):
                return

    def _attempt(self) -> bool:
        """One GET (when needed) and one watch stream; True when it counts as a success."""
        started = time.monotonic()
        try:
            if self._resource_version is None:
                state = self.source.get(self.settings.node_name)
                self._resource_version = state.resource_version
                self.labels_seen(state.labels)
            for event in self.source.watch(self.settings.node_name, self._resource_version):
                if self._stop.is_set():
                    return True
                self._resource_version = event.resource_version or self._resource_version
                if event.kind in ("ADDED", "MODIFIED") and event.labels is not None:
                    self.labels_seen(event.labels)
        except WatchExpired as exc:
            log.info("node %s: %s; getting the node again", self.settings.node_name, exc)
            self._resource_version = None
            return False
        except NodeSourceError as exc:
            self._api_error(exc)
            return False
        except Exception:  # a bug must not end the thread: the label would never be followed again
            log.exception("node %s: following the label failed; retrying", self.settings.node_name)
            self._seen, self._resource_version = _UNSEEN, None  # the retry reads and judges the label anew
            if self.observer is not None:
                self.observer.api_error()
            return False
        lived = time.monotonic() - started
        if lived < self.healthy_stream_s:
            log.info("node %s: the watch ended after %.1f s; waiting before the next", self.settings.node_name, lived)
            return False
        return True

    def labels_seen(self, labels: Mapping[str, str]) -> None:
        """The node's labels now: choose and apply a config if this node's label value changed."""
        with self._applying:
            if not self._stop.is_set():
                self._labels_seen(labels)

    def _labels_seen(self, labels: Mapping[str, str]) -> None:
        value = labels.get(self.settings.label)
        if value == self._seen:
            return
        self._seen = value
        try:
            choice = self._choose(value)
        except NodeConfigError as exc:
            log.error("node label %s=%s: %s; keeping %s", self.settings.label, value, exc, self._describe_current())
            self._refused(value, "no_config")
            return
        if choice.problem:
            log.error("node label %s: %s; keeping %s", self.settings.label, choice.problem, self._describe_current())
            self._refused(value, "unknown_config")
            return
        if self.current is not None and choice.name == self.current.name:
            self.current = choice
            if self.observer is not None:
                self.observer.serving(choice)
            return
        log.info("node label %s=%s: switching to %s", self.settings.label, value, choice.describe())
        if self._apply is not None and not self._apply(choice):
            log.error("%s could not be applied; keeping %s", choice.describe(), self._describe_current())
            self._refused(value, "invalid_config")
            return
        self.current = choice
        if self.observer is not None:
            self.observer.serving(choice)

    def _choose(self, value: str | None) -> NodeConfigChoice:
        settings = self.settings
        return choose_config(value, list_configs(settings.directory), settings.default, settings.fallbacks)

    def _describe_current(self) -> str:
        return self.current.describe() if self.current is not None else "nothing"

    def _refused(self, wanted: str | None, reason: str) -> None:
        if self.observer is not None:
            self.observer.refused(wanted, reason)

    def _api_error(self, exc: NodeSourceError) -> None:
        log.warning("node %s: %s", self.settings.node_name, exc)
        if self.observer is not None:
            self.observer.api_error()
