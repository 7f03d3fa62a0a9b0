"""The one checkpoint envelope: kind, version, node and checksum around a body; read safely, older versions upgraded."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, TypeVar

from gpuslice.fsutil.atomic import atomic_write_text
from gpuslice.fsutil.regular import read_regular_bytes
from gpuslice.fsutil.textread import InputFileError, decode_utf8
from gpuslice.records import record

DIGEST_PREFIX = "sha256:"
CORRUPT_SUFFIX = ".corrupt"
_FNV32_OFFSET = 0x811C9DC5
_FNV32_PRIME = 0x01000193
T = TypeVar("T")

# An upgrade turns a document of one version into a sealed document of the next one. It checks what its
# version's layout protects (the checksum as that version computed it) and raises CheckpointUnusable if
# anything is off, as NVIDIA's DRA driver turns a verified V1 into a V2 (`ToV2`).
Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


class CheckpointUnusable(ValueError):
    """A checkpoint not to be trusted: not a regular file, too large, corrupt, another node's, an unknown version."""


def canonical_json(value: Any) -> bytes:
    """The bytes every checkpoint checksum is computed over: sorted keys, no spaces, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `value`: the checksum of gpuslice's checkpoints, old and new layouts."""
    return DIGEST_PREFIX + hashlib.sha256(canonical_json(value)).hexdigest()


def fnv32a(data: bytes) -> int:
    """FNV-32a of `data`: the kubelet checkpointmanager's checksum (for the mock kubelet's file)."""
    result = _FNV32_OFFSET
    for byte in data:
        result = ((result ^ byte) * _FNV32_PRIME) & 0xFFFFFFFF
    return result


@record
class CheckpointFormat:
    """One checkpoint file's format: `{kind, version, node, checksum, <body>}`, the checksum over all the rest.

    `upgrades[v]` reads version v (v < `version`) into version v + 1; a file of any older version with an
    unbroken chain of upgrades is read, a newer or unknown one is refused (never guessed at).
    """

    kind: str
    version: int
    body: str  # the key that holds the content
    what: str  # for messages, e.g. "DRA checkpoint"
    max_bytes: int
    upgrades: Mapping[int, Upgrade] = field(default_factory=dict)

    def seal(self, node: str, body: Any, version: int | None = None) -> dict[str, Any]:
        """The document for `body` written by `node`, with its checksum."""
        document = {"kind": self.kind, "version": self.version if version is None else version, "node": node,
                    self.body: body}  # fmt: skip
        return {**document, "checksum": digest(document)}

    def open(self, document: Any, node: str | None = None) -> Any:
        """The body of a sealed document (upgraded to this version); CheckpointUnusable naming what is off.

        `node`: refuse another node's file (None: any node, for a lenient early look).
        """
        if not isinstance(document, dict):
            raise CheckpointUnusable("not a JSON object")
        if document.get("kind") != self.kind:
            raise CheckpointUnusable(f"kind is {document.get('kind')!r}, expected {self.kind!r}")
        version = document.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= self.version:
            raise CheckpointUnusable(f"unknown version {version!r} (this plugin reads up to version {self.version})")
        while version < self.version:
            upgrade = self.upgrades.get(version)
            if upgrade is None:
                raise CheckpointUnusable(f"version {version} is no longer read (this plugin writes {self.version})")
            try:
                document = upgrade(document)
            except RecursionError as exc:  # an upgrade's own checksum over nesting the encoder refuses
                raise CheckpointUnusable(f"version {version} cannot be checked: {exc}") from exc
            version += 1
        sealed = {key: document.get(key) for key in ("kind", "version", "node", self.body)}
        try:
            recorded, computed = document.get("checksum"), digest(sealed)
        except (ValueError, RecursionError) as exc:  # nesting the parser took but the encoder does not
            raise CheckpointUnusable(f"cannot be checked: {exc}") from exc
        if recorded != computed:
            raise CheckpointUnusable(f"checksum mismatch: recorded {recorded!r}, content {computed}")
        if not isinstance(sealed["node"], str) or (node is not None and sealed["node"] != node):
            raise CheckpointUnusable(f"node: written by node {sealed['node']!r}, this is {node!r}")
        if self.body not in document:
            raise CheckpointUnusable(f"{self.body}: missing")
        return sealed[self.body]

    def parse(self, data: bytes, node: str | None = None, source: str | Path = "") -> Any:
        """open() of the JSON in `data` (read from `source`, for messages)."""
        try:
            document = json.loads(decode_utf8(data, self.what, source))
        except InputFileError as exc:
            raise CheckpointUnusable(str(exc)) from exc
        except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested brackets
            raise CheckpointUnusable(f"not valid JSON: {exc}") from exc
        return self.open(document, node)

    def read(self, path: str | Path, node: str | None = None) -> Any:
        """The body in `path`, None when there is no file; CheckpointUnusable when it cannot be trusted.

        Read as a regular file only (gpuslice.fsutil.regular): a link, directory, FIFO, socket or device
        at the path is refused without blocking, a file over `max_bytes` before it is read.
        """
        try:
            data = read_regular_bytes(path, self.what, self.max_bytes)
        except FileNotFoundError:
            return None
        except InputFileError as exc:
            raise CheckpointUnusable(str(exc)) from exc
        return self.parse(data, node, path)

    def write(self, path: str | Path, node: str, body: Any) -> None:
        """Replace the file atomically, mode 0600: the checkpoint is the plugin's own state, not for others."""
        # One line: json's C encoder writes it; an indent sends every value through the pure-Python one, most
        # of what a save cost the DRA plugin besides its fsyncs. `jq` shows it indented.
        atomic_write_text(path, json.dumps(self.seal(node, body), sort_keys=True) + "\n", mode=0o600)

    def load(self, path: str | Path, node: str, log: logging.Logger, convert: Callable[[Any], T]) -> T | None:
        """convert(read()), but a file that cannot be trusted (read or converted) is set aside with one
        error line and None returned: the caller starts without it, never crashes on it."""
        try:
            body = self.read(path, node)
            return None if body is None else convert(body)
        except CheckpointUnusable as exc:
            where = set_aside(path, log)
            log.error("%s %s cannot be trusted (%s); %s; starting without it", self.what, path, exc,
                      f"kept as {where}" if where else "it could not be moved aside")  # fmt: skip
            return None


def set_aside(path: str | Path, log: logging.Logger | None = None) -> Path | None:
    """Move `path` (whatever it is: file, link, directory, FIFO) to `<name>.corrupt`; returns where it went.

    An older `.corrupt` that cannot be replaced (a directory in the way) gives way to a time-stamped name.
    None when there was nothing to move, or it could not be moved (logged): the caller starts without it.
    """
    source = Path(path)
    for target in (source.with_name(source.name + CORRUPT_SUFFIX),
                   source.with_name(f"{source.name}{CORRUPT_SUFFIX}-{time.time_ns()}")):  # fmt: skip
        try:
            os.replace(source, target)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if log is not None:
                log.warning("cannot move %s to %s: %s", source, target, exc.strerror or exc)
            continue
        return target
    return None
