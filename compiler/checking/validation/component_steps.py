"""What a kustomization renders to before each of its Kustomize Components.

A component's change shows only against what came before it: the rendering with the components
ahead of it in the list (`component_conflicts.py` compares them). Kustomize renders one
kustomization per run, and with components most of a run is Kustomize starting and reading
Kubernetes' schema for strategic merges, so every such rendering is made in one run: each is a
copy of the directory naming only the components ahead, wrapped in a kustomization that puts a
marker of its own before every name (Kustomize carries the prefix into every reference it knows
of); the markers are random for each run, so no input can forge one, and are taken off every
name and reference again. A job with components thus costs at most one Kustomize run for the
renderings before them, however many components it names. When that run fails, or a rendered
object carries no marker (a kind Kustomize does not prefix), the renderings are made one by
one. The rendering before the first component, when its kustomization only lists files beside
it (as `build` writes it), is read without Kustomize (`rendering.plain_kustomization`).

Components that cannot meet need none of this: `component_reach.py` tells their steps from the
directory's own rendering. For the others, `validate` needs the directory's own rendering as
well, and most of a job's time is Kustomize's:
`steps_and_final` makes it in the same run as the steps (the directory itself under one more
marker), so a job with components costs one Kustomize run however many it names. A marker
changes nothing else Kustomize renders: generated names keep their hashes, and objects of one
kind keep their order (Kustomize's default order sorts them by name, and a common prefix keeps
it). What only the kustomization a run starts from decides (`sortOptions`, `buildMetadata`,
`openapi`) would be lost under a wrapper, so a kustomization that sets any of them is rendered
on its own, as is one whose run fails or leaves an object unmarked: the caller then renders the
directory alone, and Kustomize's message is the one it would give.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompile.compiler.output.generated_mark import GENERATED_MARK
from tfcompile.compiler.rendering.kustomize import RenderingError, render
from tfcompile.compiler.rendering.manifests import KubernetesObject, name_of, parse_manifests
from tfcompile.compiler.rendering.plain_kustomization import render_plain
from tfcompile.compiler.rendering.remote_resources import (
    KUSTOMIZATION_FILE_NAMES,
    read_kustomization,
)

# Entries that may name a kustomization directory outside the directory (kept pointing at it
# from the copy); files must lie inside it, and are copied with it.
_DIRECTORY_FIELDS = ("resources", "bases", "generators", "transformers", "validators")

COMPILED_OUTPUT = "the compiled output"


class ComponentStepsError(RenderingError):
    """The renderings before each component could not be made; the message says why."""


@dataclass(frozen=True)
class ComponentSteps:
    """`before[k]` is the rendering with the first `k` components (so `before[0]` has none).

    `base` names the rendering without components in messages: the compiled output for a
    directory tfcompile wrote, else the kustomization's own resources.
    """

    components: tuple[str, ...]
    before: tuple[Sequence[KubernetesObject], ...]
    base: str


@dataclass(frozen=True)
class Kustomization:
    """A kustomization that names components."""

    path: Path
    document: dict[str, Any]
    components: tuple[str, ...]  # as written
    generated: bool  # written by tfcompile


def kustomization_with_components(directory: Path) -> Kustomization | None:
    """The kustomization of `directory` when it names components; None when it names none (or
    cannot be read, which rendering reports on its own)."""
    for name in KUSTOMIZATION_FILE_NAMES:
        path = directory / name
        if path.is_file() and not path.is_symlink():
            try:
                text = path.read_text(encoding="utf-8")
                if "components" not in text:
                    return None  # the common case, without parsing
                document = read_kustomization(text)  # written by people
            except (OSError, UnicodeDecodeError):
                return None
            if not isinstance(document, dict):
                return None
            components = document.get("components")
            if not isinstance(components, list) or not components:
                return None
            if not all(isinstance(entry, str) for entry in components):
                return None
            return Kustomization(path, document, tuple(components),
                                 GENERATED_MARK in text.split("\n", 1)[0])
    return None


# Fields Kustomize reads only in the kustomization a run starts from.
_TOP_LEVEL_ONLY = frozenset({"sortOptions", "buildMetadata", "openapi"})


def component_steps(directory: Path, kustomization: Kustomization, *,
                    allow_remote: bool = False, one_by_one: bool = False) -> ComponentSteps:
    """The renderings of `directory` (whose `kustomization` names components) before each of
    its components; `one_by_one` when a run of them together is known to fail.

    Raises `ComponentStepsError` when they cannot be rendered (for example a patch of the
    kustomization itself that needs an object only a component adds).
    """
    made = _renderings(directory, kustomization, allow_remote=allow_remote, with_final=False,
                       one_by_one=one_by_one)
    assert made is not None  # only a run with the final rendering gives up
    return made[0]


def renders_with_its_steps(kustomization: Kustomization) -> bool:
    """Whether the directory's own rendering can be made in one run with the steps: it sets
    nothing that only the kustomization a run starts from decides."""
    return not _TOP_LEVEL_ONLY & set(kustomization.document)


def steps_and_final(directory: Path, kustomization: Kustomization
                    ) -> tuple[ComponentSteps, list[KubernetesObject]] | None:
    """The renderings before each component and the directory's own, from one Kustomize run,
    for a kustomization that `renders_with_its_steps` (remote entries are the caller's to
    refuse first); None when that run fails or leaves an object unmarked, and the caller
    renders them apart."""
    try:
        made = _renderings(directory, kustomization, allow_remote=True, with_final=True)
    except ComponentStepsError:
        return None
    if made is None or made[1] is None:
        return None
    return made[0], made[1]


def _renderings(directory: Path, kustomization: Kustomization, *, allow_remote: bool,
                with_final: bool, one_by_one: bool = False
                ) -> tuple[ComponentSteps, list[KubernetesObject] | None] | None:
    """The steps and, `with_final`, the directory's own rendering, made in the same run as the
    steps; None `with_final` when they cannot be made in one run (without it, the steps are
    then made one by one)."""
    components = kustomization.components
    final: list[KubernetesObject] | None = None
    with tempfile.TemporaryDirectory(prefix="tfcompile-components-") as temporary:
        workspace = Path(temporary)
        try:
            steps = [_step_copy(directory, kustomization, components[:count],
                                workspace / f"step-{count}") for count in range(len(components))]
            # Before the first component, a kustomization `build` wrote only lists files: it
            # is read in process, and Kustomize renders the steps after it.
            plain = render_plain(steps[0])
            first = [] if plain is None else [plain]
            rest: list[Path] = steps[len(first):]
            together = [*rest, directory] if with_final else rest
            renderings = (None if one_by_one else
                          _render_together(together, workspace, allow_remote) if together
                          else [])
            if renderings is None:
                if with_final:
                    return None
                renderings = [parse_manifests(render(step, allow_remote=allow_remote),
                                              source=str(directory)) for step in rest]
            elif with_final:
                final = renderings.pop()
            renderings = [*first, *renderings]
        except RenderingError as failure:
            raise ComponentStepsError(str(failure).replace(str(workspace), "<copy>")) from None
        except OSError as failure:
            raise ComponentStepsError(f"cannot copy {directory}: {failure.strerror}") from None
    return ComponentSteps(components, tuple(renderings), base_name(kustomization)), final


def base_name(kustomization: Kustomization) -> str:
    """How messages name the rendering before any component."""
    return (COMPILED_OUTPUT if kustomization.generated
            else f"the resources of {kustomization.path.name} (before any component)")


def _relocated(entry: str, directory: Path, copy: Path) -> str:
    """A path as the copy must name it: relative paths leaving the directory are made relative
    to the copy; paths inside it (copied along), absolute paths and URLs are kept."""
    normalized = os.path.normpath(entry)
    if "://" in entry or os.path.isabs(entry) or not (
            normalized == ".." or normalized.startswith("../")):
        return entry
    return os.path.relpath(os.path.normpath(directory / entry), copy)


def _step_copy(directory: Path, kustomization: Kustomization, components: Sequence[str],
               copy: Path) -> Path:
    """A copy of `directory` whose kustomization names only `components`."""
    shutil.copytree(directory, copy, symlinks=True)
    document = kustomization.document
    changed = dict(document)
    changed.pop("components")
    if components:
        changed["components"] = [_relocated(entry, directory, copy) for entry in components]
    for field in _DIRECTORY_FIELDS:
        entries = document.get(field)
        if isinstance(entries, list):
            changed[field] = [_relocated(entry, directory, copy) if isinstance(entry, str)
                              else entry for entry in entries]
    # JSON is YAML; values JSON lacks (a date) are written as Kustomize would read them.
    (copy / kustomization.path.name).write_text(json.dumps(changed, default=str),
                                                encoding="utf-8")
    return copy


def _render_together(steps: Sequence[Path], workspace: Path,
                     allow_remote: bool) -> list[list[KubernetesObject]] | None:
    """Every step's rendering from one Kustomize run, or None when they cannot be told apart
    (Kustomize's own failure included: the steps are then rendered one by one)."""
    if len(steps) == 1:
        return [parse_manifests(render(steps[0], allow_remote=allow_remote),
                                source=str(steps[0]))]
    token = secrets.token_hex(6)
    markers = [f"m{token}-{number}-" for number in range(len(steps))]
    for position, (step, marker) in enumerate(zip(steps, markers, strict=True)):
        wrapper = workspace / f"marked-{position}"
        wrapper.mkdir()
        (wrapper / "kustomization.yaml").write_text(json.dumps({
            "resources": [os.path.relpath(step, wrapper)], "namePrefix": marker}),
            encoding="utf-8")
    together = workspace / "together"
    together.mkdir()
    (together / "kustomization.yaml").write_text(json.dumps({
        "resources": [f"../marked-{position}" for position in range(len(steps))]}),
        encoding="utf-8")
    try:
        objects = parse_manifests(render(together, allow_remote=allow_remote),
                                  source=str(together))
    except RenderingError:
        return None
    renderings: list[list[KubernetesObject]] = [[] for _ in steps]
    for item in objects:
        name = name_of(item)
        number = next((index for index, marker in enumerate(markers)
                       if name.startswith(marker)), None)
        if number is None:
            return None
        renderings[number].append(_unmarked(item, markers[number]))
    return renderings


def _unmarked(value: Any, marker: str) -> Any:
    """`value` with `marker` taken off the start of every string (names and references)."""
    if isinstance(value, dict):
        return {key: _unmarked(item, marker) for key, item in value.items()}
    if isinstance(value, list):
        return [_unmarked(item, marker) for item in value]
    if isinstance(value, str) and value.startswith(marker):
        return value[len(marker):]
    return value
