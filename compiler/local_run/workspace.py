"""The run's temporary directory: its layout and its removal.

Everything a run creates on the host's filesystem lives below one directory made with
`tempfile.mkdtemp` (unless the caller chose a directory for claims):

    owner                       the runner's process id, start time and PID namespace
    claims/<claim>/             one directory per PersistentVolumeClaim
    pods/<pod>/volumes/<name>/  emptyDir, configMap and secret volumes

The directory is the host root's alone (mode 0700): containers see only the volumes podman
binds into them.

A runner killed with SIGKILL cannot delete its directory; its guard does (`guard`), and failing
that the next run deletes it (`remove_abandoned`): it and the directory `job` compiled the job
into (`mark_owner`), each recognized by an `owner` whose process is gone.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

DIRECTORY_PREFIX = "tfcompile-run-"
OWNER_FILE = "owner"


def _process_start_time(process: int) -> str | None:
    try:
        status = Path(f"/proc/{process}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    return status.rsplit(")", 1)[1].split()[19]


def _process_namespace() -> str:
    return os.readlink("/proc/self/ns/pid")


def _owner_text() -> str:
    return f"{os.getpid()} {_process_start_time(os.getpid())} {_process_namespace()}\n"


def _abandoned(directory: Path) -> bool:
    """Whether the directory's runner is gone; only runners of this PID namespace are judged."""
    try:
        process, start_time, namespace = (
            (directory / OWNER_FILE).read_text(encoding="utf-8").split())
        if namespace != _process_namespace():
            return False
    except (OSError, ValueError):
        return False
    return _process_start_time(int(process)) != start_time


def mark_owner(directory: Path) -> None:
    """Record this process as the owner of `directory`, a temporary directory named with
    DIRECTORY_PREFIX: the next run deletes it if this process is killed (`remove_abandoned`)."""
    (directory / OWNER_FILE).write_text(_owner_text(), encoding="utf-8")


def remove_abandoned(temporary_directory: Path | None) -> list[Path]:
    """Delete the directories of earlier runs whose runner was killed; returns them."""
    parent = Path(temporary_directory or tempfile.gettempdir())
    removed = []
    for directory in sorted(parent.glob(f"{DIRECTORY_PREFIX}*")):
        if directory.is_dir() and not directory.is_symlink() and _abandoned(directory):
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def new_run_identifier() -> str:
    """Six hexadecimal digits naming the run's pods, network and temporary directory."""
    return secrets.token_hex(3)


@dataclass(frozen=True)
class Workspace:
    """The directory tree of one run."""

    root: Path
    claims: Path

    @classmethod
    def create(cls, run_identifier: str, temporary_directory: Path | None,
               claims_directory: Path | None) -> Workspace:
        root = Path(tempfile.mkdtemp(prefix=f"{DIRECTORY_PREFIX}{run_identifier}-",
                                     dir=temporary_directory))
        try:
            mark_owner(root)
            claims = claims_directory if claims_directory is not None else root / "claims"
            claims.mkdir(parents=True, exist_ok=True)
            workspace = cls(root, claims)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return workspace

    def pod_directory(self, pod_name: str) -> Path:
        return self.root / "pods" / pod_name

    def volumes_directory(self, pod_name: str) -> Path:
        return self.pod_directory(pod_name) / "volumes"

    def remove(self) -> list[str]:
        """Delete the tree; returns what could not be deleted (normally nothing)."""
        failures: list[str] = []

        def record(function: object, path: str,
                   error: tuple[object, BaseException, object]) -> None:
            failures.append(f"{path}: {error[1]}")

        shutil.rmtree(self.root, onerror=record)
        return failures
