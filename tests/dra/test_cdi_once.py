"""The driver's hooks run once per container however many claims it has: they live in one base spec all name."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuslice.allocation.cdi_resolve import load_specs, resolve
from gpuslice.discovery.driver_files_fake import build_fake_driver_root
from gpuslice.dra import DraApp, DraSettings, prepare_setup
from gpuslice.dra.api import InMemoryResourceApi
from gpuslice.dra.cdi import base_cdi_id, base_spec_file_name
from gpuslice.dra.kube import LightkubeResourceApi
from gpuslice.kubelet.dra_mock import MockDraKubelet
from gpuslice.mps import FakeMpsControl
from tests.dra.support import DRIVER, NODE, NODE_SPEC, Node, claim, device_classes
from tests.support.dirs import short_temp_dir

HOOKS = ["create-symlinks", "enable-cuda-compat", "update-ldcache", "disable-device-node-modification"]


@pytest.fixture
def cluster() -> Iterator[tuple[Node, MockDraKubelet, DraApp]]:
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE) as kubelet:
        node = Node(root)
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        driver_root = build_fake_driver_root(root / "driver-root", version="550.127.08")
        overrides = {"flags.nvidiaDriverRoot": str(driver_root), "flags.plugin.containerDriverRoot": str(driver_root)}
        setup = prepare_setup("fake", str(node.spec), str(node.config), overrides=overrides)
        settings = DraSettings(registry_dir=kubelet.registry_dir, plugins_dir=kubelet.plugins_dir, cdi_dir=node.cdi)
        app = DraApp(setup, settings, LightkubeResourceApi(kubelet.api_url), mps_control=FakeMpsControl())
        app.start()
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=10)
            assert kubelet.wait_for_slices(DRIVER, min_devices=4)
            assert app.plugin.slices is not None and app.plugin.slices.wait_synced(10)  # its own thread
            yield node, kubelet, app
        finally:
            app.stop()


def _hook_names(hooks: tuple[object, ...]) -> list[str]:
    return [str(hook["args"][2]) for hook in hooks]  # type: ignore[index]  # nvidia-ctk hook <name>


def test_two_claims_in_one_container_run_each_hook_once(cluster: tuple[Node, MockDraKubelet, DraApp]) -> None:
    node, kubelet, _ = cluster
    kubelet.create_claim(claim("first"))
    kubelet.create_claim(claim("second"))
    admission = kubelet.admit("pod", ["first", "second"])
    ids = admission.cdi_ids
    assert base_cdi_id(DRIVER) in ids and len({i for i in ids if "/claim=" in i}) == 2
    edits = resolve(load_specs(node.cdi), ids)  # as a runtime merges them for the one container
    assert _hook_names(edits.hooks) == HOOKS
    assert len(edits.mount_paths) == len(set(edits.mount_paths))
    assert sorted(set(edits.device_paths) - {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                              "/dev/nvidia-modeset"}) == ["/dev/nvidia0", "/dev/nvidia1"]  # fmt: skip
    # One claim gets the same hooks and driver files: a second claim adds only its own device.
    one = resolve(load_specs(node.cdi), admission.claims["first"][0].cdi_ids)
    assert _hook_names(one.hooks) == HOOKS and set(one.mount_paths) == set(edits.mount_paths)
    claim_specs = [json.loads(p.read_text()) for p in node.cdi.glob(f"k8s.{DRIVER}-claim_*.json")]
    assert len(claim_specs) == 2 and not any("hooks" in spec["containerEdits"] for spec in claim_specs)
    assert kubelet.delete_pod("pod") == {}
    assert not list(node.cdi.glob(f"k8s.{DRIVER}-claim_*.json"))
    assert (node.cdi / base_spec_file_name(DRIVER)).exists(), "the base spec stays for every later claim"


def test_no_hooks_no_base_spec() -> None:
    with short_temp_dir("gs") as root, MockDraKubelet(root, NODE) as kubelet:
        node = Node(root)
        for device_class in device_classes():
            kubelet.add_device_class(device_class)
        setup = prepare_setup("fake", str(node.spec), str(node.config))  # no driver files: nothing to hook
        settings = DraSettings(registry_dir=kubelet.registry_dir, plugins_dir=kubelet.plugins_dir, cdi_dir=node.cdi)
        app = DraApp(setup, settings, LightkubeResourceApi(kubelet.api_url), mps_control=FakeMpsControl())
        app.start()
        try:
            assert kubelet.watcher.wait_registered(DRIVER, timeout=10)
            assert kubelet.wait_for_slices(DRIVER)
            assert app.plugin.slices is not None and app.plugin.slices.wait_synced(10)  # its own thread
            uid = kubelet.create_claim(claim("plain"))["metadata"]["uid"]
            admission = kubelet.admit("pod-plain", ["plain"])
            assert all(i.startswith(f"k8s.{DRIVER}/claim={uid}-") for i in admission.cdi_ids)
            assert not (node.cdi / base_spec_file_name(DRIVER)).exists()
            assert kubelet.delete_pod("pod-plain") == {}
        finally:
            app.stop()


def test_the_base_spec_path_is_what_cdi_calls_transient() -> None:
    assert base_spec_file_name(DRIVER) == f"k8s.{DRIVER}-device_base.json"
    assert base_cdi_id(DRIVER) == f"k8s.{DRIVER}/device=base"


def test_a_missing_hook_program_is_named_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # The driver root is the host's `/` (the default), mounted at a fake root that has no nvidia-ctk.
    root = build_fake_driver_root(tmp_path / "host")
    (tmp_path / "node.yaml").write_text(NODE_SPEC)
    overrides = {"flags.nvidiaDriverRoot": "/", "flags.plugin.containerDriverRoot": str(root)}
    setup = prepare_setup("fake", str(tmp_path / "node.yaml"), None, overrides=overrides)
    settings = DraSettings(plugins_dir=tmp_path / "plugins", registry_dir=tmp_path / "reg", cdi_dir=tmp_path / "cdi")
    with caplog.at_level(logging.WARNING, logger="gpuslice.dra"):
        DraApp(setup, settings, InMemoryResourceApi())
    assert any(
        "hook program /usr/bin/nvidia-ctk: not found" in r.getMessage() and "NVIDIA Container Toolkit" in r.getMessage()
        for r in caplog.records
    )
