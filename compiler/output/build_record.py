"""The record of a build whose output is current, so that the next build can say so at once.

`tfcompile build` runs in every pre-commit hook, and most commits change no job. After a build
(or a `--check`) that leaves the output equal to what the specs compile to, this record keeps a
SHA-256 of everything that determines that output, and of the output itself: the bytes of every
spec file and script file compiled and where each resolves, the overlays each job names, the
tfcompile code (every file of its two packages), the Python and the installed distributions
(their names and versions), and every output file. The next build with the same arguments from
the same working directory computes all of it again, without importing pydantic or
ruamel.yaml, and when everything matches, and the output tree holds exactly the recorded
files (regular files in real directories, nothing else, no leftover of a killed build), it
reports the tree current without loading a spec. Anything else (an edited, added or removed
spec, script or output file, a link, a foreign file, other tfcompile code, another Python)
goes through the full build, which behaves as it always did.

The record lives outside the output tree, in the user's cache directory (`TFCOMPILE_CACHE_DIR`
when set; set empty, no record is kept): committed output stays exactly what the compiler
writes, and a fresh clone (CI) builds in full. A record that cannot be read or written is
ignored, and one that is out of date only costs the look. A record is input from anyone (CI
caches are restored from other branches), so it can only save work: `record_format` reads
nothing but a regular file of exactly the record's shape (anything else is one note), a spec a
job directory names but the record does not list is compiled, what is pruned is decided from
the specs, and `build --check` does not read a record at all.

Why it is kept (about 470 lines, and the tests that hold it to "only saves work"): measured
with `scripts/benchmark.py --rounds 5 --only "no change"` on a two-core machine under load, a
build of 100 unchanged jobs takes 179 ms of CPU with the record and 1,348 ms without (7.5 times);
a build of 100 jobs of which one changed (the common pre-commit) took 0.45 s of CPU with it
and 0.95 s without. A hook that runs on every commit is worth the second it saves there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompile.compiler.output.errors import OutputEnvironmentError, OutputRefused
from tfcompile.compiler.output.location import OutputLocation
from tfcompile.compiler.output.ownership import recorded_spec
from tfcompile.spec import discovery
from tfcompile.spec.discovery import discover
from tfcompile.spec.scripts import read_script
from tfcompile.spec.shipped_script import Script
from tfcompile.spec.shown_paths import display_path

from .directory_handles import Directory
from .generated_mark import KUSTOMIZATION_FILE, recorded_source
from .record_format import RECORD_FORMAT, RecordIgnored, parse_record, read_record_file
from .text_spool import TextSpool
from .tree_readme import README_FILE, README_TEXT

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
MAXIMUM_SPEC_BYTES = 4 * 1024 * 1024
"""Larger specs are not digested here (the loader refuses them anyway)."""


@dataclass(frozen=True)
class BuildSettings:
    inputs: Sequence[Path]
    output: Path
    overlays: Path


@dataclass(frozen=True)
class SpecInput:
    """A spec file compiled: its path as found, the SHA-256 of its bytes, the jobs it defines."""

    path: Path
    digest: str
    jobs: tuple[str, ...]


@dataclass(frozen=True)
class JobInput:
    """What else a job's output depends on: its script as written and read, its overlays."""

    name: str
    source: Path
    script: str | None
    script_digest: str | None
    overlays: tuple[str, ...]


def available_overlays(overlays: Path) -> list[str]:
    """Directories under `overlays` that hold a kustomization."""
    if not overlays.is_dir():
        return []
    return sorted(
        entry.name
        for entry in overlays.iterdir()
        if entry.is_dir() and any((entry / name).is_file() for name in KUSTOMIZATION_NAMES)
    )


