"""Backend selection: auto falls back from NVML to host paths; failOnInitError decides when nothing is found."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuslice.discovery import FakeBackend
from gpuslice.discovery.hostpath import HostPathBackend
from gpuslice.discovery.nvml import NvmlBackend
from gpuslice.discovery.nvml.fake import FakeNvml
from gpuslice.discovery.nvml.nodes import dgx_h100
from gpuslice.discovery.select import BackendInitError, IdleBackend, make_backend
from tests.discovery.host_root import H100_UUID, build_host_root

LIBRARY_NOT_FOUND = 12


def no_nvml() -> FakeNvml:
    return FakeNvml([], init_error=LIBRARY_NOT_FOUND)


def test_fake_reads_the_node_spec(tmp_path: Path) -> None:
    backend = make_backend("fake", "preset:dgx-h100", tmp_path, True)
    assert isinstance(backend, FakeBackend)
    assert len(backend.discover().gpus) == 8


def test_fake_with_a_bad_spec_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(BackendInitError, match="backend 'fake': unknown preset 'nope'") as caught:
        make_backend("fake", "preset:nope", tmp_path, False)
    assert caught.value.kind == "fake"


def test_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(BackendInitError, match="unknown backend; choose one of auto, nvml, hostpath, fake"):
        make_backend("cuda", None, tmp_path, False)


@pytest.mark.parametrize("kind", ["auto", "nvml"])
def test_nvml_when_it_loads(kind: str, tmp_path: Path) -> None:
    backend = make_backend(kind, None, build_host_root(tmp_path), True, nvml_library=dgx_h100())
    assert isinstance(backend, NvmlBackend)
    assert len(backend.discover().gpus) == 8


def test_auto_falls_back_to_host_paths(tmp_path: Path) -> None:
    library = no_nvml()
    backend = make_backend("auto", None, build_host_root(tmp_path), True, nvml_library=library)
    assert isinstance(backend, HostPathBackend)
    assert backend.discover().gpus[0].uuid == H100_UUID
    assert library.initialised == 0


def test_hostpath_never_tries_nvml(tmp_path: Path) -> None:
    library = dgx_h100()
    backend = make_backend("hostpath", None, build_host_root(tmp_path), True, nvml_library=library)
    assert isinstance(backend, HostPathBackend)
    assert library.calls == []


@pytest.mark.parametrize(
    ("kind", "library", "reasons"),
    [
        ("auto", no_nvml, ["NVML Shared Library Not Found", "no NVIDIA GPU found under"]),
        ("nvml", no_nvml, ["NVML could not be initialised: NVML Shared Library Not Found"]),
        ("hostpath", no_nvml, ["no NVIDIA GPU found under"]),
        ("auto", lambda: FakeNvml([]), ["NVML loaded but reports no GPUs"]),
    ],
)
def test_nothing_found_with_fail_on_init_error(kind: str, library: object, reasons: list[str], tmp_path: Path) -> None:
    assert callable(library)
    with pytest.raises(BackendInitError) as caught:
        make_backend(kind, None, tmp_path, True, nvml_library=library())
    assert caught.value.kind == kind
    assert len(caught.value.reasons) == len(reasons)
    for got, wanted in zip(caught.value.reasons, reasons, strict=True):
        assert wanted in got


def test_nvml_saying_none_is_believed_over_host_paths(tmp_path: Path) -> None:
    with pytest.raises(BackendInitError, match="NVML loaded but reports no GPUs"):
        make_backend("auto", None, build_host_root(tmp_path), True, nvml_library=FakeNvml([]))


@pytest.mark.parametrize("kind", ["auto", "nvml", "hostpath"])
def test_nothing_found_without_fail_on_init_error_idles(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="gpuslice.discovery.select"):
        backend = make_backend(kind, None, tmp_path, False, nvml_library=no_nvml(), node_name="n1")
    assert isinstance(backend, IdleBackend)
    node = backend.discover()
    assert (node.name, node.gpus) == ("n1", ())
    assert node.extra["backend"] == "idle" and node.extra["reason"] == backend.reason
    assert "No devices found" in caplog.text and "advertising none" in caplog.text


def test_the_fake_backend_takes_the_node_name_it_is_given(tmp_path: Path) -> None:
    spec_name = make_backend("fake", "preset:dgx-h100", tmp_path, True).discover()
    named = make_backend("fake", "preset:dgx-h100", tmp_path, True, node_name="node-7").discover()
    assert named.name == "node-7" != spec_name.name
    assert [gpu.uuid for gpu in named.gpus] == [gpu.uuid for gpu in spec_name.gpus]  # the spec's IDs stay
