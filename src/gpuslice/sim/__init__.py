"""GPU cluster scheduling simulator: `core` (loop, engine, queue, cluster, metrics), `policies`, `traces`,
`extensions` attached by composition, `experiments` and `report`."""
