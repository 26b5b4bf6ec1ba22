"""Builds of one output tree at once, and builds killed at random points, with the real command.

A reader polls the tree all along, as Argo CD, an editor or `kubectl kustomize` would: `output/`
and every job directory must always be there, each kustomization must parse and list only files
that exist. After each kill every job directory must be whole, old or new; the next build must
remove what the killed one left.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.conftest import MINIMAL_JOB

TFCOMPILE = str(Path(sys.executable).with_name("tfcompile"))
JOBS = [f"job-{index:02d}" for index in range(10)]
KILLS = 12
SEED = 20261126

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="renameat2 and flock as on Linux")]

Tree = dict[str, dict[str, bytes]]


def _write_specs(repository: Path, variant: int) -> None:
    for name in JOBS:
        text = MINIMAL_JOB.replace("name: demo", f"name: {name}")
        if variant:  # other contents and one file fewer (no NetworkPolicy)
            text = text.replace("replicas: 2", "replicas: 3") + "  networkPolicy: false\n"
        folder = repository / "jobs" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "job.yaml").write_text(text)


STRACE = shutil.which("strace")
SLOW_SWAP_MICROSECONDS = 20_000


def _build(repository: Path, *paths: str, slow_swaps: bool = False) -> subprocess.Popen[str]:
    """Start `tfcompile build`; with `slow_swaps`, under strace with every renameat2 (each job
    directory's swap) held back, so that a kill can land between two swaps."""
    prefix = ([STRACE or "strace", "-f", "--seccomp-bpf", "-qq", "-o", "/dev/null",
               "-e", "trace=renameat2",
               "-e", f"inject=renameat2:delay_exit={SLOW_SWAP_MICROSECONDS}"]
              if slow_swaps else [])
    return subprocess.Popen([*prefix, TFCOMPILE, "build", *(paths or ("jobs",))],
                            cwd=repository, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _kill(process: subprocess.Popen[str], traced: bool) -> None:
    """SIGKILL the build (under strace: the traced tfcompile process itself)."""
    if process.poll() is not None:
        return
    target = process.pid
    if traced:
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        if not children:
            return
        target = int(children[0])
    os.kill(target, signal.SIGKILL)


def _finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=60)
    return process.returncode, stderr


def _snapshot(output: Path) -> Tree:
    tree: Tree = {}
    for directory in sorted(output.iterdir()):
        if directory.name.startswith(".") or not directory.is_dir():
            continue
        tree[directory.name] = {f.name: f.read_bytes() for f in sorted(directory.iterdir())}
    return tree


def _leftovers(output: Path) -> list[str]:
    return sorted(p.name for p in output.iterdir() if p.name.startswith(".tfcompile-"))


def _whole(directory: int) -> bool:
    """Whether the job directory open as `directory` parses and lists only files it holds."""
    try:
        descriptor = os.open("kustomization.yaml", os.O_RDONLY, dir_fd=directory)
        with os.fdopen(descriptor, encoding="utf-8") as handle:
            document = YAML(typ="safe").load(handle.read())
        for name in document["resources"]:
            os.stat(name, dir_fd=directory)
    except Exception:
        return False
    return True


class Reader(threading.Thread):
    """Polls the tree until stopped; records every moment a reader would have seen it broken."""

    def __init__(self, output: Path) -> None:
        super().__init__(daemon=True)
        self.output = output
        self.stopped = threading.Event()
        self.problems: list[str] = []
        self.rounds = 0

    def run(self) -> None:
        while not self.stopped.is_set():
            if not self.output.is_dir():
                self.problems.append("output/ missing")
            for name in JOBS:
                path = self.output / name
                try:
                    directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                except OSError as error:
                    self.problems.append(f"{name}: {error.strerror}")
                    continue
                try:
                    # Unreadable only counts when the directory was not swapped meanwhile (a
                    # reader that opened the old one just sees it go, as with any rename).
                    if not _whole(directory) and (
                            os.fstat(directory).st_ino == os.stat(path).st_ino):
                        self.problems.append(f"{name}: half-written")
                finally:
                    os.close(directory)
            self.rounds += 1
            time.sleep(0.005)  # leave the processor to the builds (two cores in CI)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, Tree]]:
    """A repository built at variant 0, and the tree each variant compiles to."""
    repository = tmp_path_factory.mktemp("built") / "repository"
    references = {}
    for variant in (1, 0):
        _write_specs(repository, variant)
        assert _finish(_build(repository))[0] == 0
        references[variant] = _snapshot(repository / "output")
    assert references[0] != references[1]
    return repository, references


def _copy(built: tuple[Path, dict[int, Tree]], tmp_path: Path) -> tuple[Path, dict[int, Tree]]:
    repository = tmp_path / "repository"
    shutil.copytree(built[0], repository, symlinks=True)
    return repository, built[1]


def test_concurrent_builds_serialize_and_a_reader_never_sees_a_job_missing_or_half_written(
    tmp_path: Path, built: tuple[Path, dict[int, Tree]]
) -> None:
    repository, references = _copy(built, tmp_path)
    output = repository / "output"
    reader = Reader(output)
    reader.start()
    outcomes: list[tuple[int, str]] = []
    try:
        for round_ in range(2):
            variant = (round_ + 1) % 2
            _write_specs(repository, variant)
            processes = [_build(repository), _build(repository, "jobs/job-00"),
                         _build(repository, "jobs/job-07", "jobs/job-09"), _build(repository)]
            outcomes = [_finish(process) for process in processes]
            assert [status for status, _ in outcomes] == [0, 0, 0, 0], outcomes
            assert _snapshot(output) == references[variant]
            assert _leftovers(output) == []
    finally:
        reader.stop()
    assert reader.problems == []
    assert reader.rounds > 10
    print(f"8 concurrent builds in 2 rounds; reader rounds: {reader.rounds}, problems: 0")


def test_builds_killed_at_random_points_leave_every_job_old_or_new_and_the_next_cleans_up(
    tmp_path: Path, built: tuple[Path, dict[int, Tree]]
) -> None:
    repository, references = _copy(built, tmp_path)
    output = repository / "output"
    started = time.monotonic()
    assert _finish(_build(repository))[0] == 0
    duration = time.monotonic() - started
    randomness = random.Random(SEED)
    reader = Reader(output)
    reader.start()
    outcomes = {"before any swap": 0, "some jobs swapped": 0, "all swapped": 0, "finished": 0,
                "left staging behind": 0}
    try:
        for kill in range(KILLS):
            variant = (kill + 1) % 2
            before = _snapshot(output)
            _write_specs(repository, variant)
            mode = kill % 4 if STRACE else kill % 3
            process = _build(repository, slow_swaps=mode == 3)
            first = os.stat(output / JOBS[0]).st_ino
            if mode == 0:  # anywhere in the run
                time.sleep(randomness.uniform(0.3 * duration, 1.1 * duration))
            elif mode == 1:  # once it has started staging, a little later
                while process.poll() is None and not _leftovers(output):
                    time.sleep(0.0002)
                time.sleep(randomness.uniform(0, 0.02))
            else:  # once the first job directory was swapped, at once or between two swaps
                while process.poll() is None and os.stat(output / JOBS[0]).st_ino == first:
                    time.sleep(0.0002)
                window = SLOW_SWAP_MICROSECONDS * len(JOBS) / 1e6 if mode == 3 else 0.002
                time.sleep(randomness.uniform(0, window))
            _kill(process, traced=mode == 3)
            status, _ = _finish(process)
            after = _snapshot(output)
            assert sorted(after) == JOBS
            for name in JOBS:
                assert after[name] in (before[name], references[variant][name]), (kill, name)
            new = sum(after[name] == references[variant][name] != before[name] for name in JOBS)
            changing = sum(before[name] != references[variant][name] for name in JOBS)
            if status == 0:
                outcomes["finished"] += 1
            else:
                key = ("before any swap" if new == 0 else
                       "all swapped" if new == changing else "some jobs swapped")
                outcomes[key] += 1
            outcomes["left staging behind"] += bool(_leftovers(output))
        status, stderr = _finish(_build(repository))
        assert status == 0, stderr
        assert _snapshot(output) == references[variant]
        assert _leftovers(output) == []
    finally:
        reader.stop()
    assert reader.problems == []
    print(f"{KILLS} kills (seed {SEED}, build {duration:.2f}s): {outcomes}; "
          f"reader rounds {reader.rounds}, problems 0")
