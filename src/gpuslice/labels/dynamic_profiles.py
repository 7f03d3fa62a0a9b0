"""`gpuslice.io/` labels under `flags.migStrategy: dynamic`: which MIG instances the node's GPUs can be carved into."""

from __future__ import annotations

from collections import Counter

from gpuslice.config import Config
from gpuslice.gpu import MigCatalogue, MigProfile, Node, catalogue_for
from gpuslice.labels.names import GPUSLICE_PREFIX, short_resource_name
from gpuslice.sharing import is_dynamic, mig_resource_name
from gpuslice.sharing.dynamic import dynamic_gpus, open_starts

DYNAMIC_GPUS_LABEL = GPUSLICE_PREFIX + "mig.dynamic-gpus"


def dynamic_mig_labels(node: Node, config: Config) -> dict[str, str]:
    """Per profile: its placements on the node and the most instances of it the node can hold at once.

    Static facts only: the labeller cannot see which placements the plugin holds. Every MIG-enabled GPU
    of a model with a MIG catalogue counts, whatever instances it has now, because the instances the
    plugin creates come and go with pods and look like any other layout to discovery.
    """
    if not is_dynamic(config) or not node.gpus:
        return {}
    gpus = dynamic_gpus(node, claimed={gpu.uuid for gpu in node.gpus})
    placements: Counter[str] = Counter()
    most: Counter[str] = Counter()
    for gpu in gpus:
        catalogue = catalogue_for(gpu.product_name, gpu.memory_mib)
        if catalogue is None:  # not reached: dynamic_gpus keeps only models with a catalogue
            continue
        for profile in catalogue.profiles:
            key = GPUSLICE_PREFIX + short_resource_name(mig_resource_name(profile.name))
            placements[key] += len(profile.starts)
            most[key] += most_at_once(catalogue, profile)
    labels = {DYNAMIC_GPUS_LABEL: str(len(gpus))}
    for key in sorted(placements):
        labels[f"{key}.placements"] = str(placements[key])
        labels[f"{key}.max-instances"] = str(most[key])
    return labels


def most_at_once(catalogue: MigCatalogue, profile: MigProfile) -> int:
    """How many instances of `profile` one GPU holds together under the blocking rules (slices, cap, media engines).

    Lowest free start first: a profile's placements all have one size, so this packing is the largest.
    """
    held: list[tuple[str, int]] = []
    while starts := open_starts(catalogue, held, profile.name):
        held.append((profile.name, starts[0]))
    return len(held)
