"""The up-to-date record (`build_record.py`): what makes a rebuild of an unchanged tree fast.

A build whose every input and output file is as recorded loads no spec (neither pydantic nor a
YAML parser) and says what a full build says. Anything else is built as without a record (only
spec files that are unchanged, with their scripts, overlays and output, are taken from the
output tree instead of being compiled again) and must behave exactly the same: each case below
runs once with the record and once without, from the same tree, and compares status, messages
and the resulting tree. `build --check` never reads the record (only compiling shows that the
output is current); records that someone else wrote are in test_build_record_hostile.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.conftest import Result, job_text
from tfcompile.compiler.output import build_record
from tfcompile.compiler.output import compilation as build
from tfcompile.compiler.output.location import OutputLocation

JOB_A = job_text("alpha", script="train.py", command=None, spec_lines="overlays: [debug]")
JOB_B = job_text("beta", roles="chief: {replicas: 1}\nworker: {replicas: 2}")

BUILD = ["build", "jobs", "-o", "output", "--overlays", "overlays"]


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with two jobs (one with a script and an overlay), built once."""
    root = tmp_path / "work" / "repository"  # what a change makes outside it stays in work/
    (root / ".git").mkdir(parents=True)
    (root / "jobs" / "alpha").mkdir(parents=True)
    (root / "jobs" / "beta").mkdir(parents=True)
    (root / "jobs" / "alpha" / "job.yaml").write_text(JOB_A)
    (root / "jobs" / "alpha" / "train.py").write_text("print('training')\n")
    (root / "jobs" / "beta" / "job.yaml").write_text(JOB_B)
    (root / "overlays" / "debug").mkdir(parents=True)
    (root / "overlays" / "debug" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def full_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The builds that loaded specs: for each, how many spec files it took from the record."""
    calls: list[int] = []
    compile_inputs = build.compile_inputs

    def counted(settings: build.BuildSettings,
                reusable: Mapping[Path, build_record.Reusable] | None = None,
                output: str | None = None,
                recorded: Mapping[str, Path] | None = None) -> build.Compilation:
        calls.append(len(reusable or {}))
        return compile_inputs(settings, reusable, output, recorded)

    monkeypatch.setattr(build, "compile_inputs", counted)
    return calls


@pytest.fixture
def fast_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the builds the record found up to date."""
    found: list[int] = []
    up_to_date = build_record.up_to_date

    def counted(settings: build.BuildSettings,
                reusable: Mapping[Path, build_record.Reusable],
                location: OutputLocation) -> int | None:
        current = up_to_date(settings, reusable, location)
        if current is not None:
            found.append(current)
        return current

    monkeypatch.setattr(build_record, "up_to_date", counted)
    return found


def _tree(root: Path) -> dict[str, object]:
    """Every entry under `root`: links by target, files by bytes."""
    found: dict[str, object] = {}
    for directory, directories, files in os.walk(root):
        for name in [*directories, *files]:
            path = Path(directory) / name
            relative = str(path.relative_to(root))
            if path.is_symlink():
                found[relative] = ("link", os.readlink(path))
            elif path.is_dir():
                found[relative] = "directory"
            else:
                found[relative] = path.read_bytes()
    return found


def _restore(snapshot: Path, target: Path) -> None:
    shutil.rmtree(target)
    shutil.copytree(snapshot, target, symlinks=True)


@pytest.mark.slow
def test_an_up_to_date_build_loads_neither_the_spec_models_nor_a_yaml_parser(
    repository: Path,
) -> None:
    def run(*extra: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
        completed = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "tfcompile.compiler.cli", *BUILD, *extra],
            cwd=repository, capture_output=True, text=True, check=False, timeout=120)
        modules = set(re.findall(r"^import time:\s*\d+ \|\s*\d+ \|\s*(\S+)",
                                 completed.stderr, re.M))
        return completed, modules

    first, modules = run()
    assert first.returncode == 0, first.stderr
    assert {"pydantic", "ruamel.yaml", "tfcompile.compiler.output.compilation"} <= modules
    before = _tree(repository / "output")
    for extra, said, light in [
            ((), "tfcompile: built 2 job(s) into output (0 file(s) changed)", True),
            (("--check",), "tfcompile: output is up to date", False)]:
        again, modules = run(*extra)
        assert again.returncode == 0
        assert said in again.stderr.splitlines()
        assert "tfcompile.compiler.output.build_record" in modules  # the import list was read
        loaded = sorted(module for module in modules
                        if module.split(".")[0] in {"pydantic", "pydantic_core", "ruamel"}
                        or module in {"tfcompile.spec.loading", "tfcompile.spec.models",
                                      "tfcompile.compiler.output.compilation",
                                      "tfcompile.compiler.objects.compile"})
        if light:
            assert loaded == []
        else:  # --check compiles every spec, whatever the record says
            assert {"pydantic", "tfcompile.spec.models",
                    "tfcompile.compiler.objects.compile"} <= set(loaded)
    assert _tree(repository / "output") == before


