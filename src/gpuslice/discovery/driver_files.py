"""The NVIDIA driver's user-space files under a driver root, found by globbing versioned names (nothing is run)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import field
from pathlib import PurePosixPath

from gpuslice.records import record

# Where distributions install the driver's libraries, relative to the driver root (Debian multiarch first).
LIBRARY_DIRS = (
    "usr/lib/x86_64-linux-gnu",
    "lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "usr/lib64",
    "lib64",
    "usr/lib",
    "lib",
)
BINARY_DIRS = ("usr/bin", "usr/sbin", "bin", "sbin", "usr/local/bin", "usr/local/sbin")
# The compute and utility libraries a CUDA container needs from a current (R550+) driver; their absence is warned.
EXPECTED_LIBRARIES = (
    "libcuda.so",
    "libnvidia-ml.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so",
    "libcudadebugger.so",
    "libnvidia-gpucomp.so",
    "libnvidia-cfg.so",
    "libnvidia-allocator.so",
)
# The SONAME of each expected library, for a host whose soname links are missing (ldconfig never ran there).
KNOWN_SONAMES = {
    "libcuda.so": "libcuda.so.1",
    "libnvidia-ml.so": "libnvidia-ml.so.1",
    "libnvidia-ptxjitcompiler.so": "libnvidia-ptxjitcompiler.so.1",
    "libnvidia-nvvm.so": "libnvidia-nvvm.so.4",
    "libcudadebugger.so": "libcudadebugger.so.1",
    "libnvidia-cfg.so": "libnvidia-cfg.so.1",
    "libnvidia-allocator.so": "libnvidia-allocator.so.1",
}
# Libraries from older drivers that carry their own version in the name, mounted when present.
LEGACY_LIBRARY_GLOBS = ("libnvidia-nvvm70.so.*",)
EXPECTED_BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)
OPTIONAL_BINARIES = ("nvidia-imex", "nvidia-imex-ctl")
FIRMWARE_DIRS = ("lib/firmware/nvidia/{version}", "lib/firmware/updates/nvidia/{version}")
IPC_SOCKETS = ("var/run/nvidia-persistenced/socket", "var/run/nvidia-fabricmanager/socket")
MPS_PIPE_DIR = "tmp/nvidia-mps"
# A driver root is host input: a directory with more entries than this is not scanned past the cap.
MAX_DIRECTORY_ENTRIES = 20_000
_MAX_SYMLINK_HOPS = 40
_VERSION = re.compile(r"\d+\.\d+(\.\d+)?")


@record
class DriverFiles:
    """What was found under one driver root. Paths are absolute inside the root ("/usr/bin/nvidia-smi")."""

    root: str
    version: str | None = None
    libraries: tuple[str, ...] = ()
    library_dirs: tuple[str, ...] = ()
    # (target file name, link path): the soname and development links a container needs for each library.
    library_links: tuple[tuple[str, str], ...] = ()
    binaries: tuple[str, ...] = ()
    firmware: tuple[str, ...] = ()
    ipc: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # (path, real path): a file whose path inside the root passes through a link, and where it really is,
    # every link resolved as if the root were `/` (`/var/run/x` -> `/run/x` for `var/run -> /run`).
    real: tuple[tuple[str, str], ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        """Every file and socket to bind-mount, each once, in a stable order."""
        return tuple(dict.fromkeys((*self.libraries, *self.binaries, *self.firmware, *self.ipc)))

    def source(self, path: str) -> str:
        """Where `path` really is inside the root: the mount source a runtime on the host can follow safely.

        A runtime resolves a mount source's links on the host, where an absolute link inside the root
        (`var/run -> /run`) leads to the host's own files; a path with no link left leads nowhere else.
        """
        return dict(self.real).get(path, path)

    @property
    def libcuda_dir(self) -> str | None:
        return next((str(PurePosixPath(p).parent) for p in self.libraries if _is_library(p, "libcuda.so")), None)

    def warning(self) -> str | None:
        """One line naming everything that was expected and not found, or None when nothing is missing."""
        if not self.missing:
            return None
        return f"driver root {self.root}: not found: {', '.join(self.missing)}"


def discover_driver_files(
    root: str, expected_version: str | None = None, ipc: bool = True, mps_pipe: bool = False
) -> DriverFiles:
    """Glob the driver's files under `root` (the driver root as this process sees it).

    The version is the suffix of `libcuda.so.<version>`; `expected_version` (NVML's driver version)
    picks it when several drivers left files behind. Every library `*.so.<version>` beside libcuda
    (and in its `vdpau/` folder) is taken, as `nvidia-ctk cdi generate` does.
    """
    if not os.path.isdir(root):
        return DriverFiles(root, missing=(f"the driver root itself ({root} is not a directory)",))
    lookup = _RootedLookup(root)
    notes: list[str] = []
    version, libcuda = _driver_version(lookup, expected_version, notes)
    missing: list[str] = []
    libraries: list[str] = []
    links: list[tuple[str, str]] = []
    if version is None or libcuda is None:
        missing.append("libcuda.so.<version> (the driver version is unknown, so no library can be chosen)")
    else:
        libdir = str(PurePosixPath(libcuda).parent)
        for directory in (libdir, f"{libdir}/vdpau"):
            libraries += [p for p in lookup.list_files(directory) if PurePosixPath(p).name.endswith(f".so.{version}")]
            libraries += [p for g in LEGACY_LIBRARY_GLOBS for p in lookup.glob(directory, g)]
        libraries = sorted(dict.fromkeys(libraries))
        missing += [f"{name}.{version}" for name in EXPECTED_LIBRARIES if not _has_library(libraries, name)]
        links = _library_links(lookup, libraries)
    binaries = []
    for name in (*EXPECTED_BINARIES, *OPTIONAL_BINARIES):
        found = next((f"/{d}/{name}" for d in BINARY_DIRS if lookup.is_file(f"/{d}/{name}")), None)
        if found is not None:
            binaries.append(found)
        elif name in EXPECTED_BINARIES:
            missing.append(name)
    firmware: list[str] = []
    if version is not None:
        for template in FIRMWARE_DIRS:
            firmware += lookup.glob("/" + template.format(version=version), "gsp*.bin")
        if not firmware:
            missing.append(f"GSP firmware (/lib/firmware/nvidia/{version}/gsp*.bin)")
    sockets = [f"/{p}" for p in IPC_SOCKETS if ipc and lookup.exists(f"/{p}")]
    if mps_pipe and lookup.is_dir(f"/{MPS_PIPE_DIR}"):
        sockets.append(f"/{MPS_PIPE_DIR}")
    return DriverFiles(
        root=root,
        real=real_paths(lookup, (*libraries, *binaries, *firmware, *sockets)),
        version=version,
        libraries=tuple(libraries),
        library_dirs=tuple(dict.fromkeys(str(PurePosixPath(p).parent) for p in libraries)),
        library_links=tuple(links),
        binaries=tuple(binaries),
        firmware=tuple(sorted(firmware)),
        ipc=tuple(sockets),
        missing=tuple(missing),
        notes=tuple(notes),
    )


def real_paths(lookup: _RootedLookup, paths: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(path, real path inside the root) for each path that passes through a link."""
    pairs = {}
    for path in paths:
        real = lookup.inside(path)
        if real is not None and real != path:
            pairs[path] = real
    return tuple(pairs.items())


def _driver_version(lookup: _RootedLookup, expected: str | None, notes: list[str]) -> tuple[str | None, str | None]:
    """The driver version and its libcuda path: the expected one if present, else the one libcuda.so.1 names."""
    found: dict[str, str] = {}
    for directory in LIBRARY_DIRS:
        for path in lookup.glob(f"/{directory}", "libcuda.so.*"):
            suffix = PurePosixPath(path).name.removeprefix("libcuda.so.")
            if _VERSION.fullmatch(suffix) and "." in suffix:
                found.setdefault(suffix, path)
    if not found:
        return None, None
    if expected is not None and expected in found:
        return expected, found[expected]
    chosen = None
    for path in found.values():
        target = lookup.link_target(str(PurePosixPath(path).parent / "libcuda.so.1"))
        if target is not None and target.removeprefix("libcuda.so.") in found:
            chosen = target.removeprefix("libcuda.so.")
            break
    if chosen is None:
        chosen = max(found, key=_version_key)
    if expected is not None:
        notes.append(f"the driver files are version {chosen}, the driver reports {expected}")
    elif len(found) > 1:
        notes.append(f"several driver versions under the root ({', '.join(sorted(found))}); using {chosen}")
    return chosen, found[chosen]


def _library_links(lookup: _RootedLookup, libraries: Iterable[str]) -> list[tuple[str, str]]:
    """The soname links the host has beside each library (or the known soname), plus libcuda.so -> libcuda.so.1."""
    links: dict[str, str] = {}
    for library in libraries:
        path = PurePosixPath(library)
        stem = path.name.split(".so.", 1)[0] + ".so"
        for sibling in lookup.glob(str(path.parent), stem + ".*"):
            if lookup.link_target(sibling) == path.name:
                links.setdefault(sibling, path.name)
        soname = KNOWN_SONAMES.get(stem)
        if soname is not None and soname != path.name:
            links.setdefault(str(path.parent / soname), path.name)
        # Many applications dlopen("libcuda.so") although only the driver's soname link is standard.
        if stem in ("libcuda.so", "libnvidia-opticalflow.so"):
            links.setdefault(str(path.parent / stem), stem + ".1")
    return [(target, link) for link, target in links.items()]


def _is_library(path: str, stem: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith(stem + ".") and _VERSION.fullmatch(name.removeprefix(stem + ".")) is not None


def _has_library(libraries: Iterable[str], stem: str) -> bool:
    return any(_is_library(path, stem) for path in libraries)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


class _RootedLookup:
    """File lookups confined to a root: symlinks are followed as if the root were `/`, never out of it."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def host(self, path: str) -> str | None:
        """The real path of `path` (absolute inside the root), resolving links inside the root; None if absent."""
        parts = [p for p in PurePosixPath(path).parts if p not in ("/", "")]
        resolved: list[str] = []
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == ".":
                continue
            if part == "..":
                if resolved:
                    resolved.pop()
                continue
            candidate = os.path.join(self.root, *resolved, part)
            if os.path.islink(candidate):
                hops += 1
                if hops > _MAX_SYMLINK_HOPS:
                    return None
                try:
                    target = PurePosixPath(os.readlink(candidate))
                except OSError:
                    return None
                if target.is_absolute():
                    resolved = []
                parts = [p for p in target.parts if p not in ("/", "")] + parts
                continue
            if not os.path.lexists(candidate):
                return None
            resolved.append(part)
        return os.path.join(self.root, *resolved)

    def inside(self, path: str) -> str | None:
        """The real path of `path` as an absolute path inside the root (`/run/x`), or None if absent."""
        real = self.host(path)
        return None if real is None else "/" + os.path.relpath(real, self.root).removeprefix(".").lstrip("/")

    def exists(self, path: str) -> bool:
        return self.host(path) is not None

    def is_file(self, path: str) -> bool:
        real = self.host(path)
        return real is not None and os.path.isfile(real)

    def is_dir(self, path: str) -> bool:
        real = self.host(path)
        return real is not None and os.path.isdir(real)

    def link_target(self, path: str) -> str | None:
        """The file name a symlink at `path` points to (its last component), or None if it is not a link."""
        parent = self.host(str(PurePosixPath(path).parent))
        if parent is None:
            return None
        candidate = os.path.join(parent, PurePosixPath(path).name)
        try:
            return PurePosixPath(os.readlink(candidate)).name if os.path.islink(candidate) else None
        except OSError:
            return None

    def entries(self, directory: str) -> list[str]:
        """Every entry directly in `directory` (at most MAX_DIRECTORY_ENTRIES), as paths inside the root."""
        real = self.host(directory)
        if real is None or not os.path.isdir(real):
            return []
        names = []
        try:
            with os.scandir(real) as entries:
                for count, entry in enumerate(entries):
                    if count >= MAX_DIRECTORY_ENTRIES:
                        break
                    names.append(entry.name)
        except OSError:  # an unreadable directory holds nothing we can mount
            return []
        base = PurePosixPath("/" + directory.strip("/"))
        return sorted(str(base / n) for n in names)

    def list_files(self, directory: str) -> list[str]:
        """Regular files (or links to them) directly in `directory`."""
        return [path for path in self.entries(directory) if self.is_file(path)]

    def glob(self, directory: str, pattern: str) -> list[str]:
        """Files in `directory` whose name matches a shell pattern (`*` and `?` only)."""
        regex = _pattern(pattern)
        return [p for p in self.list_files(directory) if regex.fullmatch(PurePosixPath(p).name)]

    def glob_any(self, directory: str, pattern: str) -> list[str]:
        """Entries of any type (device nodes, sockets) in `directory` whose name matches `pattern`."""
        regex = _pattern(pattern)
        return [p for p in self.entries(directory) if regex.fullmatch(PurePosixPath(p).name) and self.exists(p)]


def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."))


# Device nodes and files of the optional GPUDirect features, as NVIDIA's toolkit discovers them.
FEATURE_DEVICE_GLOBS = {
    "gdrcopy": (("/dev", "gdrdrv"),),
    "gds": (("/dev", "nvidia-fs*"),),
    "mofed": (("/dev/infiniband", "uverbs*"), ("/dev/infiniband", "rdma_cm")),
}
FEATURE_FILES = {"gds": ("/etc/cufile.json", "/run/udev")}


@record
class FeatureFiles:
    """One feature's device nodes (under the dev root) and files (under the driver root) that exist."""

    feature: str
    device_nodes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    real: tuple[tuple[str, str], ...] = ()  # as DriverFiles.real, for the files

    def source(self, path: str) -> str:
        return dict(self.real).get(path, path)


def discover_feature_files(feature: str, dev_root: str, driver_root: str) -> FeatureFiles:
    """The nodes of `feature` ("gdrcopy", "gds", "mofed") under `dev_root` and its files under `driver_root`."""
    devices = _RootedLookup(dev_root) if os.path.isdir(dev_root) else None
    nodes: list[str] = []
    for directory, pattern in FEATURE_DEVICE_GLOBS[feature]:
        if devices is not None:
            nodes += devices.glob_any(directory, pattern)
    files: list[str] = []
    real: tuple[tuple[str, str], ...] = ()
    if os.path.isdir(driver_root):
        driver = _RootedLookup(driver_root)
        files = [path for path in FEATURE_FILES.get(feature, ()) if driver.exists(path)]
        real = real_paths(driver, files)
    return FeatureFiles(feature, tuple(sorted(dict.fromkeys(nodes))), tuple(files), real)
