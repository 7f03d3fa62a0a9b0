"""Wiring for `migStrategy: dynamic`: geometry + checkpoint + MigControl + pod-resources watcher, one lifecycle."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from gpuslice.allocation import AllocateOptions, Allocator, DynamicAllocator, WholeGpuRule
from gpuslice.discovery import MigControl
from gpuslice.plugin.dynamic_settings import DynamicMigSettings
from gpuslice.plugin.pod_resources_watch import PodResourcesClient, ReleaseWatcher
from gpuslice.sharing import HealthStore, Resource
from gpuslice.sharing.dynamic import DynamicMig, DynamicMigGeometry, MigCheckpoint, ResumeReport

log = logging.getLogger("gpuslice.plugin.dynamic_mig")


class DynamicMigRuntime:
    """Resumes the geometry before serving, watches pod-resources while serving, and builds the services.

    A PluginExtension: the manager calls `start()` before the servers start (it resumes from the
    checkpoint or rebuilds it) and `stop()` after they stop; `allocator_for` builds the allocators of
    the resources with placements.
    """

    def __init__(
        self,
        resources: Sequence[Resource],
        node_name: str,
        control: MigControl,
        settings: DynamicMigSettings,
    ) -> None:
        self.settings = settings
        self.geometry = DynamicMigGeometry(resources)
        gpu_indices = sorted(gpu.index for gpu in self.geometry.gpus)
        self.dynamic = DynamicMig(
            self.geometry,
            control,
            MigCheckpoint(settings.checkpoint_path, node_name),
            lambda: control.live_instances(gpu_indices),
        )
        self.client = PodResourcesClient(settings.pod_resources_socket)
        self.watcher = ReleaseWatcher(
            self.dynamic, self.client.list_in_use, settings.poll_interval_s, settings.admission_grace_s
        )
        self.last_resume: ResumeReport | None = None

    @property
    def resource_names(self) -> tuple[str, ...]:
        return self.geometry.resource_names

    def start(self) -> ResumeReport:
        """Resume once per process (a kubelet restart keeps our state), then watch. Idempotent."""
        if self.last_resume is None:
            self.last_resume = self.dynamic.resume(self.client.list_in_use)
        self.watcher.start()
        return self.last_resume

    def wait_until_listed(self, timeout_s: float = 10.0) -> bool:
        """True once pod-resources has listed every held placement (so a pod deletion now reads as a release).

        For demos and tests: a pod deleted before its first listing is only freed after the admission grace.
        """
        deadline = time.monotonic() + timeout_s
        while not all(h.seen for h in self.geometry.holdings()):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def stop(self) -> None:
        self.watcher.stop()
        self.client.close()

    def allocator_for(
        self,
        resource: Resource,
        health: HealthStore,
        options: AllocateOptions | None = None,
        whole_gpu_rule: WholeGpuRule | None = None,
    ) -> Allocator | None:
        """A DynamicAllocator for a resource with placements; None for the others (they are static)."""
        if resource.name in self.geometry.resource_names:
            return DynamicAllocator(resource, health, self.dynamic, options, whole_gpu_rule)
        return None