@pytest.mark.parametrize("check", [False, True], ids=["build", "build --check"])
def test_an_unchanged_tree_says_what_a_full_build_says(
    repository: Path, run_cli: Callable[..., Result], full_builds: list[int],
    fast_builds: list[int],
    monkeypatch: pytest.MonkeyPatch, check: bool,
) -> None:
    arguments = [*BUILD, "--check"] if check else BUILD
    assert run_cli(*BUILD).status == 0
    with monkeypatch.context() as without_record:
        without_record.setenv("TFCOMPILE_CACHE_DIR", "")
        full = run_cli(*arguments)
    assert len(full_builds) == 2
    fast = run_cli(*arguments)
    if check:  # the record is not read: every spec is compiled
        assert full_builds == [0, 0, 0]
        assert fast_builds == []
    else:
        assert len(full_builds) == 2  # no spec was loaded
        assert fast_builds == [2]
    assert fast == full
    assert full.status == 0


def _first_resource(root: Path, job: str) -> Path:
    return sorted(p for p in (root / "output" / job).iterdir()
                  if p.name != "kustomization.yaml")[0]


def _edit_spec(root: Path) -> None:
    path = root / "jobs" / "beta" / "job.yaml"
    path.write_text(path.read_text().replace("worker: {replicas: 2}", "worker: {replicas: 3}"))


def _edit_spec_keeping_its_size_and_time(root: Path) -> None:
    path = root / "jobs" / "beta" / "job.yaml"
    status = path.stat()
    path.write_text(path.read_text().replace("replicas: 2", "replicas: 4"))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def _edit_script(root: Path) -> None:
    (root / "jobs" / "alpha" / "train.py").write_text("print('training harder')\n")


def _script_becomes_a_link_out_of_the_repository(root: Path) -> None:
    outside = root.parent / "outside.py"
    outside.write_text("print('training')\n")
    script = root / "jobs" / "alpha" / "train.py"
    script.unlink()
    script.symlink_to(outside)


def _add_spec(root: Path) -> None:
    (root / "jobs" / "gamma").mkdir()
    (root / "jobs" / "gamma" / "job.yaml").write_text(JOB_B.replace("beta", "gamma"))


def _add_spec_with_a_taken_name(root: Path) -> None:
    (root / "jobs" / "gamma").mkdir()
    (root / "jobs" / "gamma" / "job.yaml").write_text(JOB_B)


def _remove_spec(root: Path) -> None:
    (root / "jobs" / "beta" / "job.yaml").unlink()


def _remove_overlay(root: Path) -> None:
    shutil.rmtree(root / "overlays" / "debug")


def _hand_edit_output(root: Path) -> None:
    path = _first_resource(root, "beta")
    path.write_text(path.read_text() + "# edited\n")


def _hand_edit_output_keeping_its_size_and_time(root: Path) -> None:
    path = _first_resource(root, "beta")
    status = path.stat()
    text = path.read_text()
    path.write_text(text.replace("beta", "BETA", 1))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def _remove_output_file(root: Path) -> None:
    _first_resource(root, "beta").unlink()


def _add_foreign_file_to_a_job(root: Path) -> None:
    (root / "output" / "beta" / "notes.txt").write_text("mine\n")


def _output_file_becomes_a_link(root: Path) -> None:
    path = _first_resource(root, "beta")
    copy = root.parent / "copy.yaml"
    copy.write_text(path.read_text())
    path.unlink()
    path.symlink_to(copy)


def _job_directory_becomes_a_link(root: Path) -> None:
    directory = root / "output" / "beta"
    moved = root.parent / "beta-elsewhere"
    directory.rename(moved)
    directory.symlink_to(moved)


def _output_directory_becomes_a_link(root: Path) -> None:
    output = root / "output"
    moved = root / "output-elsewhere"
    output.rename(moved)
    output.symlink_to(moved)


def _add_foreign_directory_to_the_output(root: Path) -> None:
    (root / "output" / "other").mkdir()
    (root / "output" / "other" / "kustomization.yaml").write_text("resources: []\n")


def _add_pruneable_job_directory(root: Path) -> None:
    shutil.copytree(root / "output" / "beta", root / "output" / "delta")


def _leave_a_killed_builds_leftover(root: Path) -> None:
    leftover = root / "output" / ".tfcompile-new-99999-beta"
    leftover.mkdir()
    (leftover / "kustomization.yaml").write_text("half\n")


def _remove_job_directory(root: Path) -> None:
    shutil.rmtree(root / "output" / "alpha")


