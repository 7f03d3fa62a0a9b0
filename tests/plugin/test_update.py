"""PluginManager.update (config reload): only what changed is served and registered again."""

from __future__ import annotations

from gpuslice.allocation import AllocateOptions, AllocationContext, ContainerEdits
from gpuslice.config import parse_config_text
from gpuslice.discovery import parse_node_spec
from gpuslice.kubelet import MockKubelet
from gpuslice.plugin import PluginManager
from gpuslice.sharing import HealthStore, build_resources
from tests.plugin.conftest import WAIT_S

H100 = {"model": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": "9.0"}
NODE = parse_node_spec({"name": "reload", "gpus": [{**H100, "mig": ["1g.10gb", "1g.10gb", "3g.40gb"]}, H100]}).node
MIXED = "flags: {migStrategy: mixed}\n"
SHARE_1G = MIXED + "sharing: {timeSlicing: {resources: [{name: mig-1g.10gb, replicas: 3}]}}"
RENAME_GPU = MIXED + "sharing: {timeSlicing: {renameByDefault: true, resources: [{name: gpu, replicas: 2}]}}"


def plan(config: str):  # type: ignore[no-untyped-def]
    return build_resources(NODE, parse_config_text(config).config)


def tagged(context: AllocationContext) -> ContainerEdits:
    return ContainerEdits(envs={"RELOADED": context.resource.name})


def test_only_changed_resources_register_again(kubelet: MockKubelet) -> None:
    with PluginManager(plan(MIXED).resources, HealthStore(NODE), kubelet.socket_path, workers=4) as manager:
        for name, count in (("nvidia.com/gpu", 1), ("nvidia.com/mig-1g.10gb", 2), ("nvidia.com/mig-3g.40gb", 1)):
            assert kubelet.wait_for(resource=name, allocatable=count, timeout=WAIT_S)
        changed = manager.update(plan(SHARE_1G).resources, AllocateOptions(extra_steps=(tagged,)))
        assert changed == ("nvidia.com/mig-1g.10gb",)
        assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=6, min_registrations=2, timeout=WAIT_S)
        assert kubelet.registration_count("nvidia.com/mig-3g.40gb") == 1
        assert kubelet.registration_count("nvidia.com/gpu") == 1
        kept = kubelet.admit_one("kept", "nvidia.com/mig-3g.40gb")
        assert kept.envs["RELOADED"] == "nvidia.com/mig-3g.40gb", "new options reach a kept server at once"

        changed = manager.update(plan(RENAME_GPU).resources)
        assert set(changed) == {"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"}
        assert kubelet.wait_for(resource="nvidia.com/gpu.shared", allocatable=2, timeout=WAIT_S)
        assert kubelet.wait_for(resource="nvidia.com/gpu", registered=False, timeout=WAIT_S)
        assert sorted(p.name for p in kubelet.device_plugin_dir.glob("gpuslice-*")) == [
            "gpuslice-nvidia.com-gpu.shared.sock",
            "gpuslice-nvidia.com-mig-1g.10gb.sock",
            "gpuslice-nvidia.com-mig-3g.40gb.sock",
        ]
    assert list(kubelet.device_plugin_dir.glob("gpuslice-*")) == []


def test_update_before_start_only_records(kubelet: MockKubelet) -> None:
    manager = PluginManager(plan(MIXED).resources, HealthStore(NODE), kubelet.socket_path, workers=4)
    assert manager.update(plan(SHARE_1G).resources) == ("nvidia.com/mig-1g.10gb",)
    assert kubelet.resources() == {}
    with manager:
        assert kubelet.wait_for(resource="nvidia.com/mig-1g.10gb", allocatable=6, timeout=WAIT_S)
