"""Shared test helpers: the repository's paths, running the CLI, writing job files."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import stat
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tfcompile.compiler.checking.validation import kubeconform_schemas
from tfcompile.compiler.cli import main
from tfcompile.compiler.kubernetes_versions import (
    DEFAULT_KUBERNETES_VERSION,
    OLDEST_KUBERNETES_VERSION,
)
from tfcompile.compiler.rendering.kustomize import find_renderer, render

REPOSITORY = Path(__file__).resolve().parent.parent
EXAMPLES = REPOSITORY / "examples"
OUTPUT = REPOSITORY / "output"


def job_directories(output: Path) -> list[Path]:
    """The job directories of an output tree, sorted: its directories (the tree also holds
    tfcompile's README.md, and a killed build's `.tfcompile-*` leftovers are not jobs)."""
    return sorted(path for path in output.iterdir()
                  if path.is_dir() and not path.name.startswith("."))
OVERLAYS = REPOSITORY / "overlays"


@functools.cache
def rendered_output(example: str) -> str:
    """What kustomize renders for the committed `output/<example>`, run once a session: no test
    writes the committed output (only `--regenerate-golden` does, and it renders nothing)."""
    return render(OUTPUT / example)
KUBECONFORM_CACHE = REPOSITORY / ".cache" / "kubeconform-schemas"  # git-ignored


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regenerate-golden",
        action="store_true",
        help="rewrite output/ from examples/ instead of comparing (refused under CI)",
    )


@dataclass
class Result:
    status: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run `tfcompile ARGS` in this process and capture what it prints."""

    def run(*arguments: str) -> Result:
        capsys.readouterr()
        status = main(list(arguments))
        captured = capsys.readouterr()
        return Result(status, captured.out, captured.err)

    return run


TWO_WORKERS = "worker: {replicas: 2}"
"""The roles of a job when a test does not care about them."""


def job_text(name: str = "demo", *, metadata_lines: str = "",
             image: str = "tensorflow/tensorflow:2.16.1", script: str | None = None,
             command: str | None = "[python, /app/train.py]", spec_lines: str = "",
             roles: str = TWO_WORKERS) -> str:
    """The text of a job file: its header, then `spec_lines` and the `roles` (each given without
    indentation; dedented first). The keys stand in this order: metadata (name, then
    `metadata_lines`), then spec: image, script, command (left out when None), `spec_lines`,
    roles. A test that needs more keys after the roles appends them at two spaces."""

    def block(text: str, indentation: str) -> str:
        lines = textwrap.dedent(text).rstrip("\n")
        return textwrap.indent(lines, indentation) + "\n" if lines else ""

    return ("apiVersion: tfcompile.dev/v1alpha1\nkind: TrainingJob\n"
            f"metadata:\n  name: {name}\n{block(metadata_lines, '  ')}"
            f"spec:\n  image: {image}\n"
            + (f"  script: {script}\n" if script is not None else "")
            + (f"  command: {command}\n" if command is not None else "")
            + block(spec_lines, "  ") + "  roles:\n" + block(roles, "    "))


MINIMAL_JOB = job_text()


@pytest.fixture
def write_job(tmp_path: Path) -> Callable[..., Path]:
    """Write a job file (dedented) into a temporary directory and return its path."""

    def write(text: str, name: str = "job.yaml", directory: Path | None = None) -> Path:
        folder = directory or tmp_path / "jobs"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write


@pytest.fixture(autouse=True, scope="session")
def _records_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Builds in fixtures shared by many tests keep their up-to-date records in the session's
    temporary directory, never in the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TFCOMPILE_CACHE_DIR", str(tmp_path_factory.mktemp("session-records")))
        yield


@pytest.fixture(scope="session")
def _records_of_each_test(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory of its own for each test's records, under one of the session (tfcompile
    makes it when it writes a record): numbered by a counter, not by `mktemp`, which lists the
    session's whole temporary directory, one entry more for every test, to number each."""
    root = tmp_path_factory.mktemp("build-records")
    return (root / str(number) for number in itertools.count())


