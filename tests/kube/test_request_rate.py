"""Under faults no API loop asks the server more than about once a second: requests counted at the server.

Today's clients sent 17 to 45 requests a second on these answers. The loops run for WINDOW_S against
the hostile server; the server counts what it got. A RetryBackoff of 1 s doubling allows at most three
attempts in 5 s (at 0, >= 1 and >= 3 s), each a GET and a watch at worst: the bound below has room for
jitter, none for a loop that asks again at once. (No assertion is on our speed: only on the count.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuslice.config.node_config import DEFAULT_NODE_LABEL, NodeConfigSettings
from gpuslice.dra.kube import LightkubeResourceApi
from gpuslice.dra.publish import SliceController
from gpuslice.dra.slices import PoolSpec
from gpuslice.kube import ApiCounters, KubeClient
from gpuslice.nodeconfig import NodeConfigWatcher
from gpuslice.nodeconfig.kube import LightkubeNodeSource
from tests.support.api_server import (
    TOKEN,
    Exchange,
    HostileApi,
    endless,
    event_line,
    hostile_api,
    node_object,
    status_object,
)

WINDOW_S = 5.0
MOST = 8  # requests in WINDOW_S: "about once a second", where the old loops sent 85 to 225
NODE = "gpu-node-1"
Behaviour = Callable[[Exchange], bool]


def watches(answer: Behaviour) -> Behaviour:
    """`answer` for watch requests; GETs of the node are the honest store's."""
    return lambda ex: ex.watch and answer(ex)


def flip() -> Iterator[dict[str, str]]:
    while True:
        yield {DEFAULT_NODE_LABEL: "a"}
        yield {DEFAULT_NODE_LABEL: "b"}


_LABELS = flip()

WATCH_FAULTS: dict[str, Behaviour] = {
    "410 to every watch": watches(lambda ex: ex.status(410, "too old")),
    "an ERROR event with 410": watches(lambda ex: ex.stream(iter([event_line("ERROR", status_object(410, "old"))]))),
    "200 and the end at once": watches(lambda ex: ex.stream(iter([]))),
    "one event, then the end": watches(
        lambda ex: ex.stream(iter([event_line("MODIFIED", node_object(NODE, next(_LABELS), 7))]))
    ),
    "a bookmark, then the end": watches(
        lambda ex: ex.stream(iter([event_line("BOOKMARK", {"metadata": {"resourceVersion": "8"}})]))
    ),
    "malformed events, then the end": watches(lambda ex: ex.stream(iter([b"{]\n", event_line("MODIFIED", {})]))),
    "503 to everything": lambda ex: ex.status(503, "overloaded"),
    "a dropped connection": lambda ex: ex.drop(),
    "a node without metadata": lambda ex: ex.json(200, {"kind": "Node"}),
}


def counted(api: HostileApi, start: Callable[[], Callable[[], None]]) -> int:
    """Requests the server saw in WINDOW_S after `start()` (which returns how to stop)."""
    began = time.monotonic()
    stop = start()
    try:
        time.sleep(WINDOW_S)
        return api.count(since=began) - api.count(since=began + WINDOW_S)
    finally:
        stop()


@pytest.mark.parametrize("behaviour", WATCH_FAULTS.values(), ids=WATCH_FAULTS.keys())
def test_the_node_config_watcher_backs_off(tmp_path: Path, behaviour: Behaviour) -> None:
    directory = tmp_path / "configs"
    directory.mkdir()
    for name in ("a", "b"):
        (directory / name).write_text("version: v1\n")
    with hostile_api(HostileApi(behaviour=behaviour, nodes={NODE: {DEFAULT_NODE_LABEL: "a"}})) as (api, url):
        client = KubeClient.for_server(url, "gpuslice-test", token=TOKEN, counters=ApiCounters())
        watcher = NodeConfigWatcher(
            NodeConfigSettings(directory, NODE, DEFAULT_NODE_LABEL), LightkubeNodeSource(client)
        )

        def start() -> Callable[[], None]:
            watcher.start(lambda choice: True)
            return watcher.stop

        seen = counted(api, start)
    assert 2 <= seen <= MOST, api.seen()


def without_metadata(ex: Exchange) -> bool:
    """Lists of slices without metadata, and a slice GET answered by an object without it."""
    if ex.path.endswith("/resourceslices"):
        return ex.json(200, {"kind": "ResourceSliceList", "items": [{"spec": {}}, {"metadata": {}}]})
    return ex.json(200, {"kind": "ResourceSlice"})


SLICE_FAULTS: dict[str, Behaviour] = {
    "a list that pages forever": lambda ex: ex.json(200, {"metadata": {"continue": "more"}, "items": []}),
    "slices without metadata": without_metadata,
    "503 to everything": lambda ex: ex.status(503, "overloaded"),
    "a 200 MiB list": lambda ex: ex.stream(endless(b" " * 65536)),
    "a trickled list": lambda ex: ex.trickle(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: yes\r\n" * 1000, 0.05),
}


@pytest.mark.parametrize("behaviour", SLICE_FAULTS.values(), ids=SLICE_FAULTS.keys())
def test_the_dra_publisher_backs_off(behaviour: Behaviour) -> None:
    with hostile_api(HostileApi(behaviour=behaviour)) as (api, url):
        client = KubeClient.for_server(url, "gpuslice-test", token=TOKEN, counters=ApiCounters())
        pool = PoolSpec("gpu.gpuslice.io", NODE, "v1", "combined")
        controller = SliceController(LightkubeResourceApi(client=client), pool, list, resync_s=10)

        def start() -> Callable[[], None]:
            controller.start()
            return controller.stop

        seen = counted(api, start)
        assert controller.publishes == 0
    assert 1 <= seen <= MOST, api.seen()  # a trickle holds one request for its whole 10 s deadline


def test_the_publisher_outlives_malformed_answers_and_publishes_when_the_api_heals() -> None:
    with hostile_api(HostileApi(behaviour=without_metadata)) as (api, url):
        client = KubeClient.for_server(url, "gpuslice-test", token=TOKEN, counters=ApiCounters())
        pool = PoolSpec("gpu.gpuslice.io", NODE, "v1", "combined")
        controller = SliceController(LightkubeResourceApi(client=client), pool, list, resync_s=10)
        controller.start()
        try:
            deadline = time.monotonic() + 20
            while api.count() < 3:
                assert time.monotonic() < deadline, "the publisher stopped asking"
                time.sleep(0.05)
            assert controller.alive and controller.publishes == 0
            api.behaviour = None  # the API heals
            while not api.slices:
                assert time.monotonic() < deadline, f"never republished: {api.seen()}"
                time.sleep(0.05)
            assert controller.alive
        finally:
            controller.stop()