def script_digest(script: Script | None) -> str | None:
    """A SHA-256 of every file a script ships: keys, paths under the mount and text."""
    if script is None:
        return None
    listed = [script.directory, [[file.key, file.path, file.text] for file in script.files]]
    return _digest(json.dumps(listed).encode("utf-8"))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _package_files(directory: str, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(path relative to the package, path) of every file under `directory`, in the order of a
    sorted `os.walk` (a folder's files, then each folder in turn; `__pycache__` and links to
    folders left out), read from one `scandir` a folder: every build lists them."""
    try:
        with os.scandir(directory) as listing:
            found = sorted(listing, key=lambda entry: entry.name)
    except OSError:
        return
    folders = []
    for entry in found:
        try:
            folder = entry.is_dir()
        except OSError:
            folder = False
        if not folder:
            yield prefix + entry.name, entry.path
        elif entry.name != "__pycache__" and not entry.is_symlink():
            folders.append(entry)
    for entry in folders:
        yield from _package_files(entry.path, f"{prefix}{entry.name}/")


def code_digest(directories: Sequence[Path]) -> str:
    """A SHA-256 of every file under `directories` (compiled caches left out)."""
    digest = hashlib.sha256()
    for directory in directories:
        for relative, path in _package_files(os.fspath(directory)):
            with open(path, "rb", buffering=0) as handle:
                data = handle.readall()
            digest.update(f"{relative}\0{len(data)}\0".encode())
            digest.update(data)
    return digest.hexdigest()


def environment_digest() -> str:
    """What tfcompile runs with: its own code, the Python, and the name and version of every
    distribution installed where it imports from (pydantic, ruamel.yaml, kubernetes-validate's
    schemas, ...)."""
    # Every file of both packages: this module sits in tfcompile.compiler.output.
    packages = [Path(__file__).resolve().parent.parent,
                Path(discovery.__file__).resolve().parent]
    installed = []
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        distributions = sorted(n for n in names if n.endswith((".dist-info", ".egg-info")))
        if distributions:  # not the script's own directory, which `python -m` replaces
            installed.append([entry, distributions])
    described = json.dumps([sys.version, sys.executable, code_digest(packages), installed])
    return _digest(described.encode("utf-8"))


def cache_directory() -> Path | None:
    """Where records are kept; None when keeping them is turned off."""
    configured = os.environ.get("TFCOMPILE_CACHE_DIR")
    if configured is not None:
        return Path(configured) if configured else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tfcompile" / "builds"


def _arguments(settings: BuildSettings) -> list[object]:
    return [os.getcwd(), [str(path) for path in settings.inputs], str(settings.output),
            str(settings.overlays)]


def _record_path(settings: BuildSettings) -> Path | None:
    directory = cache_directory()
    if directory is None:
        return None
    key = _digest(json.dumps(_arguments(settings)).encode("utf-8"))
    return directory / f"{key[:32]}.json"


def save(settings: BuildSettings, environment: str, specs: Sequence[SpecInput],
         jobs: Sequence[JobInput], outputs: Mapping[str, Mapping[str, str]],
         location: OutputLocation) -> None:
    """Record a build whose output tree now holds `outputs` (job -> file name -> text), all of
    it compiled from `specs` and `jobs` as read; call under the tree's lock."""
    path = _record_path(settings)
    if path is None or not jobs:
        return
    record = {
        "format": RECORD_FORMAT,
        "arguments": _arguments(settings),
        "environment": environment,
        "output": location.real,
        "overlays": os.path.realpath(settings.overlays),
        "specs": [{"path": str(spec.path), "resolved": os.path.realpath(spec.path),
                   "digest": spec.digest, "jobs": list(spec.jobs)} for spec in specs],
        "jobs": [{"name": job.name, "source": str(job.source), "script": job.script,
                  "scriptDigest": job.script_digest, "overlays": list(job.overlays),
                  "files": {name: _digest(text.encode("utf-8"))
                            for name, text in sorted(outputs[job.name].items())}}
                 for job in jobs],
    }
    # A new file of its own (as `tempfile` would make it, without importing it), then renamed.
    temporary = path.parent / f".record-{os.getpid()}-{os.urandom(8).hex()}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(temporary, path)
    except OSError:  # the record only saves time: a build never fails for want of it
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def read_record(settings: BuildSettings, environment: str
                ) -> tuple[dict[str, Any] | None, str | None]:
    """The record of the last build with these settings, when there is one that this
    tfcompile wrote for this environment; else None, with a note when a record was there but
    is not one tfcompile reads (saying what it is not, never what it holds)."""
    path = _record_path(settings)
    if path is None:
        return None, None
    try:
        data = read_record_file(path)
        record = parse_record(data) if data is not None else None
    except RecordIgnored as ignored:
        return None, f"ignored the up-to-date record {path}: {ignored.reason}"
    if (record is None or record["arguments"] != _arguments(settings)
            or record["environment"] != environment):
        return None, None
    return record, None


def _spec_digest(path: Path) -> str | None:
    """The SHA-256 of a spec file's bytes, read as the loader reads it; None when it is no
    regular file, too large or unreadable."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        data = handle.read(MAXIMUM_SPEC_BYTES + 1)
    return _digest(data) if len(data) <= MAXIMUM_SPEC_BYTES else None


def _script_matches(job: dict[str, Any]) -> bool:
    written = job["script"]
    if written is None:
        return job["scriptDigest"] is None
    source = Path(str(job["source"]))
    script, problems = read_script(str(written), source, display_path(source))
    return not problems and script is not None and script_digest(script) == job["scriptDigest"]


def _named_spec(directory: Directory, text: str | None) -> str | None:
    """The spec (resolved) a job directory's kustomization names as its source, if any."""
    source = recorded_source(text.split("\n", 1)[0]) if text is not None else None
    return os.path.realpath(recorded_spec(directory.real, source)) if source else None


def _job_output(output: Directory, job: dict[str, Any], resolved_spec: str
                ) -> dict[str, str] | None:
    """The texts of a job's output directory when it holds exactly the recorded files, regular
    files with the recorded digests, and its kustomization names the recorded spec."""
    files: dict[str, str] = job["files"]
    directory = output.open(job["name"])
    if directory is None:
        return None
    with directory:
        present = directory.entries()
        if set(present) != set(files) or not all(stat.S_ISREG(status.st_mode)
                                                 for status in present.values()):
            return None
        texts = {}
        for name, digest in files.items():
            text = directory.read(name)
            if text is None or _digest(text.encode("utf-8")) != digest:
                return None
            texts[name] = text
        if _named_spec(directory, texts[KUSTOMIZATION_FILE]) != resolved_spec:
            return None
    return texts


@dataclass(frozen=True)
class Reusable:
    """A spec file whose bytes, script, overlays and output are as recorded: what compiling it
    again would give is already in the output tree."""

    spec: SpecInput
    jobs: tuple[JobInput, ...]
    outputs: dict[str, Mapping[str, str]]
    """Job name -> file name -> text, as read from the output tree (kept in a spool)."""


def _reusable_spec(output: Directory, spec: dict[str, Any], jobs: list[dict[str, Any]],
                   available: set[str], spool: TextSpool) -> Reusable | None:
    path = Path(spec["path"])
    if os.path.realpath(path) != spec["resolved"] or _spec_digest(path) != spec["digest"]:
        return None
    outputs: dict[str, Mapping[str, str]] = {}
    for job in jobs:
        if not set(job["overlays"]) <= available or not _script_matches(job):
            return None
        texts = _job_output(output, job, spec["resolved"])
        if texts is None:
            return None
        outputs[str(job["name"])] = spool.keep(texts)
    return Reusable(
        SpecInput(path, str(spec["digest"]), tuple(spec["jobs"])),
        tuple(JobInput(job["name"], path, job["script"], job["scriptDigest"],
                       tuple(job["overlays"])) for job in jobs),
        outputs)


def reusable(settings: BuildSettings, record: dict[str, Any] | None,
             location: OutputLocation) -> dict[Path, Reusable]:
    """The spec files (as found) that need no compiling, by `record` (from `read_record`;
    call under the tree's lock); the others are loaded and compiled, and the output tree is
    planned as always."""
    if record is None or location.directory is None:
        return {}
    try:
        return _reusable(settings, record, location.directory)
    except (OSError, OutputEnvironmentError, OutputRefused):
        return {}  # unreadable here: the full build says so, or finds nothing wrong


def _specs_named_elsewhere(output: Directory, record: dict[str, Any]) -> set[str]:
    """The specs (resolved) that a job directory not among the record's jobs names as its
    source: the record does not say all that such a spec defines, so it is not trusted."""
    recorded = {job["name"] for job in record["jobs"]}
    named = set()
    for name, status in output.entries().items():
        if name in recorded or name.startswith(".") or not stat.S_ISDIR(status.st_mode):
            continue
        try:
            directory = output.open(name)
        except OutputRefused:
            continue
        if directory is not None:
            with directory:
                spec = _named_spec(directory, directory.read(KUSTOMIZATION_FILE))
            if spec is not None:
                named.add(spec)
    return named


def _reusable(settings: BuildSettings, record: dict[str, Any],
              output: Directory) -> dict[Path, Reusable]:
    if (output.real != record["output"]
            or os.path.realpath(settings.overlays) != record["overlays"]):
        return {}
    available = set(available_overlays(settings.overlays))
    spool = TextSpool()
    by_source: dict[str, list[dict[str, Any]]] = {}
    for job in record["jobs"]:
        by_source.setdefault(job["source"], []).append(job)
    named_elsewhere = _specs_named_elsewhere(output, record)
    found = {}
    for spec in record["specs"]:
        if spec["resolved"] in named_elsewhere:
            continue
        reused = _reusable_spec(output, spec, by_source.get(spec["path"], []), available,
                                spool)
        if reused is not None:
            found[reused.spec.path] = reused
    return found


def up_to_date(settings: BuildSettings, reusable: Mapping[Path, Reusable],
               location: OutputLocation) -> int | None:
    """The number of jobs when every job file found is `reusable` and the output directory
    holds their job directories and its README (`tree_readme`) and nothing else: the output is
    current. None when the build has to load something (call under the tree's lock)."""
    try:
        if not reusable or location.directory is None:
            return None
        if not all(path.exists() for path in settings.inputs):
            return None
        if set(dict.fromkeys(discover(settings.inputs))) != set(reusable):
            return None
        names = [name for item in reusable.values() for name in item.spec.jobs]
        if set(location.directory.entries()) != {*names, README_FILE}:
            return None  # a foreign entry, a job directory to prune, a killed build's leftover
        if location.directory.read(README_FILE) != README_TEXT:
            return None
    except (OSError, OutputEnvironmentError):
        return None
    return len(names)
