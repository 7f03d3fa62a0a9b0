"""Node labels compatible with gpu-feature-discovery, and their sinks."""
