"""Size and count limits on what a config may ask for, each derived from what the kubelet can take."""

from __future__ import annotations

# A config file is a few kilobytes (NVIDIA's largest examples are under 10 KiB); 1 MiB leaves room for
# comments and long device lists while keeping a hostile file from being read into memory whole.
MAX_CONFIG_BYTES = 1 << 20

# The kubelet reads ListAndWatch with gRPC's default 4 MiB receive limit. The longest advertised ID is a
# replica of a MIG device, `MIG-<36-char uuid>::<n>` (up to 47 bytes); with the health string, the NUMA
# topology and protobuf framing one device costs at most ~70 bytes, so 4 MiB holds ~60,000 devices.
# A quarter of that, rounded to a power of two, keeps a 3.5x margin and also bounds every request the
# kubelet can send back (Allocate and GetPreferredAllocation name at most the devices we advertise).
MAX_DEVICES_PER_RESOURCE = 16_384

# One GPU can never usefully carry more replicas than a whole resource may advertise.
MAX_REPLICAS = MAX_DEVICES_PER_RESOURCE