CHANGES = [_edit_spec, _edit_spec_keeping_its_size_and_time, _edit_script,
           _script_becomes_a_link_out_of_the_repository, _add_spec, _add_spec_with_a_taken_name,
           _remove_spec, _remove_overlay, _hand_edit_output,
           _hand_edit_output_keeping_its_size_and_time, _remove_output_file,
           _add_foreign_file_to_a_job, _output_file_becomes_a_link,
           _job_directory_becomes_a_link, _output_directory_becomes_a_link,
           _add_foreign_directory_to_the_output, _add_pruneable_job_directory,
           _leave_a_killed_builds_leftover, _remove_job_directory]


@pytest.mark.parametrize("change", CHANGES, ids=[change.__name__[1:] for change in CHANGES])
def test_any_change_is_built_exactly_as_without_a_record(
    repository: Path, run_cli: Callable[..., Result], fast_builds: list[int],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[[Path], None],
) -> None:
    assert run_cli(*BUILD).status == 0
    records = Path(os.environ["TFCOMPILE_CACHE_DIR"])
    assert list(records.iterdir())
    change(repository)
    snapshot = tmp_path / "snapshot"
    shutil.copytree(repository.parent, snapshot, symlinks=True)
    recorded = tmp_path / "records"
    shutil.copytree(records, recorded)
    for arguments in ([*BUILD, "--check"], BUILD):
        _restore(recorded, records)
        _restore(snapshot, repository.parent)
        monkeypatch.chdir(repository)
        with_record = run_cli(*arguments)
        assert fast_builds == [], "the record was trusted"
        tree_with_record = _tree(repository.parent)
        _restore(snapshot, repository.parent)
        monkeypatch.chdir(repository)
        with monkeypatch.context() as without_record:
            without_record.setenv("TFCOMPILE_CACHE_DIR", "")
            without = run_cli(*arguments)
        assert with_record == without
        assert tree_with_record == _tree(repository.parent)


@pytest.mark.parametrize("check", [False, True], ids=["build", "build --check"])
def test_with_one_spec_edited_only_that_one_is_loaded(
    repository: Path, run_cli: Callable[..., Result], full_builds: list[int],
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, check: bool,
) -> None:
    arguments = [*BUILD, "--check"] if check else BUILD
    assert run_cli(*BUILD).status == 0
    _edit_spec(repository)
    snapshot = tmp_path / "snapshot"
    shutil.copytree(repository.parent, snapshot, symlinks=True)
    with_record = run_cli(*arguments)
    # alpha's spec came from the record, beta's was loaded; --check reads no record
    assert full_builds == ([0, 0] if check else [0, 1])
    tree_with_record = _tree(repository.parent)
    _restore(snapshot, repository.parent)
    monkeypatch.chdir(repository)
    monkeypatch.setenv("TFCOMPILE_CACHE_DIR", "")
    assert run_cli(*arguments) == with_record
    assert _tree(repository.parent) == tree_with_record
    assert with_record.status == (1 if check else 0)


@pytest.mark.parametrize("what", ["tfcompile code", "python"])
def test_other_tfcompile_code_or_python_is_a_full_build(
    repository: Path, run_cli: Callable[..., Result], full_builds: list[int],
    monkeypatch: pytest.MonkeyPatch, what: str,
) -> None:
    assert run_cli(*BUILD).status == 0
    assert run_cli(*BUILD).status == 0
    assert len(full_builds) == 1
    if what == "python":
        monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    else:
        monkeypatch.setattr(build_record, "code_digest", lambda directories: "0" * 64)
    result = run_cli(*BUILD)
    assert full_builds == [0, 0]  # nothing taken from the record
    assert result.status == 0
    assert "(0 file(s) changed)" in result.stderr


@pytest.fixture
def package_copy(tmp_path: Path) -> Iterator[Path]:
    copy = tmp_path / "package"
    shutil.copytree(Path(build_record.__file__).resolve().parent.parent, copy)
    yield copy


def test_the_code_digest_covers_every_file_of_the_package(package_copy: Path) -> None:
    before = build_record.code_digest([package_copy])
    (package_copy / "__pycache__").mkdir(exist_ok=True)
    (package_copy / "__pycache__" / "cache.pyc").write_bytes(b"compiled")
    assert build_record.code_digest([package_copy]) == before  # caches are not code
    module = package_copy / "yaml_output.py"
    module.write_text(module.read_text() + "\n")
    edited = build_record.code_digest([package_copy])
    assert edited != before
    (package_copy / "objects" / "builders" / "new_builder.py").write_text('"""New."""\n')
    assert build_record.code_digest([package_copy]) not in {before, edited}


def test_records_turned_off_are_neither_read_nor_written(
    repository: Path, run_cli: Callable[..., Result], full_builds: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TFCOMPILE_CACHE_DIR", "")
    digests: list[Sequence[Path]] = []  # the code and distributions are not even looked at

    def code_digest(directories: Sequence[Path]) -> str:
        digests.append(directories)
        return "0" * 64

    monkeypatch.setattr(build_record, "code_digest", code_digest)
    assert run_cli(*BUILD).status == 0
    assert run_cli(*BUILD).status == 0
    assert full_builds == [0, 0]
    assert digests == []
