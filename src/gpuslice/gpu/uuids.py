"""Name-derived (version 5) UUIDs for fake and recorded devices, made without loading OpenSSL."""

from __future__ import annotations

import uuid

try:
    # CPython's own SHA-1. hashlib would load OpenSSL's bindings first: about 1.5 ms of every start on a
    # fake node, whose GPU UUIDs are derived from their names, for four short digests.
    from _sha1 import sha1  # type: ignore[import-not-found]  # CPython's module, without a stub
except ImportError:  # an interpreter built without it
    from hashlib import sha1


def name_uuid(namespace: uuid.UUID, name: str) -> uuid.UUID:
    """The UUID `uuid.uuid5(namespace, name)` gives (RFC 4122 version 5: SHA-1 of the namespace and name)."""
    return uuid.UUID(bytes=sha1(namespace.bytes + name.encode("utf-8")).digest()[:16], version=5)
