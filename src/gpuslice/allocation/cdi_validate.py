"""A CDI spec checker written from the CDI specification (SPEC.md): structure, names, edits, the version rule,
and whether the host has what a spec names (mount sources, device nodes, hook programs)."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from typing import Any

# Released spec versions, and what each one added (the "Released versions" table of the CDI spec).
CDI_VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0")
HOOK_NAMES = frozenset({"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"})
SPEC_KEYS = frozenset({"cdiVersion", "kind", "annotations", "devices", "containerEdits"})
DEVICE_KEYS = frozenset({"name", "annotations", "containerEdits"})
EDIT_KEYS = frozenset({"env", "deviceNodes", "mounts", "hooks", "additionalGIDs", "intelRdt", "netDevices"})
NODE_KEYS = frozenset({"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"})
MOUNT_KEYS = frozenset({"hostPath", "containerPath", "type", "options"})
HOOK_KEYS = frozenset({"hookName", "path", "args", "env", "timeout"})
DEVICE_TYPES = frozenset({"b", "c", "u", "p"})

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
# Patterns as text, compiled by `re` (and cached there) at their first use: compiling them all at import
# cost every plugin start a few tenths of a millisecond, for checks it may never make.
_VENDOR = rf"{_LABEL}(\.{_LABEL})*"
_CLASS = r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?"
_DEVICE_NAME = r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?"
_SEMVER = r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
_ENV = r"[A-Za-z_][A-Za-z0-9_]*=.*"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def minimum_version(spec: Mapping[str, Any]) -> str:
    """The lowest cdiVersion that carries every field `spec` uses (so older runtimes can still read it)."""
    edits = [spec.get("containerEdits") or {}]
    edits += [d.get("containerEdits") or {} for d in spec.get("devices", []) if isinstance(d, Mapping)]
    edits = [e for e in edits if isinstance(e, Mapping)]
    if any("netDevices" in e for e in edits):
        return "1.0.0"
    if any("additionalGIDs" in e or "intelRdt" in e for e in edits):
        return "0.7.0"
    kind = spec.get("kind")
    class_name = kind.split("/", 1)[-1] if isinstance(kind, str) else ""
    devices = [d for d in spec.get("devices", []) if isinstance(d, Mapping)]
    if "annotations" in spec or any("annotations" in d for d in devices) or "." in class_name:
        return "0.6.0"
    names = [d.get("name") for d in devices]
    if any(isinstance(n, str) and n and not n[0].isalpha() for n in names):
        return "0.5.0"
    if any("hostPath" in node for e in edits for node in e.get("deviceNodes", []) if isinstance(node, Mapping)):
        return "0.5.0"
    if any("type" in mount for e in edits for mount in e.get("mounts", []) if isinstance(mount, Mapping)):
        return "0.4.0"
    return "0.3.0"


def spec_problems(spec: Any) -> list[str]:
    """Everything that makes `spec` invalid under the CDI specification (empty when valid)."""
    if not isinstance(spec, Mapping):
        return ["the spec must be a JSON object"]
    problems = [f"{key}: not a CDI spec field" for key in spec if key not in SPEC_KEYS]
    version = spec.get("cdiVersion")
    if not isinstance(version, str) or not re.fullmatch(_SEMVER, version):
        problems.append(f"cdiVersion: expected a semantic version, got {version!r}")
    elif version not in CDI_VERSIONS:
        problems.append(f"cdiVersion: {version} is not a released CDI spec version ({', '.join(CDI_VERSIONS)})")
    elif version_key(version) < version_key(minimum_version(spec)):
        problems.append(f"cdiVersion: {version} cannot carry what the spec uses (needs {minimum_version(spec)})")
    problems += _kind_problems(spec.get("kind"))
    problems += _annotation_problems(spec.get("annotations"), "annotations")
    devices = spec.get("devices")
    if not isinstance(devices, list) or not devices:
        problems.append("devices: at least one device is required")
        devices = []
    seen: set[str] = set()
    for position, device in enumerate(devices):
        where = f"devices[{position}]"
        if not isinstance(device, Mapping):
            problems.append(f"{where}: expected an object")
            continue
        problems += [f"{where}.{key}: not a CDI device field" for key in device if key not in DEVICE_KEYS]
        name = device.get("name")
        if not isinstance(name, str) or not re.fullmatch(_DEVICE_NAME, name):
            problems.append(f"{where}.name: {name!r} is not a valid CDI device name")
        elif name in seen:
            problems.append(f"{where}.name: {name!r} appears twice")
        else:
            seen.add(name)
        problems += _annotation_problems(device.get("annotations"), f"{where}.annotations")
        edits = device.get("containerEdits")
        if not isinstance(edits, Mapping) or not any(edits.get(key) for key in EDIT_KEYS):
            # A device that edits nothing would resolve to a container without the device.
            problems.append(f"{where}.containerEdits: a device must edit the container (none given)")
        problems += edit_problems(edits, f"{where}.containerEdits")
    problems += edit_problems(spec.get("containerEdits"), "containerEdits")
    return problems


def _kind_problems(kind: Any) -> list[str]:
    if not isinstance(kind, str) or kind.count("/") != 1:
        return [f"kind: expected '<vendor>/<class>', got {kind!r}"]
    vendor, class_name = kind.split("/")
    problems = []
    if len(vendor) > 253 or not re.fullmatch(_VENDOR, vendor):
        problems.append(f"kind: the vendor {vendor!r} is not a DNS subdomain")
    if not re.fullmatch(_CLASS, class_name):
        problems.append(f"kind: the class {class_name!r} must be 1-63 of [A-Za-z0-9_.-], alphanumeric at both ends")
    return problems


def _annotation_problems(annotations: Any, where: str) -> list[str]:
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in annotations.items()
    ):
        return [f"{where}: expected an object of strings"]
    return []


def edit_problems(edits: Any, where: str) -> list[str]:
    """What is wrong with one containerEdits object (None is allowed: the field is optional)."""
    if edits is None:
        return []
    if not isinstance(edits, Mapping):
        return [f"{where}: expected an object"]
    problems = [f"{where}.{key}: not a containerEdits field" for key in edits if key not in EDIT_KEYS]
    problems += _env_problems(edits.get("env"), f"{where}.env")
    for position, node in enumerate(_items(edits, "deviceNodes", where, problems)):
        problems += _node_problems(node, f"{where}.deviceNodes[{position}]")
    for position, mount in enumerate(_items(edits, "mounts", where, problems)):
        problems += _mount_problems(mount, f"{where}.mounts[{position}]")
    for position, hook in enumerate(_items(edits, "hooks", where, problems)):
        problems += _hook_problems(hook, f"{where}.hooks[{position}]")
    gids = edits.get("additionalGIDs")
    if gids is not None and not (isinstance(gids, list) and all(_uint(g) for g in gids)):
        problems.append(f"{where}.additionalGIDs: expected a list of unsigned integers")
    return problems


def _items(edits: Mapping[str, Any], key: str, where: str, problems: list[str]) -> list[Any]:
    value = edits.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"{where}.{key}: expected a list")
        return []
    return value


def _env_problems(env: Any, where: str) -> list[str]:
    if env is None:
        return []
    if not isinstance(env, list):
        return [f"{where}: expected a list of 'NAME=value'"]
    return [
        f"{where}[{i}]: expected 'NAME=value', got {entry!r}"
        for i, entry in enumerate(env)
        if not isinstance(entry, str) or not re.fullmatch(_ENV, entry, re.DOTALL)
    ]


def _node_problems(node: Any, where: str) -> list[str]:
    if not isinstance(node, Mapping):
        return [f"{where}: expected an object"]
    problems = [f"{where}.{key}: not a deviceNodes field" for key in node if key not in NODE_KEYS]
    problems += _absolute(node.get("path"), f"{where}.path", required=True)
    problems += _absolute(node.get("hostPath"), f"{where}.hostPath", required=False)
    kind = node.get("type")
    if kind is not None and kind not in DEVICE_TYPES:
        problems.append(f"{where}.type: expected one of b, c, u, p, got {kind!r}")
    permissions = node.get("permissions")
    if permissions is not None and not (isinstance(permissions, str) and permissions and set(permissions) <= {*"rwm"}):
        problems.append(f"{where}.permissions: expected letters of 'rwm', got {permissions!r}")
    for key in ("major", "minor", "fileMode", "uid", "gid"):
        if key in node and (isinstance(node[key], bool) or not isinstance(node[key], int)):
            problems.append(f"{where}.{key}: expected an integer")
    return problems


def _mount_problems(mount: Any, where: str) -> list[str]:
    if not isinstance(mount, Mapping):
        return [f"{where}: expected an object"]
    problems = [f"{where}.{key}: not a mounts field" for key in mount if key not in MOUNT_KEYS]
    host = mount.get("hostPath")
    if not isinstance(host, str) or not host:
        problems.append(f"{where}.hostPath: required")
    problems += _absolute(mount.get("containerPath"), f"{where}.containerPath", required=True)
    options = mount.get("options")
    if options is not None and not (isinstance(options, list) and all(isinstance(o, str) and o for o in options)):
        problems.append(f"{where}.options: expected a list of mount options")
    if "type" in mount and not isinstance(mount["type"], str):
        problems.append(f"{where}.type: expected a string")
    return problems


def _hook_problems(hook: Any, where: str) -> list[str]:
    if not isinstance(hook, Mapping):
        return [f"{where}: expected an object"]
    problems = [f"{where}.{key}: not a hooks field" for key in hook if key not in HOOK_KEYS]
    name = hook.get("hookName")
    if name not in HOOK_NAMES:
        problems.append(f"{where}.hookName: expected one of {', '.join(sorted(HOOK_NAMES))}, got {name!r}")
    problems += _absolute(hook.get("path"), f"{where}.path", required=True)
    args = hook.get("args")
    if args is not None and not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        problems.append(f"{where}.args: expected a list of strings")
    problems += _env_problems(hook.get("env"), f"{where}.env")
    timeout = hook.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout <= 0):
        problems.append(f"{where}.timeout: expected a number of seconds greater than zero, got {timeout!r}")
    return problems


def _absolute(path: Any, where: str, required: bool) -> list[str]:
    if path is None and not required:
        return []
    if not isinstance(path, str) or not path.startswith("/"):
        return [f"{where}: expected an absolute path, got {path!r}"]
    return []


def _uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


_MAX_LINK_HOPS = 40


def host_problems(spec: Mapping[str, Any], roots: Mapping[str, str]) -> list[str]:
    """What a runtime on the host would not find: every mount source and device node of `spec`, and each
    hook program a root shows, looked up under `roots` (host path -> where this process sees it).

    Links are followed as the runtime follows them, on the host: an absolute link inside a root points
    at the host's own `/`, so a source that passes through one is found only where a root shows that.
    """
    problems: list[str] = []
    for where, edits in _edits_of(spec):
        problems += edits_host_problems(edits, roots, where)
    return list(dict.fromkeys(problems))


def edits_host_problems(
    edits: Mapping[str, Any], roots: Mapping[str, str], where: str = "containerEdits", device_nodes: bool = True
) -> list[str]:
    """host_problems for one containerEdits object (device nodes left out with `device_nodes=False`)."""
    view = HostView(roots)
    problems = []
    for position, mount in enumerate(edits.get("mounts") or ()):
        problem = view.problem(str(mount.get("hostPath", "")))
        if problem is not None:
            problems.append(f"{where}.mounts[{position}]: mount source {problem}")
    for position, node in enumerate(edits.get("deviceNodes") or () if device_nodes else ()):
        problem = view.problem(str(node.get("hostPath") or node.get("path", "")))
        if problem is not None:
            problems.append(f"{where}.deviceNodes[{position}]: device node {problem}")
    for hook in edits.get("hooks") or ():
        path = str(hook.get("path", ""))
        if view.shows(path):
            problem = view.problem(path)
            if problem is not None:
                problems.append(f"hook program {problem}: install the NVIDIA Container Toolkit (nvidia-ctk) there")
    return list(dict.fromkeys(problems))


def _edits_of(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    common = spec.get("containerEdits")
    if isinstance(common, Mapping):
        yield "containerEdits", common
    for position, device in enumerate(spec.get("devices") or ()):
        edits = device.get("containerEdits") if isinstance(device, Mapping) else None
        if isinstance(edits, Mapping):
            yield f"devices[{position}].containerEdits", edits


class HostView:
    """The host's files as far as this process sees them: each root (a host path) mounted somewhere here."""

    def __init__(self, roots: Mapping[str, str]) -> None:
        self.roots = {_norm(host): local for host, local in roots.items()}

    def _locate(self, host: str) -> tuple[str, str] | None:
        best: tuple[str, str] | None = None
        for prefix, local in self.roots.items():
            inside = host == prefix or host.startswith(prefix.rstrip("/") + "/")
            if inside and (best is None or len(prefix) > len(best[0])):
                best = (prefix, local)
        return best

    def shows(self, host: str) -> bool:
        return self._locate(_norm(host)) is not None

    def problem(self, host: str) -> str | None:
        """None when `host` exists on the host as a runtime resolves it, else what is wrong, in one line."""
        if not host.startswith("/"):
            return f"{host!r}: not an absolute host path"
        path, via, hops = _norm(host), "", 0
        while True:
            found = self._locate(path)
            if found is None:
                shown = ", ".join(sorted(self.roots))
                if via:
                    return f"{host}: the link {via} leads to {path} on the host, outside the roots looked at ({shown})"
                return f"{host}: outside the roots looked at ({shown})"
            prefix, local = found
            rest = [part for part in path[len(prefix) :].split("/") if part]
            current_host, current_local = prefix, local
            for index, part in enumerate(rest):
                candidate = os.path.join(current_local, part)
                if os.path.islink(candidate):
                    hops += 1
                    if hops > _MAX_LINK_HOPS:
                        return f"{host}: too many levels of links"
                    try:
                        target = os.readlink(candidate)
                    except OSError as exc:
                        return f"{host}: unreadable link {candidate}: {exc.strerror or exc}"
                    link = posixpath.join(current_host, part)
                    via = f"{link} -> {target}"
                    path = _norm(posixpath.join(current_host, target, *rest[index + 1 :]))
                    break
                if not os.path.lexists(candidate):
                    return f"{host}: not found (no {candidate})"
                current_host, current_local = posixpath.join(current_host, part), candidate
            else:
                return None


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else "/"
