"""The ResourceClaims of one kubelet call, read concurrently (a bounded pool) before the claims are prepared.

Preparing is serial (one lock), but reading need not be: with a slow API server the claims of a call
would otherwise cost one read deadline each, one after the other, and the last ones would miss the
kubelet's. Each read has its own deadline (the API client's, well below the kubelet's 45 s); a read that
fails or is still running when the call's budget ends becomes that claim's error, never the call's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
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
        """Read the claims of one call at once; waits at most `budget_s` for them."""
        futures: dict[tuple[str, str], Future[dict[str, Any] | None]] = {}
        for ref in refs:
            if not _valid(ref) or self._prepared(ref.uid):
                continue  # refused by prepare with its own message, or answered from its record
            key = (ref.namespace, ref.name)
            if key not in futures:
                futures[key] = self._pool.submit(self.api.get_claim, ref.namespace, ref.name)
        end = time.monotonic() + budget_s
        results: dict[tuple[str, str], _Result] = {}
        for key, future in futures.items():
            try:
                results[key] = future.result(timeout=max(0.0, end - time.monotonic()))
            except ApiError as exc:
                results[key] = exc
            except TimeoutError:
                results[key] = ApiError(f"reading ResourceClaim {key[0]}/{key[1]} took longer than {budget_s:.0f} s")
            except Exception as exc:  # a bug in one read costs that claim only
                results[key] = ApiError(f"reading ResourceClaim {key[0]}/{key[1]}: {type(exc).__name__}: {exc}")
        self._local.results = results

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


def _valid(ref: ClaimRef) -> bool:
    try:
        ref.check()
    except ClaimPrepareError:
        return False
    return True