@pytest.fixture(autouse=True)
def _run_in_repository(monkeypatch: pytest.MonkeyPatch, _records_of_each_test: Iterator[Path]
                       ) -> None:
    """Relative paths in messages are relative to the working directory; pin it. Each test
    keeps its own records of up-to-date builds, so its first build of a tree is a full one."""
    monkeypatch.chdir(REPOSITORY)
    monkeypatch.delenv("TFCOMPILE_DEBUG", raising=False)
    monkeypatch.setenv("TFCOMPILE_CACHE_DIR", str(next(_records_of_each_test)))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in {"", "0", "false", "no"}


@pytest.fixture(scope="session")
def kubeconform() -> str:
    """The kubeconform on PATH (`scripts/setup.sh` installs it into the virtualenv)."""
    found = shutil.which("kubeconform")
    assert found is not None, "kubeconform is not on PATH: `source scripts/setup.sh` installs it"
    return found


@pytest.fixture(scope="session")
def kubeconform_schema_location() -> str:
    """kubeconform's `-schema-location` for the schemas `validate` uses, prepared once (kept
    between runs) for the oldest and the default Kubernetes version; nothing is downloaded."""
    root = kubeconform_schemas.prepare(
        KUBECONFORM_CACHE, [OLDEST_KUBERNETES_VERSION, DEFAULT_KUBERNETES_VERSION])
    return kubeconform_schemas.schema_location(root)


TIERS = ("slow", "end_to_end", "cluster", "gitops")
"""Markers of the tiers beyond the fast one; a test without any of them is in the fast tier."""
FAST_TIER_PROGRAMS = frozenset({"kubectl", "kustomize", "tfcompile-kustomize"})
"""The only programs a fast test may run: rendering is kustomize's, and tfcompile shells out."""


class _ProgramOutsideTheFastTier(AssertionError):
    """A fast test started a program other than kustomize."""


@contextlib.contextmanager
def _only_fast_tier_programs(item: pytest.Item) -> Iterator[None]:
    """Within `item`'s phase, when it is a fast test, refuse every program but kustomize."""
    if any(item.get_closest_marker(tier) for tier in TIERS):
        yield
        return
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], arguments: Any, *rest: Any, **options: Any) -> None:
        program = arguments if isinstance(arguments, str | bytes | os.PathLike) else arguments[0]
        name = os.path.basename(os.fsdecode(program)).split()[0]
        if name not in FAST_TIER_PROGRAMS:
            raise _ProgramOutsideTheFastTier(
                f"a fast test ran {name!r}: mark the test `slow` (or the tier it needs)")
        original(self, arguments, *rest, **options)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]


# The fast tier is what plain `pytest` runs in a minute: in process, no TensorFlow, no root, no
# cluster. A test without a tier marker that starts any program but kustomize fails, naming the
# program, so it cannot slip into the fast loop unnoticed: in its set-up (including fixtures of
# a module or the session it is the first to ask for) and its call. Not in its tear-down: the
# last test of a run tears down every session fixture, those of other tiers too.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _only_fast_tier_programs(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _only_fast_tier_programs(item):
        return (yield)


# The session's real node, for the tests that run pods (imported last: it builds on the above).
@pytest.fixture
def kustomize_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A log with a line for every Kustomize run, through a stand-in on PATH that runs the
    real one."""
    real = find_renderer().command[0]
    shims = tmp_path / "shims"
    shims.mkdir()
    log = tmp_path / "kustomize-runs.log"
    shim = shims / Path(real).name
    # Only renders count: another test's leftover thread may run kubectl for other work.
    shim.write_text(f'#!/bin/sh\ncase "$1" in kustomize|build) echo run >> "{log}";; esac\n'
                    f'exec "{real}" "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    log.write_text("")
    return log


from tests.node_fixture import real_node  # noqa: E402, F401
from tests.podman_fixture import podman_images  # noqa: E402, F401
