"""The run's temporary directory: its layout, the interpreter shims, and its removal.

Everything a run creates on the host's filesystem lives below one directory made with
`tempfile.mkdtemp` (unless the caller chose a directory for claims):

    owner                       the runner's process id, start time and PID namespace
    bin/                        python, python3, python3.X where the interpreter's own
                                directory lacks them (see below)
    claims/<claim>/             one directory per PersistentVolumeClaim
    pods/<pod>/hosts            the pod's /etc/hosts
    pods/<pod>/volumes/<name>/  emptyDir, configMap and secret volumes
    pods/<pod>/containers/<container>/start.json   what `container_entry` reads
    pods/<pod>/containers/<container>/staging/     an empty directory; each container start
                                                   mounts its tmpfs here, privately

The directory is the host root's alone (mode 0700): no container user may enter it, and
containers see only what is bound into their view (volumes, hosts file, the shims).

Containers find `python` through PATH: first the directory of this machine's interpreter (a
virtual environment's `bin` holds python, python3 and python3.X already), then `bin/` with
symbolic links for the names that directory lacks, bound read-only at SHIMS_PATH in the
container when it holds any. A link cannot stand in for a virtual environment's interpreter
(from another directory it would not find the environment's packages), so in that rare case the
stand-in is a two-line `sh` script instead (whose shell adds `PWD` to the environment).

A runner killed with SIGKILL cannot delete its directory. Its containers end with it (the kernel
kills them, see `container_entry`), and their mounts and namespaces go with them, but the
directory stays, with what the pods wrote in their volumes, until the next run deletes it
(`remove_abandoned`): it and the directory `job` compiled the job into (`mark_owner`), each
recognized by an `owner` whose process is gone.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DIRECTORY_PREFIX = "tfcompile-run-"
OWNER_FILE = "owner"
SHIMS_PATH = "/opt/tfcompile/run-local/bin"


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
    """Six hexadecimal digits naming the run's links and temporary directory."""
    return secrets.token_hex(3)


def interpreter_names() -> list[str]:
    major, minor = sys.version_info[:2]
    return ["python", f"python{major}", f"python{major}.{minor}"]


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
            workspace._write_interpreter_shims()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return workspace

    @property
    def bin_directory(self) -> Path:
        return self.root / "bin"

    def pod_directory(self, pod_name: str) -> Path:
        return self.root / "pods" / pod_name

    def hosts_file(self, pod_name: str) -> Path:
        return self.pod_directory(pod_name) / "hosts"

    def volumes_directory(self, pod_name: str) -> Path:
        return self.pod_directory(pod_name) / "volumes"

    def container_directory(self, pod_name: str, container_name: str) -> Path:
        return self.pod_directory(pod_name) / "containers" / container_name

    def _write_interpreter_shims(self) -> None:
        self.bin_directory.mkdir()
        interpreter = Path(sys.executable)
        in_virtual_environment = sys.prefix != sys.base_prefix
        for name in interpreter_names():
            present = interpreter.parent / name
            if present.exists() and present.resolve() == interpreter.resolve():
                continue
            shim = self.bin_directory / name
            if in_virtual_environment:
                shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} \"$@\"\n",
                                encoding="utf-8")
                shim.chmod(0o755)
            else:
                shim.symlink_to(interpreter)

    def has_shims(self) -> bool:
        return any(self.bin_directory.iterdir())

    def container_path_variable(self) -> str:
        """`PATH` for containers: the interpreter's directory, the shims (at SHIMS_PATH), then
        this machine's."""
        entries = [str(Path(sys.executable).parent)]
        if self.has_shims():
            entries.append(SHIMS_PATH)
        for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
            if entry and entry not in entries:
                entries.append(entry)
        return os.pathsep.join(entries)

    def remove(self) -> list[str]:
        """Delete the tree; returns what could not be deleted (normally nothing)."""
        failures: list[str] = []

        def record(function: object, path: str,
                   error: tuple[object, BaseException, object]) -> None:
            failures.append(f"{path}: {error[1]}")

        shutil.rmtree(self.root, onerror=record)
        return failures
