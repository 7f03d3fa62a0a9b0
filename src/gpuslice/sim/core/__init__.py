"""The event simulator core: one clock-and-heap loop, the engine, the pending queue, cluster state, metrics."""
