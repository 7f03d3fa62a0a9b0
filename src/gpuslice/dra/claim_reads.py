"""The ResourceClaims of one kubelet call, read concurrently (a bounded pool) before the claims are prepared.

Preparing is serial (one lock), but reading need not be: with a slow API server the claims of a call
would otherwise cost one read deadline each, one after the other, and the last ones would miss the
kubelet's. Each read has its own deadline (the API client's, well below the kubelet's 45 s); a read that
fails or is still running when the call's budget ends becomes that claim's error, never the call's. The
first claim is read on the calling thread, the others meanwhile in the pool.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpuslice.dra.api import ApiError, ResourceApi
from gpuslice.dra.claims import ClaimPrepareError, ClaimRef

READ_WORKERS = 8  # concurrent reads per process: a pod has at most 32 claims, the API server its own limits

_Result = dict[str, Any] | None | ApiError


class ClaimReads:
    """A ResourceApi whose `get_claim` answers from what `prefetch` read for this thread's call (once), and
    from the API otherwise; every other call goes straight through. `prepared(uid)` says which claims
    answer from their record and need no read."""

    def __init__(
        self, api: ResourceApi, prepared: Callable[[str], bool] = lambda uid: False, workers: int = READ_WORKERS
    ) -> None:
        self.api = api
        self._prepared = prepared
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dra-claim-read")
        self._local = threading.local()

    def prefetch(self, refs: Sequence[ClaimRef], budget_s: float) -> None:
        """Read the claims of one call at once; waits at most `budget_s` for them.

        The first claim is read on the calling thread while the pool reads the others: a call of one claim
        (the usual pod) then costs no hand-over to a pool thread and back. That read ends by the budget
        too, through the API client's deadline for this thread (gpuslice.kube.deadline).
        """
        end = time.monotonic() + budget_s
        keys = list(dict.fromkeys((r.namespace, r.name) for r in refs if _valid(r) and not self._prepared(r.uid)))
        # (refused by prepare with its own message, or answered from its record: not read)
        futures = {key: self._pool.submit(self.api.get_claim, *key) for key in keys[1:]}
        results: dict[tuple[str, str], _Result] = {}
        if keys:
            results[keys[0]] = self._read_here(keys[0], end, budget_s)
        for key, future in futures.items():
            try:
                results[key] = future.result(timeout=max(0.0, end - time.monotonic()))
            except ApiError as exc:
                results[key] = exc
            except TimeoutError:
                results[key] = _late(key, budget_s)
            except Exception as exc:  # a bug in one read costs that claim only
                results[key] = _failed(key, exc)
        self._local.results = results

    def _read_here(self, key: tuple[str, str], end: float, budget_s: float) -> _Result:
        # imported here: gpuslice.kube loads the HTTP client, which the first call has loaded anyway
        from gpuslice.kube.deadline import until

        try:
            with until(end):
                found = self.api.get_claim(*key)
        except ApiError as exc:
            return _late(key, budget_s) if time.monotonic() >= end else exc
        except Exception as exc:  # a bug in one read costs that claim only
            return _failed(key, exc)
        return found

    def done(self) -> None:
        """Forget this thread's prefetched claims (the call is answered)."""
        self._local.results = {}

    def get_claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        results: dict[tuple[str, str], _Result] = getattr(self._local, "results", {})
        if (namespace, name) in results:
            found = results.pop((namespace, name))
            if isinstance(found, ApiError):
                raise found
            return found
        return self.api.get_claim(namespace, name)

    def resource_version(self) -> str:
        return self.api.resource_version()

    def list_slices(self, driver: str, node_name: str) -> list[dict[str, Any]]:
        return self.api.list_slices(driver, node_name)

    def apply_slice(self, obj: dict[str, Any]) -> None:
        self.api.apply_slice(obj)

    def delete_slice(self, name: str) -> None:
        self.api.delete_slice(name)

    def close(self) -> None:
        self.api.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _late(key: tuple[str, str], budget_s: float) -> ApiError:
    return ApiError(f"reading ResourceClaim {key[0]}/{key[1]} took longer than {budget_s:.0f} s")


def _failed(key: tuple[str, str], exc: Exception) -> ApiError:
    return ApiError(f"reading ResourceClaim {key[0]}/{key[1]}: {type(exc).__name__}: {exc}")


def _valid(ref: ClaimRef) -> bool:
    try:
        ref.check()
    except ClaimPrepareError:
        return False
    return True
