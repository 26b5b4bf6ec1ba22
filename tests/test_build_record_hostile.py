"""An up-to-date record that someone else wrote can only save work.

The record sits in the user's cache directory, which CI systems restore from other branches, so
whoever can write that cache may have crafted it. What the user sees, case by case:

- A record that is not exactly what tfcompile writes (nested 100,000 levels deep, `files` a
  list, a job named `../outside`, a wrong type anywhere, huge, not JSON, not UTF-8, a link, a
  directory, a FIFO, unreadable) is ignored: one line `tfcompile: note: ignored the up-to-date
  record <file>: <what it is not>; building without it`, then exactly what a build without a
  record does (the same status, the same other messages, the same tree), never an error or a
  traceback, never a wait; the build's own record then replaces it.
- A record that says a spec defines another job than it does deletes nothing: the spec is
  compiled, and what is pruned is decided from the specs.
- `build --check` never reads the record: a record that pairs a spec's new digest with stale
  output, or output that other code (a dependency edited in place) would compile differently,
  is reported stale all the same.
- A plain `build` trusts a record whose every digest matches (it only skips compiling): such a
  record can make it keep the output as it is, never write or delete anything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Result, job_text
from tests.test_output_links import snapshot
from tfcompile.compiler import build, build_record
from tfcompile.compiler.compile import CompiledJob
from tfcompile.compiler.record_format import (
    MAXIMUM_RECORD_BYTES,
    RecordIgnored,
    parse_record,
)

BUILD = ("build", "jobs", "-o", "output", "--overlays", "overlays")
TFCOMPILE = str(Path(sys.executable).with_name("tfcompile"))
NOBODY = 65534


def _repository(root: Path, names: tuple[str, ...]) -> Path:
    (root / ".git").mkdir(parents=True)
    for name in names:
        (root / "jobs" / name).mkdir(parents=True)
    (root / "overlays" / "debug").mkdir(parents=True)
    (root / "overlays" / "debug" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n")
    for name in names:
        text = (job_text(name, script="train.py", command=None,
                         spec_lines="overlays: [debug]") if name == names[0] else job_text(name))
        (root / "jobs" / name / "job.yaml").write_text(text)
    (root / "jobs" / names[0] / "train.py").write_text("print('training')\n")
    return root


@pytest.fixture
def repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               run_cli: Callable[..., Result]) -> Path:
    """Two jobs (the first with a script and an overlay), built once: the record is there."""
    root = _repository(tmp_path / "work" / "repository", ("alpha", "beta"))
    monkeypatch.chdir(root)
    assert run_cli(*BUILD).status == 0
    return root


def _record_file() -> Path:
    records = list(Path(os.environ["TFCOMPILE_CACHE_DIR"]).glob("*.json"))
    assert len(records) == 1, records
    return records[0]


def _restore(snapshot_directory: Path, target: Path) -> None:
    shutil.rmtree(target)
    shutil.copytree(snapshot_directory, target, symlinks=True)


def _with_and_without_record(repository: Path, tmp_path: Path, run_cli: Callable[..., Result],
                             monkeypatch: pytest.MonkeyPatch, *arguments: str,
                             then: Callable[[], None] = lambda: None) -> tuple[Result, Result]:
    """Run `arguments` on the tree as it is, with the record as it is (and `then`), then
    again from the same tree without a record; both results, the trees compared."""
    saved = tmp_path / "saved"
    shutil.copytree(repository.parent, saved, symlinks=True)
    with_record = run_cli(*arguments)
    then()
    tree_with_record = snapshot(repository.parent)
    _restore(saved, repository.parent)
    monkeypatch.chdir(repository)
    with monkeypatch.context() as without:
        without.setenv("TFCOMPILE_CACHE_DIR", "")
        without_record = run_cli(*arguments)
    assert {k: v[:2] + v[3:] for k, v in snapshot(repository.parent).items()} == {
        k: v[:2] + v[3:] for k, v in tree_with_record.items()}  # inodes aside
    assert "Traceback" not in with_record.stderr
    return with_record, without_record


def _set(record: dict[str, Any], path: tuple[str | int, ...], value: object) -> None:
    target: Any = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _writer(change: Callable[[dict[str, Any]], None]) -> Callable[[Path, dict[str, Any]], None]:
    def craft(path: Path, record: dict[str, Any]) -> None:
        change(record)
        path.write_text(json.dumps(record))
    return craft


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _nested(path: Path, record: dict[str, Any]) -> None:
    depth = 100_000
    path.write_text('{"format": 1, "jobs": ' + "[" * depth + "]" * depth + "}")


def _outside_job(path: Path, record: dict[str, Any]) -> None:
    _set(record, ("jobs", 1, "name"), "../outside")
    _set(record, ("specs", 1, "jobs"), ["../outside"])
    path.write_text(json.dumps(record))


def _huge(path: Path, record: dict[str, Any]) -> None:
    with path.open("r+b") as handle:
        handle.truncate(MAXIMUM_RECORD_BYTES + 1)


def _link(path: Path, record: dict[str, Any]) -> None:
    copy = path.parent.parent / "linked-record.json"
    copy.write_text(json.dumps(record))
    path.unlink()
    path.symlink_to(copy)


def _directory(path: Path, record: dict[str, Any]) -> None:
    path.unlink()
    path.mkdir()


@dataclass(frozen=True)
class Crafted:
    what: str
    craft: Callable[[Path, dict[str, Any]], None]
    reason: str
    """What the note says the record is not."""


NOT_WRITTEN_BY_TFCOMPILE = "it is not a record tfcompile writes"
MALFORMED = [
    Crafted("nested 100,000 levels deep", _nested, "it is nested too deeply"),
    Crafted("files a list", _writer(lambda record: _set(
        record, ("jobs", 0, "files"), sorted(record["jobs"][0]["files"]))),
        f"{NOT_WRITTEN_BY_TFCOMPILE} (jobs[0].files: not file names of a job directory mapped "
        "to SHA-256 digests, kustomization.yaml among them)"),
    Crafted("a job named ../outside", _outside_job,
            f"{NOT_WRITTEN_BY_TFCOMPILE} (specs[1].jobs: not a list of job names)"),
    Crafted("a file name leading out of its job directory", _writer(lambda record: _set(
        record, ("jobs", 0, "files", "../../outside.yaml"), "0" * 64)),
        f"{NOT_WRITTEN_BY_TFCOMPILE} (jobs[0].files: not file names of a job directory mapped "
        "to SHA-256 digests, kustomization.yaml among them)"),
    Crafted("the format a string", _writer(lambda record: _set(record, ("format",), "1")),
            f"{NOT_WRITTEN_BY_TFCOMPILE} (format: not an integer)"),
    Crafted("a digest a number", _writer(lambda record: _set(record, ("specs", 0, "digest"), 7)),
            f"{NOT_WRITTEN_BY_TFCOMPILE} (specs[0].digest: not a SHA-256 digest)"),
    Crafted("a job a list", _writer(lambda record: _set(record, ("jobs", 1), [])),
            f"{NOT_WRITTEN_BY_TFCOMPILE} (jobs[1]: not an object)"),
    Crafted("a field tfcompile does not write", _writer(lambda record: _set(
        record, ("specs", 0, "trusted"), True)),
        f"{NOT_WRITTEN_BY_TFCOMPILE} (specs[0]: not the fields tfcompile writes)"),
    Crafted("a spec claiming a job recorded from another", _writer(lambda record: _set(
        record, ("specs", 0, "jobs"), ["alpha", "beta"])),
        f"{NOT_WRITTEN_BY_TFCOMPILE} (a spec's jobs are not the jobs recorded from it)"),
    Crafted("a list, not a record", lambda path, record: _write(path, b"[]"),
            f"{NOT_WRITTEN_BY_TFCOMPILE} (not an object)"),
    Crafted("huge", _huge, "it is larger than 64 MiB"),
    Crafted("not JSON", lambda path, record: _write(path, b'{"format": 1, "jobs": ['),
            "it is not JSON"),
    Crafted("not UTF-8", lambda path, record: _write(
        path, json.dumps(record).encode("utf-8").replace(b'"format"', b'"form\xe4t"')),
        "it is not UTF-8"),
    Crafted("a link", _link, "it is a symbolic link"),
    Crafted("a directory", _directory, "it is not a regular file"),
]


@pytest.mark.parametrize("crafted", MALFORMED, ids=[crafted.what for crafted in MALFORMED])
def test_a_malformed_record_is_one_note_then_a_build_as_without_a_record(
    repository: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path, crafted: Crafted,
) -> None:
    outside = repository / "outside"  # what `output/../outside` would name
    shutil.copytree(repository / "output" / "beta", outside)
    path = _record_file()
    crafted.craft(path, json.loads(path.read_text()))
    before = snapshot(outside)
    job = repository / "jobs" / "beta" / "job.yaml"  # something to build
    job.write_text(job.read_text().replace("replicas: 2", "replicas: 3"))

    def outside_as_it_was() -> None:
        assert snapshot(outside) == before

    with_record, without_record = _with_and_without_record(
        repository, tmp_path, run_cli, monkeypatch, *BUILD, then=outside_as_it_was)
    note = (f"tfcompile: note: ignored the up-to-date record {path}: {crafted.reason}; "
            "building without it")
    assert with_record.stderr.splitlines() == [note, *without_record.stderr.splitlines()]
    assert (with_record.status, with_record.stdout) == (without_record.status,
                                                         without_record.stdout)
    assert with_record.status == 0
    if crafted.what != "a directory":  # the build's own record replaced it
        again = run_cli(*BUILD)
        assert again.stderr == "tfcompile: built 2 job(s) into output (0 file(s) changed)\n"


def _build_process(repository: Path, user: int | None = None
                   ) -> subprocess.CompletedProcess[str]:
    prefix = [] if user is None else ["setpriv", f"--reuid={user}", f"--regid={user}",
                                      "--clear-groups"]
    return subprocess.run([*prefix, TFCOMPILE, *BUILD], cwd=repository, capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_a_fifo_for_a_record_is_one_note_and_no_wait(repository: Path) -> None:
    path = _record_file()
    path.unlink()
    os.mkfifo(path)
    result = _build_process(repository)  # a build that opened it to read would wait forever
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"tfcompile: note: ignored the up-to-date record {path}: it is not a regular file; "
        "building without it",
        "tfcompile: built 2 job(s) into output (0 file(s) changed)"]


@pytest.fixture
def shared_directory() -> Iterator[Path]:
    """A temporary directory other users can enter (pytest's own are private)."""
    root = Path(tempfile.mkdtemp(prefix="tfcompile-record-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root)


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                    reason="building as another user needs root")
def test_an_unreadable_record_is_one_note(shared_directory: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    repository = _repository(shared_directory / "repository", ("alpha", "beta"))
    records = shared_directory / "records"
    monkeypatch.setenv("TFCOMPILE_CACHE_DIR", str(records))
    assert _build_process(repository).returncode == 0
    for path in [shared_directory / "repository", *repository.rglob("*"), records]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    path = _record_file()
    path.chmod(0o600)  # root's, private: the build runs as nobody
    result = _build_process(repository, user=NOBODY)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"tfcompile: note: ignored the up-to-date record {path}: it cannot be read "
        "(Permission denied); building without it",
        "tfcompile: built 2 job(s) into output (0 file(s) changed)"]


def _mutations(value: Any, path: tuple[str | int, ...] = ()
               ) -> Iterator[tuple[tuple[str | int, ...], object]]:
    """Every node of a record with a value of another JSON type in its place, every object
    with a field removed (a file of `files` aside, which is no field) and one added."""
    allowed = (type(None), str) if path[-1:] in (("script",), ("scriptDigest",)) else ()
    others: tuple[object, ...] = (None, 0, True, 1.5, "text", [], {})
    for other in others:
        if type(other) is not type(value) and not isinstance(other, allowed):
            yield path, other
    if isinstance(value, dict):
        for key in value:
            if path[-1:] != ("files",):
                yield path, {k: v for k, v in value.items() if k != key}
            yield from _mutations(value[key], (*path, key))
        yield path, {**value, "extra": 1}
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _mutations(item, (*path, index))


def test_a_wrong_type_anywhere_is_ignored_never_an_error(repository: Path) -> None:
    written = json.loads(_record_file().read_text())
    assert parse_record(json.dumps(written).encode()) == written
    count = 0
    for path, value in _mutations(written):
        crafted = json.loads(json.dumps(written))
        if path:
            _set(crafted, path, value)
        else:
            crafted = value
        with pytest.raises(RecordIgnored):
            parse_record(json.dumps(crafted).encode())
        count += 1
    assert count > 300
    for depth in (1_000, 100_000):  # nested anywhere
        with pytest.raises(RecordIgnored, match=r"nested too deeply|not a record"):
            parse_record(json.dumps(written).replace(
                '"jobs": [', '"jobs": [' + "[" * depth + "]" * depth + ", ", 1).encode())


# Records of the right form that lie.


@pytest.fixture
def two_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             run_cli: Callable[..., Result]) -> Path:
    root = _repository(tmp_path / "work" / "repository", ("j1", "j2"))
    monkeypatch.chdir(root)
    assert run_cli(*BUILD).status == 0
    return root


def _rewrite(change: Callable[[dict[str, Any]], None]) -> None:
    path = _record_file()
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def _job_named(record: dict[str, Any], name: str) -> dict[str, Any]:
    job: dict[str, Any] = next(job for job in record["jobs"] if job["name"] == name)
    return job


def test_a_record_saying_a_spec_defines_another_job_deletes_nothing(
    two_jobs: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The record says jobs/j1/job.yaml defines j1x, and output/j1x is there to match: the
    build compiles j1 (output/j1 names that spec, and the record does not list it), keeps
    output/j1 and prunes output/j1x, whose spec does not define it, as without a record."""
    shutil.copytree(two_jobs / "output" / "j1", two_jobs / "output" / "j1x")

    def lie(record: dict[str, Any]) -> None:
        _job_named(record, "j1")["name"] = "j1x"
        next(spec for spec in record["specs"] if spec["jobs"] == ["j1"])["jobs"] = ["j1x"]

    _rewrite(lie)
    with_record, without_record = _with_and_without_record(
        two_jobs, tmp_path, run_cli, monkeypatch, *BUILD)
    assert with_record == without_record
    assert with_record.status == 0
    assert ("tfcompile: pruned output/j1x (its source jobs/j1/job.yaml no longer defines job "
            "j1x)") in with_record.stderr.splitlines()
    assert (two_jobs / "output" / "j1" / "kustomization.yaml").is_file()


def test_a_record_adding_a_job_to_a_spec_keeps_the_output_and_check_sees_it(
    two_jobs: Path, run_cli: Callable[..., Result],
) -> None:
    """The record says jobs/j1/job.yaml defines j1 and j1x, output/j1x is there to match: a
    plain build keeps the tree as it is (it deletes and writes nothing); `build --check` says
    j1x is to be pruned."""
    shutil.copytree(two_jobs / "output" / "j1", two_jobs / "output" / "j1x")

    def lie(record: dict[str, Any]) -> None:
        record["jobs"].append({**_job_named(record, "j1"), "name": "j1x"})
        next(spec for spec in record["specs"] if spec["jobs"] == ["j1"])["jobs"] = ["j1",
                                                                                    "j1x"]

    _rewrite(lie)
    before = snapshot(two_jobs)
    result = run_cli(*BUILD)
    assert (result.status, result.stderr) == (
        0, "tfcompile: built 3 job(s) into output (0 file(s) changed)\n")
    assert snapshot(two_jobs) == before
    check = run_cli(*BUILD, "--check")
    assert check.status == 1
    assert ("tfcompile: would prune output/j1x (its source jobs/j1/job.yaml no longer defines "
            "job j1x)") in check.stderr.splitlines()


def test_a_record_pairing_a_new_spec_with_stale_output_does_not_pass_check(
    two_jobs: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """j2's spec is edited and the record rewritten with its new digest over the old output:
    `build --check` compiles and says stale, with the diff, exactly as without a record (a
    plain build would trust the record and keep the output: the check is CI's gate)."""
    spec = two_jobs / "jobs" / "j2" / "job.yaml"
    spec.write_text(spec.read_text().replace("replicas: 2", "replicas: 3"))
    digest = hashlib.sha256(spec.read_bytes()).hexdigest()

    def lie(record: dict[str, Any]) -> None:
        next(item for item in record["specs"] if item["jobs"] == ["j2"])["digest"] = digest

    _rewrite(lie)
    with_record, without_record = _with_and_without_record(
        two_jobs, tmp_path, run_cli, monkeypatch, *BUILD, "--check")
    assert with_record == without_record
    assert with_record.status == 1
    assert "+  replicas: 3\n" in with_record.stdout
    assert "tfcompile: output is stale" in with_record.stderr


def test_output_that_other_code_compiles_differently_does_not_pass_check(
    two_jobs: Path, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As with a dependency edited in place (same name, same version): the record's digest of
    the environment still matches, but compiling now gives other output. `build --check`
    compiles, so it says stale."""
    monkeypatch.setattr(build_record, "environment_digest", lambda: "e" * 64)
    assert run_cli(*BUILD).status == 0  # the record, with that environment
    compile_job = build.compile_job  # type: ignore[attr-defined]

    def edited(*arguments: Any) -> CompiledJob:
        compiled = compile_job(*arguments)
        return CompiledJob(compiled.name, compiled.objects, {
            name: text.replace("replicas: 2", "replicas: 5")
            for name, text in compiled.files.items()})

    monkeypatch.setattr(build, "compile_job", edited)
    check = run_cli(*BUILD, "--check")
    assert check.status == 1
    assert "+  replicas: 5\n" in check.stdout
