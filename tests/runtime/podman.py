"""A real CDI-capable container runtime (podman) with its own storage, and a tiny local image from busybox."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

IMAGE = "localhost/gpuslice-runtime-check:1"
# Where podman 4 looks for CDI specs (it has no setting for another directory).
CDI_DIR = Path("/var/run/cdi")
BUSYBOX_APPLETS = ("sh", "ls", "cat", "env", "test", "readlink", "echo", "stat")


class RuntimeUnavailable(RuntimeError):
    """The machine cannot start even a plain container: a fact about the machine, not about our specs."""


@dataclass
class Podman:
    """podman with storage under `home`, runc with cgroupfs, and no default ulimits (an unprivileged
    container host may refuse to raise them)."""

    home: Path

    def command(self, *args: str) -> list[str]:
        return [
            "podman", "--root", str(self.home / "storage"), "--runroot", str(self.home / "run"),
            "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file", *args,
        ]  # fmt: skip

    def run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        conf = self.home / "containers.conf"
        env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        return subprocess.run(
            self.command(*args), capture_output=True, text=True, timeout=timeout, env=env, check=False
        )

    def prepare(self) -> None:
        """Write the settings and import the image; RuntimeUnavailable when a plain container cannot start."""
        if shutil.which("podman") is None or shutil.which("runc") is None:
            raise RuntimeUnavailable("podman and runc are not installed (make runtime-check installs them)")
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "containers.conf").write_text("[containers]\ndefault_ulimits = []\n")
        image = self._busybox_image()
        imported = self.run("import", str(image), IMAGE)
        if imported.returncode != 0:
            raise RuntimeUnavailable(f"podman import failed: {imported.stderr.strip()}")
        plain = self.run("run", "--rm", "--network", "none", IMAGE, "/bin/echo", "ok")
        if plain.returncode != 0 or plain.stdout.strip() != "ok":
            raise RuntimeUnavailable(f"a plain container does not start here: {plain.stderr.strip()}")

    def run_with_devices(self, cdi_names: Sequence[str], script: str) -> subprocess.CompletedProcess[str]:
        devices = [arg for name in cdi_names for arg in ("--device", name)]
        return self.run("run", "--rm", "--network", "none", *devices, IMAGE, "/bin/sh", "-c", script)

    def _busybox_image(self) -> Path:
        busybox = shutil.which("busybox")
        if busybox is None:
            raise RuntimeUnavailable("busybox is not installed (Debian: busybox-static)")
        root = self.home / "image-root"
        (root / "bin").mkdir(parents=True, exist_ok=True)
        shutil.copy2(busybox, root / "bin" / "busybox")
        for applet in BUSYBOX_APPLETS:
            link = root / "bin" / applet
            if not link.is_symlink():
                link.symlink_to("busybox")
        tar_path = self.home / "image.tar"
        with tarfile.open(tar_path, "w") as tar:
            tar.add(root, arcname=".")
        return tar_path
