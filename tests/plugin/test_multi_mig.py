"""NVIDIA #728: two MIG resources in one container. The kubelet merges the two answers (env: first wins;
mounts, annotations and CDI names: union), so only merge-safe strategies make both devices visible."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gpuslice.kubelet import Admission, MockKubelet
from gpuslice.plugin.app import PluginApp
from tests.support.plugin import build_app
from tests.support.specs import h100_mig_spec

SPEC = h100_mig_spec("multi-mig")
SMALL, LARGE = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
VOLUMES = "/var/run/nvidia-container-devices"


@dataclass
class Container:
    """What the container runtime receives after the kubelet merged every resource's answer."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: list[str] = field(default_factory=list)


def merged(admission: Admission) -> Container:
    container = Container()
    for allocation in admission.allocations.values():
        response = allocation.response
        for name, value in response.envs.items():
            container.envs.setdefault(name, value)
        for mount in response.mounts:
            container.mounts.setdefault(mount.container_path, mount.host_path)
        container.annotations.update(response.annotations)
        container.cdi_devices += [d.name for d in response.cdi_devices if d.name not in container.cdi_devices]
    return container


@pytest.fixture
def admit_both(kubelet: MockKubelet, workdir: Path) -> Iterator[Callable[[str], tuple[Admission, Container]]]:
    """Serve the two-profile node under a device list strategy, admit one container asking for both profiles."""
    apps: list[PluginApp] = []

    def admit(strategies: str) -> tuple[Admission, Container]:
        config = f"flags: {{migStrategy: mixed, plugin: {{deviceListStrategy: {strategies}}}}}"
        app = build_app(workdir, config, kubelet, backend=SPEC, nvidia_answers=True)
        apps.append(app)
        app.manager.start()
        for name, count in ((SMALL, 4), (LARGE, 2)):
            assert kubelet.wait_for(resource=name, allocatable=count, timeout=10.0)
        admission = kubelet.admit("pod", {SMALL: 1, LARGE: 1})
        return admission, merged(admission)

    yield admit
    for app in apps:
        app.stop()


AdmitBoth = Callable[[str], tuple[Admission, Container]]


def ids(admission: Admission) -> list[str]:
    return [admission.device_ids[SMALL][0], admission.device_ids[LARGE][0]]


def test_envvar_alone_shows_only_the_first_resource(admit_both: AdmitBoth) -> None:
    admission, container = admit_both("envvar")
    assert container.envs["NVIDIA_VISIBLE_DEVICES"] == ids(admission)[0], "NVIDIA's #728, kept for compatibility"


@pytest.mark.parametrize("strategies", ["cdi-cri", "[cdi-cri, cdi-annotations]", "[envvar, cdi-cri]"])
def test_cdi_names_both_devices(admit_both: AdmitBoth, strategies: str) -> None:
    admission, container = admit_both(strategies)
    assert container.cdi_devices == [f"k8s.device-plugin.nvidia.com/gpu={i}" for i in ids(admission)]


def test_cdi_annotations_get_one_key_per_resource(admit_both: AdmitBoth) -> None:
    admission, container = admit_both("cdi-annotations")
    assert len(container.annotations) == 2, "a fresh UUID per answer keeps the two keys apart"
    names = ",".join(sorted(container.annotations.values()))
    assert all(f"k8s.device-plugin.nvidia.com/gpu={i}" in names for i in ids(admission))


def test_volume_mounts_name_both_devices(admit_both: AdmitBoth) -> None:
    admission, container = admit_both("volume-mounts")
    assert container.envs["NVIDIA_VISIBLE_DEVICES"] == VOLUMES
    assert sorted(container.mounts) == sorted(f"{VOLUMES}/{i}" for i in ids(admission))
