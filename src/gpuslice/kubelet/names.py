"""The kubelet's extended-resource-name rule (`IsExtendedResourceName`), as a pure function."""

from __future__ import annotations

import re

_REQUESTS_PREFIX = "requests."
_NATIVE_MARKER = "kubernetes.io/"
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1123_SUBDOMAIN_MAX = 253
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_QUALIFIED_NAME_MAX = 63


def is_native_resource_name(name: str) -> bool:
    """No domain, or a `kubernetes.io/` one anywhere in the name: the kubelet's own resources."""
    return "/" not in name or _NATIVE_MARKER in name


def is_qualified_name(name: str) -> bool:
    """Kubernetes `IsQualifiedName`: optional DNS-1123 subdomain prefix, `/`, a 1-63 character name."""
    parts = name.split("/")
    if len(parts) == 1:
        short = parts[0]
    elif len(parts) == 2:
        prefix, short = parts
        if not prefix or len(prefix) > _DNS1123_SUBDOMAIN_MAX or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            return False
    else:
        return False
    return 0 < len(short) <= _QUALIFIED_NAME_MAX and _QUALIFIED_NAME.fullmatch(short) is not None


def is_extended_resource_name(name: str) -> bool:
    """True for names like `nvidia.com/gpu` that a device plugin may advertise.

    The kubelet checks `"requests." + name` as a qualified name (so the quota name stays valid too),
    which is why the domain may be at most 244 characters.
    """
    if is_native_resource_name(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    return is_qualified_name(_REQUESTS_PREFIX + name)
