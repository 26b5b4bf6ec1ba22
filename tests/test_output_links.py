"""Nothing outside the output directory is written, moved, changed or deleted, whatever links
lie on the way to it or appear while a build runs.

`-o` is resolved one component at a time without following a link: a link anywhere on the way
is refused (exit 2, naming it), and so is a path that ends inside `.git`. A build works in the
directories it opened, never through their names again, so a job directory, the output
directory or one of its parents swapped for a link to an outside directory in the middle of a
build cannot redirect a write, a move, a mode change or a deletion: the race below runs builds
against a process that keeps swapping them, and the outside directory must stay byte for byte,
mode for mode, inode for inode as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result, job_text
from tfcompile.compiler.output import writing

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="renameat2(RENAME_EXCHANGE) as on Linux")

Snapshot = dict[str, tuple[int, int, int, bytes | str | None]]


def snapshot(root: Path) -> Snapshot:
    """Every entry under `root` (itself included), links not followed: its kind, mode, inode
    and bytes (or a link's target)."""
    found: Snapshot = {}

    def entry(path: Path) -> None:
        status = os.lstat(path)
        content: bytes | str | None = None
        if stat.S_ISLNK(status.st_mode):
            content = os.readlink(path)
        elif stat.S_ISREG(status.st_mode):
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(descriptor, "rb") as handle:
                content = handle.read()
        found[str(path.relative_to(root.parent))] = (
            stat.S_IFMT(status.st_mode), stat.S_IMODE(status.st_mode), status.st_ino, content)

    entry(root)
    for directory, directories, files in os.walk(root):
        for name in sorted([*directories, *files]):
            entry(Path(directory) / name)
    return found


def _jobs(repository: Path, names: tuple[str, ...], variant: int = 0) -> None:
    for name in names:
        text = job_text(name)
        if variant:  # other contents and one file fewer (no NetworkPolicy)
            text = text.replace("replicas: 2", "replicas: 3") + "  networkPolicy: false\n"
        folder = repository / "jobs" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.yaml").write_text(text)


def _outside(tmp_path: Path, like: Path) -> Path:
    """A directory outside the repository that looks like `like` (a job directory, the output
    directory, ...) to anything that follows a link into it, with modes of its own."""
    outside = tmp_path / "outside" / like.name
    shutil.copytree(like, outside, symlinks=True)
    (outside / "precious.txt").write_text("precious\n")
    for path in [outside, *outside.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o750 if path.is_dir() else 0o640)
    (outside / "precious.txt").chmod(0o600)
    return outside


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               run_cli: Callable[..., Result]) -> Path:
    """A repository (with .git) whose two jobs are built into output/."""
    root = tmp_path / "repository"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "hooks" / "pre-commit.sample").write_text("#!/bin/sh\n")
    _jobs(root, ("a", "b"))
    monkeypatch.chdir(root)
    assert run_cli("build", "jobs").status == 0
    return root


def _refused(result: Result, line: str) -> None:
    assert result.status == 2, result
    assert f"tfcompile: {line}" in result.stderr.splitlines(), result.stderr
    assert result.stderr.splitlines()[-1] == "tfcompile: nothing was written"
    assert "Traceback" not in result.stderr


LINK_REFUSAL = ("{link}: is a symbolic link, so {output} cannot be the output directory "
                "(tfcompile follows no link on the way to it); name the directory itself "
                "with -o")


@pytest.mark.parametrize("check", [False, True], ids=["build", "build --check"])
def test_an_output_path_through_a_link_to_git_is_refused(
    repository: Path, run_cli: Callable[..., Result], check: bool
) -> None:
    (repository / "g").symlink_to(".git")
    before = snapshot(repository / ".git")
    result = run_cli("build", "jobs", "-o", "g/hooks", *(["--check"] if check else []))
    _refused(result, LINK_REFUSAL.format(link="g", output="g/hooks"))
    assert snapshot(repository / ".git") == before


