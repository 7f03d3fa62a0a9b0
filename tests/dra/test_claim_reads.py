"""The claims of one kubelet call are read at once (dra.claim_reads): the first on the calling thread, the rest
in the pool, each bounded by the call's budget."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gpuslice.dra.api import ApiError, InMemoryResourceApi
from gpuslice.dra.claim_reads import ClaimReads
from gpuslice.dra.claims import ClaimRef
from gpuslice.kube.deadline import remaining

REFS = [ClaimRef("default", f"claim-{n}", f"uid-{n}") for n in range(4)]


class RecordingApi(InMemoryResourceApi):
    """Claims in memory; each read is recorded with its thread and the deadline it ran under."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        super().__init__()
        self.barrier = barrier
        self.reads: list[tuple[str, int, float | None]] = []  # (name, thread id, seconds left of its deadline)
        self.lock = threading.Lock()
        for ref in REFS:
            self.put_claim({"metadata": {"namespace": ref.namespace, "name": ref.name, "uid": ref.uid}})

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            self.reads.append((name, threading.get_ident(), remaining()))
        if self.barrier is not None:
            self.barrier.wait()  # every read of the call must be in flight at once to get past this
        return super().get_claim(namespace, name)


@pytest.fixture
def reads_of() -> Iterator[Any]:
    made: list[ClaimReads] = []

    def make(api: RecordingApi, prepared: set[str] | None = None) -> ClaimReads:
        reads = ClaimReads(api, lambda uid: uid in (prepared or set()))
        made.append(reads)
        return reads

    yield make
    for reads in made:
        reads.close()


def test_the_claims_of_one_call_are_read_at_the_same_time(reads_of: Any) -> None:
    # Serial reads would leave the barrier short of parties until its timeout breaks it for all of them.
    api = RecordingApi(threading.Barrier(len(REFS), timeout=30))
    reads = reads_of(api)
    reads.prefetch(REFS, budget_s=60)
    for ref in REFS:
        claim = reads.get_claim(ref.namespace, ref.name)
        assert claim is not None and claim["metadata"]["uid"] == ref.uid
    assert sorted(name for name, _, _ in api.reads) == sorted(ref.name for ref in REFS), "each read once"


def test_the_first_claim_is_read_on_the_calling_thread_within_the_budget(reads_of: Any) -> None:
    api = RecordingApi()
    reads = reads_of(api)
    reads.prefetch(REFS, budget_s=20)
    here = [(name, left) for name, thread, left in api.reads if thread == threading.get_ident()]
    assert [name for name, _ in here] == [REFS[0].name]
    left = here[0][1]
    assert left is not None and 0 < left <= 20, "the API client's deadline on this thread ends with the budget"
    others = [left for name, thread, left in api.reads if thread != threading.get_ident()]
    assert len(others) == len(REFS) - 1


def test_one_claim_is_read_here_and_answered_once(reads_of: Any) -> None:
    api = RecordingApi()
    reads = reads_of(api)
    ref = REFS[0]
    reads.prefetch([ref, ref], budget_s=20)  # the same claim twice in a call: one read
    assert [(name, thread) for name, thread, _ in api.reads] == [(ref.name, threading.get_ident())]
    assert reads.get_claim(ref.namespace, ref.name) is not None
    assert reads.get_claim(ref.namespace, ref.name) is not None  # not prefetched any more: from the API
    assert len(api.reads) == 2


def test_prepared_and_invalid_claims_are_not_read(reads_of: Any) -> None:
    api = RecordingApi()
    reads = reads_of(api, prepared={REFS[0].uid})
    reads.prefetch([REFS[0], ClaimRef("Bad_Namespace", "x", "uid-x"), REFS[1]], budget_s=20)
    assert [name for name, _, _ in api.reads] == [REFS[1].name]


def test_a_failed_read_here_is_that_claims_error_only(reads_of: Any) -> None:
    class Failing(RecordingApi):
        def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
            if name == REFS[0].name:
                raise ApiError("the API server said no", 500)
            return super().get_claim(namespace, name)

    reads = reads_of(Failing())
    reads.prefetch(REFS[:2], budget_s=20)
    with pytest.raises(ApiError, match="said no"):
        reads.get_claim(REFS[0].namespace, REFS[0].name)
    assert reads.get_claim(REFS[1].namespace, REFS[1].name) is not None


def test_a_read_past_the_budget_says_so(reads_of: Any) -> None:
    class Late(RecordingApi):
        def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
            raise ApiError("deadline exceeded")  # what the client raises once this thread's deadline passed

    reads = reads_of(Late())
    reads.prefetch(REFS[:1], budget_s=0)
    with pytest.raises(ApiError, match="took longer than 0 s"):
        reads.get_claim(REFS[0].namespace, REFS[0].name)
