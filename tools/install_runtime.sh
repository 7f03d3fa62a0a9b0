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
# Without them the checks report themselves skipped, naming what is missing: a fact about this machine.
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "runtime-check: cannot install ${missing[*]} here (Debian packages, as root with apt-get)" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "${missing[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; } \
    || echo "runtime-check: installing ${missing[*]} failed" >&2
