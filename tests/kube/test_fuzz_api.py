"""Fuzzing the API client with random hostile answers: each request gives its result or a KubeError, nothing else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuslice.kube import ApiCounters, KubeClient, KubeError, Limits
from gpuslice.kube.resources import generic_resource, node_resource
from tests.support.api_server import TOKEN, Exchange, HostileApi, hostile_api, node_object
from tests.support.fuzz import json_values, mutated

LIMITS = Limits(deadline_s=0.5, max_body_bytes=64 * 1024, max_line_bytes=16 * 1024, max_pages=2, watch_grace_s=0.5)
SLICE = generic_resource("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", namespaced=False)
GOOD = json.dumps({"metadata": {"continue": "x"}, "items": [node_object("n1", {"a": "b"}, 3)]}).encode()
STATUSES = st.sampled_from([200, 201, 204, 301, 400, 401, 404, 409, 410, 422, 429, 500, 503])


def objects() -> st.SearchStrategy[Any]:
    """Kubernetes-shaped JSON with hostile values where the client looks."""
    metadata = st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.text(max_size=8), json_values()),
            "resourceVersion": st.one_of(st.text(max_size=4), json_values()),
            "labels": st.one_of(st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3), json_values()),
            "continue": st.one_of(st.text(max_size=8), json_values()),
        },
    )
    item = st.one_of(st.fixed_dictionaries({"metadata": metadata}, optional={"spec": json_values()}), json_values())
    return st.one_of(
        st.fixed_dictionaries(
            {}, optional={"metadata": metadata, "items": st.one_of(st.lists(item, max_size=4), item)}
        ),
        st.fixed_dictionaries(
            {"type": st.sampled_from(["ADDED", "MODIFIED", "BOOKMARK", "ERROR", "X"]), "object": item}
        ),
        item,
    )


BODIES = st.one_of(
    objects().map(lambda value: json.dumps(value).encode()),
    mutated(GOOD),
    st.binary(max_size=64),
    st.lists(objects().map(lambda value: json.dumps(value).encode()), max_size=4).map(b"\n".join),
)
# How the body travels: with its length, a lying length, chunked, or cut by a closed connection.
FRAMINGS = st.sampled_from(["length", "short-length", "long-length", "chunked", "cut"])


def answer(status: int, body: bytes, framing: str) -> Any:
    def behave(ex: Exchange) -> bool:
        handler = ex.handler
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        if framing == "chunked":
            return _chunked(ex, body)
        declared = {"length": len(body), "short-length": max(0, len(body) - 3), "long-length": len(body) + 3}
        handler.send_header("Content-Length", str(declared.get(framing, len(body) + 100)))
        handler.end_headers()
        handler.wfile.write(body)
        if framing in ("long-length", "cut"):
            return ex.drop()
        return True

    return behave


def _chunked(ex: Exchange, body: bytes) -> bool:
    handler = ex.handler
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for part in (body[: len(body) // 2], body[len(body) // 2 :]):
        if part:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
    handler.wfile.write(b"0\r\n\r\n")
    handler.close_connection = True
    return True


def requests(kube: KubeClient) -> Iterator[Any]:
    yield lambda: kube.get(node_resource(), "n1")
    yield lambda: kube.get(SLICE, "s1")
    yield lambda: kube.list_all(SLICE, fields={"spec.driver": "d"})
    yield lambda: list(kube.watch(node_resource(), resource_version="1", server_timeout_s=0))
    yield lambda: kube.delete(SLICE, "s1")


@settings(max_examples=25)
@given(STATUSES, BODIES, FRAMINGS)
def test_fuzz_api_answers(status: int, body: bytes, framing: str) -> None:
    counters = ApiCounters()
    with hostile_api(HostileApi(behaviour=answer(status, body, framing))) as (_, url):
        kube = KubeClient.for_server(url, "gpuslice-fuzz", token=TOKEN, limits=LIMITS, counters=counters)
        for request in requests(kube):
            try:
                request()
            except KubeError as exc:
                assert "\n" not in str(exc) and len(str(exc)) < 1000
        kube.close()
    snapshot = counters.snapshot()
    assert snapshot.requests >= 5
