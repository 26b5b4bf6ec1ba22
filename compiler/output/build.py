"""`tfcompile build` as a function: lock the tree, use or ignore the record, compile, plan,
refuse what must not be written, then write or check; it returns what happened and prints
nothing (the command line words it).

What it loads depends on what it finds: an up-to-date record (a plain build, not `--check`)
answers without importing the spec models or any YAML library, so those are imported only
on the path that needs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from .build_record import BuildSettings

if TYPE_CHECKING:
    from .build_record import Reusable
    from .location import OutputLocation

__all__ = ["BuildOutcome", "BuildSettings", "Prune", "Result", "build"]


class Result(Enum):
    """How a build ended."""

    BUILT = "built"
    """The output now holds what the specs compile to (written, or already so)."""
    UP_TO_DATE = "up to date"
    """`--check`: the output holds what the specs compile to."""
    STALE = "stale"
    """`--check`: the output differs (`difference` says how), or holds what tfcompile did not
    write (`foreign`)."""
    REFUSED = "refused"
    """A StatefulSet would change a field the API server refuses to change; nothing written."""
    NO_JOBS = "no jobs"
    """The inputs define no job and no job directory is to be pruned."""


@dataclass(frozen=True)
class Prune:
    """A job directory that goes (or would go) with the reason, and the files kept in it."""

    directory: Path
    reason: str
    kept: tuple[str, ...]


@dataclass(frozen=True)
class BuildOutcome:
    """What a build did. `jobs` and `changed_files` count what was (or would be) written;
    `notes` are things the user should know that did not stop the build (an ignored record,
    what the output tree holds that tfcompile did not write); `refusals` explain each
    immutable-field change; `difference` is `--check`'s unified diff, and `foreign` what makes
    `--check` fail besides: each entry of the output tree tfcompile did not write, as
    `path: what it is`."""

    result: Result
    jobs: int = 0
    changed_files: int = 0
    notes: tuple[str, ...] = ()
    prunes: tuple[Prune, ...] = ()
    refusals: tuple[str, ...] = ()
    difference: str = ""
    inputs: tuple[Path, ...] = field(default_factory=tuple)
    foreign: tuple[str, ...] = ()


def build(settings: BuildSettings, *, check: bool = False,
          allow_recreate: bool = False) -> BuildOutcome:
    """Build (or with `check`, compare) the output tree of `settings`. Raises `SpecError` for
    problems in the specs, `OutputRefused` for a tree tfcompile will not touch, and
    `OutputEnvironmentError` when the machine refuses."""
    from .build_record import (
        cache_directory,
        environment_digest,
        read_record,
        reusable,
        up_to_date,
    )
    from .lock import locked

    with locked(settings.output, exclusive=not check) as location:
        # Specs are read under the lock too: of two builds at once, the later sees the newer.
        # Without a place for records, none is read or written: the digest would go unused.
        environment = environment_digest() if cache_directory() is not None else ""
        if check:  # only compiling shows that the output is current: no record
            return _full_build(settings, environment, {}, location, check=True,
                               allow_recreate=allow_recreate, notes=())
        record, note = read_record(settings, environment)
        notes = () if note is None else (f"{note}; building without it",)
        unchanged = reusable(settings, record, location)
        current = up_to_date(settings, unchanged, location)
        if current is not None:  # nothing changed since the recorded build: no spec is loaded
            return BuildOutcome(Result.BUILT, jobs=current, notes=notes)
        return _full_build(settings, environment, unchanged, location, check=False,
                           allow_recreate=allow_recreate, notes=notes)


def _full_build(settings: BuildSettings, environment: str, unchanged: Mapping[Path, Reusable],
                location: OutputLocation, *, check: bool, allow_recreate: bool,
                notes: tuple[str, ...]) -> BuildOutcome:
    """Load and compile every job (those `unchanged` are read from the output tree instead),
    plan the output tree (under its lock), then write or check."""
    from .build_record import save
    from .compilation import build_plan, compile_inputs, searched_sources
    from .errors import shown
    from .immutable_fields import immutable_changes
    from .tree import recorded_sources
    from .writing import write

    # The specs the tree names as its jobs' sources are loaded too: one that no longer looks
    # like a job file fails the build instead of being taken for gone. `--check` loads them
    # all, so that every job directory it passes is one these specs compile to.
    recorded = searched_sources(settings, recorded_sources(location), everywhere=check)
    compilation = compile_inputs(settings, unchanged, location.real, recorded)
    changes = build_plan(settings, location, compilation)
    prunes = tuple(Prune(changes.output / prune.job, prune.reason,
                         tuple(changes.kept.get(prune.job, [])))
                   for prune in changes.prunes)
    foreign = tuple(changes.foreign)
    if check:
        foreign += tuple(
            [f"{leftover}: left by a build that was killed (tfcompile stages under this "
             "name); `tfcompile build` removes it" for leftover in changes.leftovers]
            + [f"{shown(changes.output / name)}: a job directory this check did not compile: its "
               "kustomization.yaml names no spec that defines it" for name in changes.unjudged])
    else:
        notes += tuple(f"{entry}; kept, and `build --check` fails on it (the tree Argo CD and "
                       "Flux sync holds only what tfcompile writes)" for entry in foreign)
    if not compilation.jobs and not changes.prunes and not (check and (foreign or changes.top)):
        # Even with no job, the tree keeps its README, so the path Flux reads stays in git.
        written = [] if check else write(changes)
        return BuildOutcome(Result.NO_JOBS, changed_files=len(written), notes=notes,
                            inputs=tuple(settings.inputs))
    refused = [] if allow_recreate else immutable_changes(changes)
    if refused:
        return BuildOutcome(Result.REFUSED, notes=notes,
                            refusals=tuple(change.explain() for change in refused))
    outputs = {job.name: job.files for job in compilation.jobs}
    if check:
        from .tree import unified_diff

        difference = unified_diff(changes)
        if difference or foreign:
            return BuildOutcome(Result.STALE, jobs=len(compilation.jobs),
                                changed_files=len(changes.changed), notes=notes,
                                prunes=prunes, difference=difference, foreign=foreign)
        save(settings, environment, compilation.specs, compilation.inputs, outputs, location)
        return BuildOutcome(Result.UP_TO_DATE, jobs=len(compilation.jobs), notes=notes)
    changed = write(changes)
    save(settings, environment, compilation.specs, compilation.inputs, outputs, location)
    return BuildOutcome(Result.BUILT, jobs=len(compilation.jobs), changed_files=len(changed),
                        notes=notes, prunes=prunes)
