"""Extensions attached to the engine by composition: preemption, DRF, fairness, Kueue, NVLink, sharing tiers."""
