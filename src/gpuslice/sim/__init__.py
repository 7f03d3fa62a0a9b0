"""GPU cluster scheduling simulator: engine, policies, traces, metrics, reports."""