def test_an_output_path_through_a_link_to_an_outside_folder_is_refused(
    repository: Path, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    outside = _outside(tmp_path, repository / "output")
    (repository / "elsewhere").symlink_to(outside.parent)
    before = snapshot(outside.parent)
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 4"))
    _refused(run_cli("build", "jobs", "-o", "elsewhere/output"),
             LINK_REFUSAL.format(link="elsewhere", output="elsewhere/output"))
    # Through the link and back again with `..`: the kernel would land outside; no link is
    # followed, so it is refused all the same.
    (repository / "inner").mkdir()
    (repository / "inner" / "link").symlink_to(outside / "a", target_is_directory=True)
    _refused(run_cli("build", "jobs", "-o", "inner/link/../output"),
             LINK_REFUSAL.format(link="inner/link", output="inner/link/../output"))
    assert snapshot(outside.parent) == before


def test_a_link_in_the_middle_of_the_output_path_is_refused_as_given_or_absolute(
    repository: Path, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    outside = _outside(tmp_path, repository / "output")
    deep = repository / "deploy" / "cluster"
    deep.mkdir(parents=True)
    (deep / "current").symlink_to(outside.parent, target_is_directory=True)
    (outside.parent / "generated").mkdir()
    shutil.copytree(repository / "output", outside.parent / "generated" / "output")
    before = snapshot(outside.parent)
    _refused(run_cli("build", "jobs", "-o", "deploy/cluster/current/generated/output"),
             LINK_REFUSAL.format(link="deploy/cluster/current",
                                 output="deploy/cluster/current/generated/output"))
    absolute = deep / "current" / "generated" / "output"
    _refused(run_cli("build", "jobs", "-o", str(absolute)),
             LINK_REFUSAL.format(link=deep / "current", output=absolute))
    _refused(run_cli("build", "jobs", "-o", "deploy/cluster/current/new/output"),
             LINK_REFUSAL.format(link="deploy/cluster/current",
                                 output="deploy/cluster/current/new/output"))
    assert snapshot(outside.parent) == before
    assert sorted(p.name for p in deep.iterdir()) == ["current"]


def test_git_is_refused_where_the_path_lands_not_where_it_is_written(
    repository: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(repository / ".git")
    _refused(run_cli("build", "jobs", "-o", "jobs/../.git/hooks"),
             "jobs/../.git/hooks: the output directory is inside .git; choose another with -o")
    monkeypatch.chdir(repository / ".git" / "hooks")
    _refused(run_cli("build", "../../jobs", "-o", "output"),
             "output: the output directory is inside .git; choose another with -o")
    assert snapshot(repository / ".git") == before
    # From inside .git, a path that leads out of it is the repository's output.
    result = run_cli("build", "../../jobs", "-o", "../../output", "--check")
    assert result.status == 0, result.stderr


def test_missing_folders_on_the_way_are_created_and_dot_dot_of_real_folders_is_followed(
    repository: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_cli("build", "jobs", "-o", "new/deeper/../output")
    assert result.status == 0, result.stderr
    assert sorted(p.name for p in (repository / "new").iterdir()) == ["output"]
    assert (repository / "new" / "output" / "a" / "kustomization.yaml").is_file()
    monkeypatch.chdir(repository / "jobs")
    assert run_cli("build", ".", "-o", "../output", "--check").status == 0


# The swap race: builds against a process that keeps swapping a job directory, the output
# directory or its parent for a link to an outside directory that looks like it.

SWAPPER = r"""
import ctypes, json, os, random, signal, sys, time

renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
stopped = False


def stop(*_):
    global stopped
    stopped = True


def exchange(first, second):
    if renameat2(-100, os.fsencode(first), -100, os.fsencode(second), 2) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), second)


signal.signal(signal.SIGTERM, stop)
pairs, seed = json.loads(sys.argv[1]), int(sys.argv[2])
randomness = random.Random(seed)
swaps = 0
print("ready", flush=True)
while not stopped:
    target, parked = randomness.choice(pairs)
    try:
        exchange(parked, target)  # the target is a link now; the directory waits parked
    except OSError:
        continue
    time.sleep(randomness.uniform(0, 0.004))
    exchange(parked, target)
    swaps += 1
    time.sleep(randomness.uniform(0, 0.002))
print(swaps, flush=True)
"""


OUTCOMES = {
    "cannot be the output directory": "refused: a link on the way to the output directory",
    "the output directory is a symbolic link": "refused: the output directory a link",
    "is a symbolic link; tfcompile never follows": "refused: a job directory a link",
    "while tfcompile was writing it": "refused: swapped while written, put back",
}


def _outcome(result: Result) -> str:
    """What a build of the race did, in a few words."""
    if result.status == 0:
        return "built"
    first = result.stderr.splitlines()[0]
    return next((said for words, said in OUTCOMES.items() if words in first),
                f"exit {result.status}: {first}")


def _swap_race(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result],
               builds: int) -> None:
    repository = tmp_path / "repository"
    names = ("a", "b", "c", "d")
    _jobs(repository, names)
    monkeypatch.chdir(repository)
    monkeypatch.setenv("TFCOMPILE_CACHE_DIR", "")  # every build a full one
    arguments = ("build", "jobs", "-o", "build/output")
    assert run_cli(*arguments).status == 0
    output = repository / "build" / "output"
    for name in names:  # what tfcompile keeps in a job directory, and a mode of its own
        (output / name / "NOTES.md").write_text(f"notes of {name}\n")
        (output / name / "extra").mkdir()
        (output / name / "extra" / "patch.yaml").write_text("kind: Patch\n")
        (output / name).chmod(0o750)
    outside_job = _outside(tmp_path, output / "a")
    outside_output = _outside(tmp_path, output)
    outside_build = _outside(tmp_path, repository / "build")
    outside = tmp_path / "outside"
    parking = tmp_path / "parking"
    parking.mkdir()
    pairs: list[list[str]] = []
    for target, link_to in [*[(output / name, outside_job) for name in names],
                            (output, outside_output), (repository / "build", outside_build)]:
        parked = parking / f"{target.name}-{len(pairs)}"
        parked.symlink_to(link_to, target_is_directory=True)
        pairs.append([str(target), str(parked)])
    before = snapshot(outside)
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, json.dumps(pairs), "20261127"],
                               stdout=subprocess.PIPE, text=True)
    outcomes: dict[str, int] = {}
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        for build in range(builds):
            _jobs(repository, names, variant=(build + 1) % 2)
            result = run_cli(*arguments)
            assert result.status in (0, 1, 2), result
            assert "Traceback" not in result.stderr and "internal error" not in result.stderr
            outcomes[_outcome(result)] = outcomes.get(_outcome(result), 0) + 1
            assert snapshot(outside) == before, f"build {build}: {result.stderr}"
    finally:
        swapper.send_signal(signal.SIGTERM)
        swaps, _ = swapper.communicate(timeout=30)
    assert snapshot(outside) == before
    # Put back what a build and the swapper, fighting, may have left swapped.
    for swapped, parked_at in pairs:
        if os.path.islink(swapped) and not os.path.islink(parked_at):
            os.rename(parked_at, swapped + ".parked")
            os.unlink(swapped)
            os.rename(swapped + ".parked", swapped)
        elif os.path.islink(swapped):
            os.unlink(swapped)
    started = time.monotonic()
    final = run_cli(*arguments)
    assert final.status == 0, final.stderr
    for name in names:
        assert (output / name / "kustomization.yaml").is_file()
    # The files of their own kept in the job directories are kept, and --check names them
    # (the tree Argo CD syncs is tfcompile's own); nothing else is out of place.
    for name in names:
        assert (output / name / "NOTES.md").read_text() == f"notes of {name}\n"
    checked = run_cli(*arguments, "--check")
    assert checked.status == 1, checked.stderr
    assert checked.stderr.count("not written by tfcompile") == 2 * len(names), checked.stderr
    assert not [p for p in output.iterdir() if p.name.startswith(".tfcompile-")]
    assert outcomes.get("built", 0) > 0
    print(f"{builds} builds racing {swaps.strip()} swaps: {outcomes}; "
          f"the outside directory unchanged; final build {time.monotonic() - started:.2f}s")


@pytest.mark.slow
def test_a_short_swap_race_leaves_the_outside_directory_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    _swap_race(tmp_path, monkeypatch, run_cli, builds=25)


@pytest.mark.slow
def test_hundreds_of_builds_racing_swaps_leave_the_outside_directory_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., Result]
) -> None:
    _swap_race(tmp_path, monkeypatch, run_cli, builds=400)


