"""The real lightkube client against a Kubernetes API stand-in: Node GET, watch, bookmarks, drops and 410 Gone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import CollectorRegistry

from gpuslice.config.node_config import NodeConfigChoice
from gpuslice.nodeconfig import NodeConfigMetrics, NodeConfigWatcher, NodeSourceError
from gpuslice.nodeconfig.kube import LightkubeNodeSource
from tests.nodeconfig.helpers import LABEL, NODE, config_dir, sample, settings, wait_for
from tests.nodeconfig.kube_server import kube_api, kube_client


@contextmanager
def stopped_at_the_end() -> Iterator[list[NodeConfigWatcher]]:
    """Watchers stopped on the way out; entered before kube_api, so the server has ended their streams by then."""
    watchers: list[NodeConfigWatcher] = []
    try:
        yield watchers
    finally:
        for watcher in watchers:
            watcher.stop()


def test_the_watcher_follows_the_label_through_bookmarks_drops_and_expiry(tmp_path: Path) -> None:
    applied: list[str | None] = []
    directory = config_dir(tmp_path)
    with stopped_at_the_end() as watchers, kube_api(NODE, {LABEL: "a100"}) as (api, url):
        watcher = NodeConfigWatcher(settings(directory), LightkubeNodeSource(kube_client(url)))
        watchers.append(watcher)
        watcher.retry_first_s = 0.01
        assert watcher.initial_choice() == NodeConfigChoice("a100", "label")
        watcher.start(lambda choice: applied.append(choice.name) or True)
        wait_for(lambda: len(api.watch_requests()) == 1, "the first watch")
        first = api.watch_requests()[0]
        assert first["fieldSelector"] == f"metadata.name={NODE}" and first["resourceVersion"] == "1"
        assert first["allowWatchBookmarks"] == "true"
        api.actions.put(("event", "MODIFIED", {LABEL: "a100", "other": "x"}, 2))  # not our label
        api.actions.put(("event", "MODIFIED", {LABEL: "l4"}, 3))
        wait_for(lambda: applied == ["l4"], "the switch to l4")
        api.actions.put(("bookmark", 8))
        api.actions.put(("drop",))
        wait_for(lambda: len(api.watch_requests()) == 2, "the watch resumed after the drop")
        assert api.watch_requests()[1]["resourceVersion"] == "8"
        assert api.gets() == 1  # a drop is no reason to get the node again
        api.labels, api.resource_version = {LABEL: "default"}, 20  # changed while the watch was away
        api.actions.put(("gone",))  # 410 Gone as an ERROR event in the stream
        wait_for(lambda: applied == ["l4", "default"], "the label read again after 410 Gone")
        wait_for(lambda: len(api.watch_requests()) == 3, "the watch from the new version")
        assert api.watch_requests()[2]["resourceVersion"] == "20" and api.gets() == 2
        api.actions.put(("http-gone",))  # 410 Gone as the answer to the watch request
        wait_for(lambda: api.gets() == 3, "a GET after the watch request was refused with 410")


def test_an_api_that_fails_at_start_leaves_the_label_to_later(tmp_path: Path) -> None:
    applied: list[str | None] = []
    registry = CollectorRegistry()
    directory = config_dir(tmp_path)
    with stopped_at_the_end() as watchers, kube_api(NODE, {LABEL: "l4"}) as (api, url):
        api.get_status = 503
        source = LightkubeNodeSource(kube_client(url))
        watcher = NodeConfigWatcher(settings(directory), source, NodeConfigMetrics(registry))
        watchers.append(watcher)
        watcher.retry_first_s = 0.01
        assert watcher.initial_choice() == NodeConfigChoice("default", "named")
        watcher.start(lambda choice: applied.append(choice.name) or True)
        wait_for(lambda: api.gets() >= 2, "a retried GET")
        api.get_status = 200
        wait_for(lambda: applied == ["l4"], "the label once the API answers")
        assert sample(registry, "gpuslice_node_config_serving", config="l4", source="label") == 1
        assert (sample(registry, "gpuslice_node_config_api_errors_total") or 0) >= 2


def test_errors_name_the_request_and_status() -> None:
    with kube_api(NODE, {}) as (api, url):
        api.get_status = 403
        source = LightkubeNodeSource(kube_client(url))
        try:
            source.get(NODE)
        except NodeSourceError as exc:
            assert str(exc) == f"get node {NODE}: 403: try again later"
        else:
            raise AssertionError("a 403 must fail the GET")
        finally:
            source.close()
