"""`script:` ships a file into a ConfigMap (and CI prints it), so it must not reach outside the
job's repository: no absolute paths, no `..` out of it, nothing in `.git`, no symlink that leaves
it, no file with a second name (a hard link), no device or FIFO, nothing too big for a ConfigMap,
and a name that is a ConfigMap key. Each refusal is exit 2 at the `script:` value, with nothing
written and nothing of the file shown."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Result, job_text
from tfcompile.spec.loading import load_jobs
from tfcompile.spec.problems import UnreadableInput

MARKER = "MARKER-4711-must-not-leak"
"""Written into every file a job must not ship; never in what tfcompile prints or writes."""


@dataclass(frozen=True)
class Layout:
    """A repository (`repo/` with `.git`) holding a job in `repo/jobs/demo/`, with a planted
    file outside the repository and one inside `.git`."""

    repository: Path
    job_folder: Path
    outside: Path

    def job(self, script: str) -> Path:
        path = self.job_folder / "job.yaml"
        path.write_text(job_text(script=script, command=None), encoding="utf-8")
        return path


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    repository = tmp_path / "repo"
    job_folder = repository / "jobs" / "demo"
    job_folder.mkdir(parents=True)
    (repository / ".git").mkdir()
    (repository / ".git" / "config").write_text(
        f"[http]\n\textraheader = AUTHORIZATION: basic {MARKER}\n", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "hostname").write_text(MARKER + "\n", encoding="utf-8")
    (job_folder / "train.py").write_text("print('training')\n", encoding="utf-8")
    return Layout(repository, job_folder, outside)


@dataclass(frozen=True)
class Refusal:
    name: str
    script: str
    says: str
    prepare: Callable[[Layout], None] = lambda layout: None


def _symlink(name: str, target: Callable[[Layout], Path | str]) -> Callable[[Layout], None]:
    def prepare(layout: Layout) -> None:
        (layout.job_folder / name).symlink_to(target(layout))
    return prepare


def _fifo(layout: Layout) -> None:
    os.mkfifo(layout.job_folder / "pipe.py")


def _big(layout: Layout) -> None:
    with (layout.job_folder / "big.py").open("wb") as handle:
        handle.truncate(64 * 1024 * 1024)  # sparse: its size is refused before any read


def _named(name: str) -> Callable[[Layout], None]:
    def prepare(layout: Layout) -> None:
        (layout.job_folder / name).write_text("print(1)\n", encoding="utf-8")
    return prepare


def _hard_link(name: str, target: Callable[[Layout], Path]) -> Callable[[Layout], None]:
    def prepare(layout: Layout) -> None:
        os.link(target(layout), layout.job_folder / name)
    return prepare


def _symlink_to_hard_link(layout: Layout) -> None:
    os.link(layout.repository / ".git" / "config", layout.repository / "config.py")
    (layout.job_folder / "link.py").symlink_to(Path("../../config.py"))


def _git_file_worktree(layout: Layout) -> None:
    (layout.job_folder / "sub").mkdir()
    (layout.job_folder / "sub" / ".git").write_text("gitdir: ../../.git\n", encoding="utf-8")


OUTSIDE = "leads outside the job's repository"
HARD_LINKED = ("the script has 2 hard links: another name on this machine is the same file (it "
               "could be .git/config or any file outside the repository), so it is not shipped; "
               "allowed: a file with one link (copy the file instead of linking it)")
REFUSALS = [
    Refusal("absolute path to a system file", "/etc/hostname", "must be a path relative"),
    Refusal("absolute path into /proc", "/proc/self/environ", "must be a path relative"),
    Refusal("dot-dots out of the repository", "../../../../etc/hostname", OUTSIDE),
    Refusal("dot-dots to a planted file", "../../../outside/hostname", OUTSIDE),
    Refusal("the repository's .git/config", "../../.git/config", "is inside .git"),
    Refusal("a path through .git that comes back", "../../.git/../.git/config", "inside .git"),
    Refusal("symlink to an absolute system file", "link.py", OUTSIDE,
            _symlink("link.py", lambda layout: "/etc/hostname")),
    Refusal("symlink to /proc/self/environ", "link.py", OUTSIDE,
            _symlink("link.py", lambda layout: "/proc/self/environ")),
    Refusal("symlink to a file outside", "link.py", OUTSIDE,
            _symlink("link.py", lambda layout: layout.outside / "hostname")),
    Refusal("relative symlink into .git", "link.py", "is inside .git",
            _symlink("link.py", lambda layout: Path("../../.git/config"))),
    Refusal("symlinked folder that leaves", "away/hostname", OUTSIDE,
            _symlink("away", lambda layout: layout.outside)),
    Refusal("symlink to a device", "null.py", OUTSIDE,
            _symlink("null.py", lambda layout: "/dev/null")),
    Refusal("a nested .git file (worktree or submodule)", "sub/.git", "is inside .git",
            _git_file_worktree),
    Refusal("an empty folder", "folder", "holds no files",
            lambda layout: (layout.job_folder / "folder").mkdir()),
    Refusal("a FIFO (would block a read)", "pipe.py", "is not a regular file", _fifo),
    Refusal("a broken symlink", "dangling.py", "no such file",
            _symlink("dangling.py", lambda layout: layout.job_folder / "gone.py")),
    Refusal("a symlink loop", "loop.py", "is not a regular file",
            _symlink("loop.py", lambda layout: layout.job_folder / "loop.py")),
    Refusal("a missing file", "missing.py", "no such file"),
    Refusal("a hard link to .git/config", "linked.py", HARD_LINKED,
            _hard_link("linked.py", lambda layout: layout.repository / ".git" / "config")),
    Refusal("a hard link to a file outside", "host.py", HARD_LINKED,
            _hard_link("host.py", lambda layout: layout.outside / "hostname")),
    Refusal("a second name of a file of the repository", "again.py", HARD_LINKED,
            _hard_link("again.py", lambda layout: layout.job_folder / "train.py")),
    Refusal("a symlink to a hard link to .git/config", "link.py", HARD_LINKED,
            _symlink_to_hard_link),
    Refusal("a file too big for a ConfigMap", "big.py", "a ConfigMap holds at most", _big),
    Refusal("a name with a space", "'train me.py'", "not a valid ConfigMap key",
            _named("train me.py")),
    Refusal("a name starting with two dots", "..train.py", "not a valid ConfigMap key",
            _named("..train.py")),
    Refusal("a name of non-ASCII letters", "trainé.py", "not a valid ConfigMap key",
            _named("trainé.py")),
    Refusal("a name longer than 253 characters", "a" * 251 + ".py",
            "not a valid ConfigMap key", _named("a" * 251 + ".py")),
    Refusal("a folder without a command", "'.'", "no single file to run"),
]


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r.name for r in REFUSALS])
def test_a_script_that_leaves_the_repository_is_refused_at_its_line(
    refusal: Refusal, layout: Layout, run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusal.prepare(layout)
    job = layout.job(refusal.script)
    monkeypatch.chdir(layout.job_folder)
    started = time.process_time()  # the work done, whatever else shares the processor
    result = run_cli("build", "job.yaml", "-o", "output")
    assert time.process_time() - started < 10
    assert result.status == 2, result.stderr
    column = job.read_text(encoding="utf-8").splitlines()[6].index(":") + 3
    assert f"job.yaml:7:{column}: spec.script: " in result.stderr
    assert refusal.says in result.stderr, result.stderr
    assert MARKER not in result.stdout + result.stderr
    assert not (layout.job_folder / "output").exists()
    assert "Traceback" not in result.stderr


def _built_script(output: Path) -> str:
    [config_map] = output.glob("demo/configmap-demo-script-*.yaml")
    return config_map.read_text(encoding="utf-8")


def test_a_script_next_to_the_job_is_shipped(
    layout: Layout, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    result = run_cli("build", str(layout.job("train.py")), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr
    assert "train.py: |\n    print('training')" in _built_script(tmp_path / "out")


def test_a_script_elsewhere_in_the_repository_and_symlinks_inside_it_are_shipped(
    layout: Layout, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    shared = layout.repository / "shared"
    shared.mkdir()
    (shared / "common.py").write_text("print('common')\n", encoding="utf-8")
    (layout.job_folder / "entry.py").symlink_to(Path("../../shared/common.py"))
    result = run_cli("build", str(layout.job("entry.py")), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr
    shipped = _built_script(tmp_path / "out")
    assert "entry.py: |\n    print('common')" in shipped  # the key is the name written
    result = run_cli("build", str(layout.job("../../shared/common.py")), "-o",
                     str(tmp_path / "out2"))
    assert result.status == 0, result.stderr
    assert "common.py: |" in _built_script(tmp_path / "out2")


def test_without_git_the_repository_is_the_job_folder(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    folder = tmp_path / "plain" / "job"
    folder.mkdir(parents=True)
    (tmp_path / "plain" / "shared.py").write_text("print(1)\n", encoding="utf-8")
    (folder / "job.yaml").write_text(job_text(script="../shared.py", command=None),
                                     encoding="utf-8")
    result = run_cli("build", str(folder / "job.yaml"), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "spec.script: leads outside the job's repository" in result.stderr


def test_a_script_of_the_largest_allowed_size_is_shipped(
    layout: Layout, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    from tfcompile.spec.scripts import MAXIMUM_SCRIPT_BYTES

    line = "x = 1  # " + "a" * 90 + "\n"
    text = line * (MAXIMUM_SCRIPT_BYTES // len(line))
    (layout.job_folder / "train.py").write_text(text, encoding="utf-8")
    result = run_cli("build", str(layout.job("train.py")), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr
    (layout.job_folder / "train.py").write_text(text + "#" * (len(line) + 1), encoding="utf-8")
    result = run_cli("build", str(layout.job("train.py")), "-o", str(tmp_path / "out2"))
    assert result.status == 2
    assert "a ConfigMap holds at most" in result.stderr


def _load_as_another_user(job: Path) -> str:
    """What loading `job` raises, loaded in a child process without root's right to read any
    file (root reads files whatever their mode)."""
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        outcome = "no error"
        try:
            os.close(reading)
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            load_jobs(job)
        except UnreadableInput as error:
            outcome = f"{type(error).__name__} {isinstance(error, OSError)} {error}"
        except BaseException as error:
            outcome = f"unexpected {type(error).__name__}"
        finally:
            os.write(writing, outcome.encode())
            os._exit(0)
    os.close(writing)
    with os.fdopen(reading, "rb") as handle:
        outcome = handle.read().decode()
    os.waitpid(child, 0)
    return outcome


@pytest.mark.parametrize(("unreadable", "what"), [("train.py", "the script"),
                                                  ("job.yaml", "the job file")])
def test_an_unreadable_input_is_an_environment_error_naming_the_file(
    unreadable: str, what: str
) -> None:
    """Not a spec problem (exit 2) but an OSError the command reports as one line, exit 1."""
    folder = Path(tempfile.mkdtemp(prefix="tfcompile-unreadable-"))
    try:
        folder.chmod(0o755)
        (folder / "job.yaml").write_text(job_text(script="train.py", command=None),
                                         encoding="utf-8")
        (folder / "train.py").write_text("print(1)\n", encoding="utf-8")
        for path in folder.iterdir():
            path.chmod(0o000 if path.name == unreadable else 0o644)
        outcome = _load_as_another_user(folder / "job.yaml")
    finally:
        for path in sorted(folder.iterdir()):
            path.unlink()
        folder.rmdir()
    shown = os.path.relpath(folder / unreadable)
    assert outcome == f"UnreadableInput True cannot read {what}: {shown}: Permission denied"