def test_a_job_directory_swapped_for_a_link_at_the_moment_of_the_swap_is_put_back(
    repository: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The race at its narrowest: output/b becomes a link to an outside directory just before
    its staged directory is swapped in. The swap moves the link itself (never what it points
    to); tfcompile sees that what came out is not the directory it staged from, swaps back,
    undoes the jobs already swapped and refuses (exit 2)."""
    outside = _outside(tmp_path, repository / "output" / "b")
    before_outside = snapshot(outside.parent)
    real_b = repository / "real-b"
    exchange = writing.exchange  # type: ignore[attr-defined]

    def swapped_first(directory: int, first: str, second: str) -> bool:
        if second == "b" and not real_b.exists():
            (repository / "output" / "b").rename(real_b)
            (repository / "output" / "b").symlink_to(outside, target_is_directory=True)
        return exchange(directory, first, second)

    monkeypatch.setattr(writing, "exchange", swapped_first)
    _jobs(repository, ("a", "b"), variant=1)
    before = snapshot(repository / "output")
    result = run_cli("build", "jobs")
    _refused(result, "output/b: was replaced (by a symbolic link or another directory) while "
                     "tfcompile was writing it; it was put back, build again")
    assert snapshot(outside.parent) == before_outside
    assert os.readlink(repository / "output" / "b") == str(outside)
    (repository / "output" / "b").unlink()
    real_b.rename(repository / "output" / "b")
    assert snapshot(repository / "output") == before  # a undone, b as it was, no leftover
    monkeypatch.setattr(writing, "exchange", exchange)
    assert run_cli("build", "jobs").status == 0


def test_a_killed_builds_leftover_that_is_a_link_or_very_deep_is_removed_alone(
    repository: Path, run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    outside = _outside(tmp_path, repository / "output" / "a")
    before = snapshot(outside.parent)
    output = repository / "output"
    (output / ".tfcompile-new-1-a").symlink_to(outside, target_is_directory=True)
    deep = output / ".tfcompile-old-2-b"
    descriptor = os.open(output, os.O_RDONLY | os.O_DIRECTORY)
    try:  # 3,000 folders deep: more than Python's recursion, deeper than a path may be long
        current = os.dup(descriptor)
        for level in range(3000):
            name = ".tfcompile-old-2-b" if level == 0 else "d"
            os.mkdir(name, dir_fd=current)
            following = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=current)
            os.close(current)
            current = following
        os.close(os.open("file", os.O_WRONLY | os.O_CREAT, dir_fd=current))
        os.close(current)
    finally:
        os.close(descriptor)
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 4"))
    result = run_cli("build", "jobs")
    assert result.status == 0, result.stderr
    assert sorted(p.name for p in output.iterdir()) == ["README.md", "a", "b"]
    assert not deep.exists()
    assert snapshot(outside.parent) == before


def test_folders_kept_in_a_job_directory_nest_at_most_64_deep(
    repository: Path, run_cli: Callable[..., Result],
) -> None:
    kept = repository / "output" / "a" / "notes"
    (kept / Path(*["d"] * 63)).mkdir(parents=True)
    job = repository / "jobs" / "a" / "job.yaml"
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 4"))
    assert run_cli("build", "jobs").status == 0  # 64 levels, notes included: kept
    assert (kept / Path(*["d"] * 63)).is_dir()
    (kept / Path(*["d"] * 64)).mkdir()
    job.write_text(job.read_text().replace("replicas: 4", "replicas: 5"))
    before = snapshot(repository / "output")
    result = run_cli("build", "jobs")
    _refused(result, f"output/a/notes/{'/'.join(['d'] * 64)}: folders nested deeper than 64 "
                     "levels; tfcompile cannot keep them while replacing the job directory, "
                     "move them away")
    assert snapshot(repository / "output") == before
