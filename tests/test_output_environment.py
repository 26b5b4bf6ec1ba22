"""When the machine says no: a full disk, a read-only tree, permission denied, an output path
that cannot be a directory. One line naming the path and the system's reason, exit 1, no
traceback, and the tree as it was. Run with the real command, on real (small) file systems."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import job_text

pytestmark = pytest.mark.slow

TFCOMPILE = str(Path(sys.executable).with_name("tfcompile"))
AS_ROOT_ON_LINUX = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0,
    reason="mounting a small tmpfs needs root on Linux")


def _repository(root: Path, replicas: int = 2) -> Path:
    for name in ("a", "b", "c"):
        folder = root / "jobs" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.yaml").write_text(
            job_text(name, roles=f"worker: {{replicas: {replicas}}}"))
    return root


def _tfcompile(cwd: Path, *arguments: str, user: int | None = None
               ) -> subprocess.CompletedProcess[str]:
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}",
                                      "--clear-groups"]
    # Another user has a cache of its own: root's records (private to root) are not its.
    environment = os.environ if user is None else {**os.environ, "TFCOMPILE_CACHE_DIR": ""}
    return subprocess.run([*prefix, TFCOMPILE, *arguments], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False, env=environment)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    return lines[0]


def _built(repository: Path, output: Path) -> dict[str, bytes]:
    """Build the repository's jobs into `output`; the tree it wrote."""
    assert _tfcompile(repository, "build", "jobs", "-o", str(output)).returncode == 0
    return _tree(output)


def _failed_rebuild(repository: Path, output: Path) -> str:
    """Give every job three workers and build into `output` again, which fails; its one line."""
    _repository(repository, replicas=3)
    result = _tfcompile(repository, "build", "jobs", "-o", str(output))
    assert result.returncode == 1
    return _one_line(result.stderr)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (two example jobs fit twice, as a swap needs), unmounted whatever
    happens."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tfcompile-test",
                    str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@AS_ROOT_ON_LINUX
def test_a_full_disk_is_one_line_with_the_path_and_the_old_tree_stays(
    tmp_path: Path, small_disk: Path
) -> None:
    repository = _repository(tmp_path / "repository")
    output = small_disk / "output"
    before = _built(repository, output)
    filler = small_disk / "filler"
    with pytest.raises(OSError, match="No space left"), filler.open("wb", buffering=0) as handle:
        while True:
            handle.write(b"\0" * 4096)
    line = _failed_rebuild(repository, output)
    assert line.startswith(f"tfcompile: cannot write {output}/a/")
    assert line.endswith(": No space left on device")
    assert _tree(output) == before
    assert [p.name for p in output.iterdir() if p.name.startswith(".")] == []
    filler.unlink()
    assert _tfcompile(repository, "build", "jobs", "-o", str(output)).returncode == 0
    assert _tfcompile(repository, "build", "jobs", "-o", str(output), "--check").returncode == 0


@AS_ROOT_ON_LINUX
def test_a_read_only_tree_is_one_line_and_an_up_to_date_build_still_passes(
    tmp_path: Path, small_disk: Path
) -> None:
    repository = _repository(tmp_path / "repository")
    output = small_disk / "output"
    before = _built(repository, output)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    assert _tfcompile(repository, "build", "jobs", "-o", str(output)).returncode == 0
    assert _failed_rebuild(repository, output) == (
        f"tfcompile: cannot write {output}/a: Read-only file system")
    assert _tree(output) == before
    check = _tfcompile(repository, "build", "jobs", "-o", str(output), "--check")
    assert check.returncode == 1
    assert "is stale" in check.stderr
    fresh = _tfcompile(repository, "build", "jobs", "-o", str(small_disk / "new" / "output"))
    assert fresh.returncode == 1
    assert _one_line(fresh.stderr) == (
        f"tfcompile: cannot create {small_disk}/new: Read-only file system")


@AS_ROOT_ON_LINUX
def test_permission_denied_is_one_line_naming_the_directory(tmp_path: Path) -> None:
    # The tree is root's; the build runs as nobody. (A temporary directory others can enter.)
    root = Path(tempfile.mkdtemp(prefix="tfcompile-permissions-"))
    try:
        root.chmod(0o755)
        repository = _repository(root / "repository")
        for path in [repository, *repository.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        assert _tfcompile(repository, "build", "jobs").returncode == 0
        before = _tree(repository / "output")
        _repository(repository, replicas=3)
        result = _tfcompile(repository, "build", "jobs", user=65534)
        assert result.returncode == 1
        assert _one_line(result.stderr) == (
            "tfcompile: cannot write output/a: Permission denied")
        assert _tree(repository / "output") == before
    finally:
        shutil.rmtree(root)


def test_an_output_path_through_a_file_is_refused_in_one_line(tmp_path: Path) -> None:
    repository = _repository(tmp_path / "repository")
    (repository / "notes.txt").write_text("mine\n")
    result = _tfcompile(repository, "build", "jobs", "-o", "notes.txt/output")
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        "tfcompile: notes.txt: is a file, so notes.txt/output cannot be the output directory; "
        "choose another with -o")
    assert "Traceback" not in result.stderr
    assert (repository / "notes.txt").read_text() == "mine\n"


@AS_ROOT_ON_LINUX
def test_an_unreadable_job_file_is_one_line_naming_it() -> None:
    # The job file is root's and private; the build runs as nobody, who may enter the folder.
    root = Path(tempfile.mkdtemp(prefix="tfcompile-unreadable-"))
    try:
        root.chmod(0o777)
        repository = _repository(root / "repository")
        for path in [repository, *repository.rglob("*")]:
            path.chmod(0o777 if path.is_dir() else 0o644)
        (repository / "jobs" / "b" / "job.yaml").chmod(0o600)
        result = _tfcompile(repository, "build", "jobs/b/job.yaml", user=65534)
        assert result.returncode == 1
        assert _one_line(result.stderr) == (
            "tfcompile: cannot read the job file: jobs/b/job.yaml: Permission denied")
        assert not (repository / "output").exists()
    finally:
        shutil.rmtree(root)
