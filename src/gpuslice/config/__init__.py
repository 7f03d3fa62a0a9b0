"""NVIDIA-compatible configuration: the v1 config file, flags and env, merged into frozen settings."""
