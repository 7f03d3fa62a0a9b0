"""The API client against a hostile server: every answer beyond a limit is refused with its own clear error."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpuslice.kube import (
    ApiCounters,
    DeadlineExceeded,
    Gone,
    KubeClient,
    KubeError,
    Limits,
    Malformed,
    NoConfig,
    NotFound,
    TooLarge,
    TooManyPages,
)
from gpuslice.kube.resources import node_resource
from tests.support.api_server import (
    TOKEN,
    Exchange,
    HostileApi,
    MiB,
    endless,
    event_line,
    hostile_api,
    node_object,
    status_object,
)

LIMITS = Limits(deadline_s=1.0, max_body_bytes=1 * MiB, max_line_bytes=1 * MiB, max_pages=2, watch_grace_s=1.0)
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"


def client(url: str, counters: ApiCounters | None = None) -> KubeClient:
    return KubeClient.for_server(url, "gpuslice-test", token=TOKEN, limits=LIMITS, counters=counters or ApiCounters())


def get_node(kube: KubeClient) -> Any:
    return kube.get(node_resource(), "n1", what="get node n1")


def list_nodes(kube: KubeClient) -> Any:
    return kube.list_all(node_resource(), what="list nodes")


def watch_nodes(kube: KubeClient) -> Any:
    return list(kube.watch(node_resource(), resource_version="1", server_timeout_s=1, what="watch nodes"))


def lines(*chunks: bytes) -> Callable[[Exchange], bool]:
    return lambda ex: ex.stream(iter(chunks))


def trickled_body(ex: Exchange) -> bool:
    ex.handler.wfile.write(HEADERS)
    return ex.trickle(b"{" + b" " * 99, 0.05)


def declared_huge(ex: Exchange) -> bool:
    ex.handler.send_response(200)
    ex.handler.send_header("Content-Type", "application/json")
    ex.handler.send_header("Content-Length", str(200 * MiB))
    ex.handler.end_headers()
    return ex.drop()


def endless_pages(ex: Exchange) -> bool:
    page = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"continue": "more"}, "items": []}
    return ex.json(200, page)


def silent(ex: Exchange) -> bool:
    ex.closing.wait()
    return ex.drop()


# (what the server does, the request, the error it must end in, words of the message)
REFUSALS: list[tuple[str, Callable[[Exchange], bool], Callable[[KubeClient], Any], type[KubeError], str]] = [
    ("headers trickled 1 byte per 50 ms", lambda ex: ex.trickle(HEADERS, 0.05), get_node, DeadlineExceeded, "deadline"),
    ("body trickled", trickled_body, get_node, DeadlineExceeded, "deadline"),
    ("no answer at all", silent, get_node, DeadlineExceeded, "deadline"),
    ("a 200 MiB Content-Length", declared_huge, get_node, TooLarge, "declares 209715200 bytes"),
    ("a 200 MiB chunked body", lambda ex: ex.stream(endless(b" " * 65536)), get_node, TooLarge, "over 1048576 bytes"),
    ("a list that pages forever", endless_pages, list_nodes, TooManyPages, "after 2 pages"),
    ("a 300 MiB watch line", lambda ex: ex.stream(endless(b"x" * 65536)), watch_nodes, TooLarge, "watch line"),
    ("a watch that trickles", lambda ex: ex.stream(endless(b"\n")), watch_nodes, DeadlineExceeded, "deadline"),
    ("a node without metadata", lambda ex: ex.json(200, {"kind": "Node"}), get_node, Malformed, "not a Node"),
    (
        "a node with bad labels",
        lambda ex: ex.json(200, {"metadata": {"name": "n1", "labels": 5}}),
        get_node,
        Malformed,
        "not a Node",
    ),
    ("not JSON", lambda ex: ex.json(200, "x"), get_node, Malformed, "not a JSON object"),
    ("a JSON array", lambda ex: ex.json(200, [1]), get_node, Malformed, "not a JSON object"),
    ("503", lambda ex: ex.status(503, "busy"), get_node, KubeError, "get node n1: 503: busy"),
    ("404", lambda ex: ex.status(404, "no such node"), get_node, NotFound, "404: no such node"),
    ("an HTML error page", lambda ex: ex.json(502, "<html>"), get_node, KubeError, "502"),
    ("410 to the watch", lambda ex: ex.status(410, "too old"), watch_nodes, Gone, "410: too old"),
    ("an ERROR event with 410", lines(event_line("ERROR", status_object(410, "too old"))), watch_nodes, Gone, "410"),
    (
        "an ERROR event with 500",
        lines(event_line("ERROR", status_object(500, "oops"))),
        watch_nodes,
        KubeError,
        "500",
    ),
    ("items that are not a list", lambda ex: ex.json(200, {"items": {}}), list_nodes, Malformed, "items"),
    ("a dropped connection", lambda ex: ex.drop(), get_node, KubeError, "get node n1"),
]


@pytest.mark.parametrize(
    ("behaviour", "request_", "error", "words"), [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_hostile_answers_are_refused_with_a_clear_error(
    behaviour: Callable[[Exchange], bool], request_: Callable[[KubeClient], Any], error: type[KubeError], words: str
) -> None:
    counters = ApiCounters()
    with hostile_api(HostileApi(behaviour=behaviour)) as (_, url):
        kube = client(url, counters)
        with pytest.raises(error) as caught:
            request_(kube)
        kube.close()
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)
    assert counters.snapshot().errors.get(caught.value.kind, 0) >= 1


def test_malformed_objects_in_lists_and_watches_are_counted_and_skipped() -> None:
    good = node_object("n1", {"a": "b"}, 5)
    items = [{"spec": {}}, "x", {"metadata": {"name": ""}}, good, {"metadata": {"name": "n2", "labels": 5}}]

    def answer(ex: Exchange) -> bool:
        if ex.watch:
            return ex.stream(
                iter(
                    [
                        b"not json\n",
                        event_line("MODIFIED", {"kind": "Node"}),
                        event_line("SURPRISE", good),
                        event_line("MODIFIED", good),
                        json.dumps([1]).encode() + b"\n",
                        event_line("BOOKMARK", {"metadata": {"resourceVersion": "9"}}),
                    ]
                )
            )
        return ex.json(200, {"kind": "NodeList", "metadata": {}, "items": items})

    counters = ApiCounters()
    with hostile_api(HostileApi(behaviour=answer)) as (_, url):
        kube = client(url, counters)
        listed = list_nodes(kube)
        events = watch_nodes(kube)
    assert [node.metadata.name for node in listed] == ["n1"]
    assert [(event.type, event.resource_version) for event in events] == [("MODIFIED", "5"), ("BOOKMARK", "9")]
    assert counters.snapshot().malformed == 4 + 4


def test_a_watch_may_be_quiet_for_longer_than_a_request_deadline() -> None:
    def slow_event(ex: Exchange) -> bool:
        def chunks() -> Iterator[bytes]:
            ex.closing.wait(2 * LIMITS.deadline_s)
            yield event_line("MODIFIED", node_object("n1", {}, 4))

        return ex.stream(chunks())

    with hostile_api(HostileApi(behaviour=slow_event)) as (_, url):
        events = list(client(url).watch(node_resource(), resource_version="1", server_timeout_s=5))
    assert [event.resource_version for event in events] == ["4"]


def test_an_honest_list_follows_its_pages() -> None:
    def paged(ex: Exchange) -> bool:
        token = ex.query.get("continue")
        metadata = {} if token else {"continue": "page-2"}
        return ex.json(200, {"metadata": metadata, "items": [node_object(token or "first", {}, 1)]})

    with hostile_api(HostileApi(behaviour=paged)) as (api, url):
        names = [node.metadata.name for node in list_nodes(client(url))]
    assert names == ["first", "page-2"]
    assert all("limit=" in seen for seen in api.seen())


def test_without_a_configuration_requests_fail_as_no_config(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    kube = KubeClient.from_environment("gpuslice-test", counters=ApiCounters())
    assert not kube.configured
    assert "no API server configured" in caplog.text
    with pytest.raises(NoConfig, match="get node n1: no API server configured"):
        get_node(kube)


def test_close_ends_a_request_blocked_on_a_silent_server() -> None:
    import threading

    outcome: list[BaseException] = []
    with hostile_api(HostileApi(behaviour=silent)) as (api, url):
        kube = KubeClient.for_server(url, "t", token=TOKEN, limits=Limits(deadline_s=600), counters=ApiCounters())

        def blocked() -> None:
            try:
                get_node(kube)
            except KubeError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=blocked)
        thread.start()
        while api.count() == 0:
            thread.join(0.01)
        kube.close()
        thread.join(30)  # well below the 600 s deadline: close() is what ended it
    assert not thread.is_alive()
    assert outcome and "closed" in str(outcome[0])
