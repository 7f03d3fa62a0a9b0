"""Without any API server configured the DRA API warns and every call fails as an ApiError (no traceback)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuslice.dra.api import ApiError
from gpuslice.dra.kube import LightkubeResourceApi


def test_no_kubeconfig_warns_and_calls_fail_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    api = LightkubeResourceApi()
    for call in (api.resource_version, lambda: api.get_claim("default", "c"), lambda: api.delete_slice("s")):
        with pytest.raises(ApiError, match="no API server configured"):
            call()
