#!/usr/bin/env bash
# Installs a CDI-capable container runtime from Debian's packages for `make runtime-check`: podman (it reads
# CDI specs from /etc/cdi and /var/run/cdi), runc, and a static busybox for the test image. Needs root.
set -euo pipefail
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v busybox >/dev/null || missing+=(busybox-static)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "runtime-check: needs ${missing[*]} (Debian packages; run as root with apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
