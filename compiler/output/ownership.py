"""What in the output tree is tfcompile's, and whether the spec a job came from still holds it.

A job directory is tfcompile's when its kustomization.yaml starts with the generated mark; its
files are that kustomization and the resources it lists. The mark names the spec the job was
compiled from, relative to the job directory: a directory is pruned only when that spec is gone
or loads and no longer defines the job, so building some jobs never touches the others. A spec
that exists but does not load as TrainingJobs (another `kind`, a YAML error, a broken field)
never prunes: the build fails with its problems and names the job it keeps (`kept_note`).
Nothing here follows a symbolic link: job directories are read through `directory_handles`, and
the spec a job directory names is found lexically from the directory's path without links, so a
directory swapped for a link while a build runs cannot make another spec (or none) its source.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompile.compiler.output.errors import shown
from tfcompile.compiler.yaml_input import read_document, read_documents
from tfcompile.spec.problems import LocatedProblem, Location, SpecError
from tfcompile.spec.shown_paths import display_path

from .directory_handles import Directory
from .generated_mark import GENERATED_MARK, KUSTOMIZATION_FILE, recorded_source

MAXIMUM_SPEC_BYTES = 4 * 1024 * 1024
"""A recorded source larger than this is not read; the job directory is then kept."""

_MISSING = {errno.ENOENT, errno.ENOTDIR}


@dataclass(frozen=True)
class JobDirectory:
    """A directory tfcompile generated: how it is shown, its path without links, its files
    and the spec it was compiled from (relative to it)."""

    path: Path
    real: str
    files: list[str]
    source: str | None

    @property
    def name(self) -> str:
        return self.path.name


def generated_directory(directory: Directory) -> JobDirectory | None:
    """The directory as tfcompile's, or None when it did not generate it."""
    text = directory.read(KUSTOMIZATION_FILE)
    if text is None:
        return None
    first = text.split("\n", 1)[0]
    if GENERATED_MARK not in first:
        return None
    files = [KUSTOMIZATION_FILE]
    try:  # yaml_input loads ruamel.yaml on first use: a current build reads no YAML
        document = read_document(text)
    except Exception:  # a damaged kustomization: only the file itself is known to be ours
        document = None
    resources = document.get("resources", []) if isinstance(document, dict) else []
    for resource in resources if isinstance(resources, list) else []:
        if (isinstance(resource, str) and resource and "/" not in resource
                and "\\" not in resource and not resource.startswith(".")
                and resource not in files):
            files.append(resource)
    return JobDirectory(directory.path, directory.real, files, recorded_source(first))


def recorded_spec(job_directory: str, source: str) -> Path:
    """The spec a job directory names (`source`, relative to it), from the directory's path
    without links, `..` taken lexically: never through the output tree's names again."""
    return Path(os.path.normpath(os.path.join(job_directory, source)))


def source_path(directory: JobDirectory) -> Path | None:
    """The recorded spec, as an absolute path."""
    if directory.source is None:
        return None
    return recorded_spec(directory.real, directory.source)


def jobs_defined_in(path: Path) -> frozenset[str] | None:
    """Names of the TrainingJobs a file defines; None when that cannot be told (unreadable,
    not YAML, too large): the caller then keeps what depends on it."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as handle:  # a FIFO or a device is no spec
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                return None
            data = handle.read(MAXIMUM_SPEC_BYTES + 1)
        if len(data) > MAXIMUM_SPEC_BYTES:
            return None
        documents: list[Any] = read_documents(data.decode("utf-8"))
    except Exception:
        return None
    names = set()
    for document in documents:
        if isinstance(document, dict) and document.get("kind") == "TrainingJob":
            metadata = document.get("metadata")
            if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
                names.add(metadata["name"])
    return frozenset(names)


def kept_note(source: Path, job: str, directory: Path) -> LocatedProblem:
    """What a build says of a job whose spec does not load: it keeps the job's directory."""
    return LocatedProblem(
        Location(display_path(source), 1, 1), (),
        f"job {job} was compiled from this file into {shown(directory)}, which is kept: a "
        "file that does not load as a TrainingJob never prunes the job it defined; fix it, "
        "or delete the file to delete the job")


def loaded_jobs(source: Path) -> frozenset[str]:
    """The jobs a spec defines as a build would load it (a sweep's trials and its TensorBoard
    by their names); raises `SpecError` when it does not load."""
    from tfcompile.compiler.objects.sweep import sweep_jobs  # only a job to judge needs them
    from tfcompile.spec.loading import load_jobs

    return frozenset(job.job.metadata.name for document in load_jobs(source)
                     for job in sweep_jobs(document))


def still_defines(directory: JobDirectory, defined: dict[Path, frozenset[str]], *,
                  load: bool = False) -> tuple[bool | None, str]:
    """Whether the recorded spec still defines the job: True, False (with the reason it is
    gone) or None (cannot tell: no source recorded, or `load` is false and a look at the file
    does not show the job), with the spec as shown. With `load`, a spec not in `defined` (the
    files a build loaded, by resolved path) whose text does not name the job is loaded as a
    build would (and added to `defined`): one that does not load raises `SpecError` with its
    problems and a note naming the job kept."""
    source = source_path(directory)
    if source is None:
        return None, ""
    display = shown(source)
    try:
        os.stat(source)
    except OSError as error:
        if error.errno in _MISSING:
            return False, f"its source {display} no longer exists"
        return None, display
    names = defined.get(source.resolve())
    if names is None:
        names = jobs_defined_in(source)
        if names is not None and directory.name in names:
            return True, display
        if not load:
            return None if names is None else False, display
        try:
            names = defined[source.resolve()] = loaded_jobs(source)
        except SpecError as error:
            raise SpecError([*error.problems,
                             kept_note(source, directory.name, directory.path)]) from None
    if directory.name in names:
        return True, display
    return False, f"its source {display} no longer defines job {directory.name}"
