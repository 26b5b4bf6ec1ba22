"""The output directory: what a build would change, a diff of it, and an atomic write.

The whole new tree is computed in memory first. Writing copies the current tree aside, applies the
changes there and swaps it in, so a failed build (or a crash halfway) leaves `output/` as it was.
Only files tfcompile wrote are ever replaced or removed: a job directory is recognised by the mark
in its kustomization.yaml, and tfcompile's files are that file and the resources it lists.
"""

from __future__ import annotations

import difflib
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from .compile import GENERATED_MARK, KUSTOMIZATION_FILE, CompiledJob


@dataclass(frozen=True)
class Plan:
    """Changes to the output directory: relative path -> new text, and paths to remove."""

    output: Path
    writes: dict[str, str]
    removals: list[str]

    @cached_property
    def changed(self) -> list[str]:
        """Paths whose content would change, sorted (read once)."""
        paths = [p for p, text in self.writes.items() if _read(self.output / p) != text]
        return sorted([*paths, *self.removals])


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def owned_files(job_directory: Path) -> list[str] | None:
    """tfcompile's files in a directory it generated (None when it did not generate it)."""
    text = _read(job_directory / KUSTOMIZATION_FILE)
    if text is None or GENERATED_MARK not in text.split("\n", 1)[0]:
        return None
    try:
        document = YAML(typ="safe").load(text)
    except YAMLError:
        return [KUSTOMIZATION_FILE]
    resources = document.get("resources", []) if isinstance(document, dict) else []
    listed = [r for r in resources if isinstance(r, str) and "/" not in r]
    return [KUSTOMIZATION_FILE, *listed]


def plan(output: Path, jobs: Iterable[CompiledJob]) -> Plan:
    """The tree `jobs` need: their files, and tfcompile's files that no longer belong."""
    writes: dict[str, str] = {}
    for job in jobs:
        for name, text in job.files.items():
            writes[f"{job.name}/{name}"] = text
    removals: list[str] = []
    if output.is_dir():
        for directory in sorted(p for p in output.iterdir() if p.is_dir()):
            for name in owned_files(directory) or []:
                relative = f"{directory.name}/{name}"
                if relative not in writes and (directory / name).is_file():
                    removals.append(relative)
    return Plan(output=output, writes=dict(sorted(writes.items())), removals=sorted(removals))


def unified_diff(changes: Plan) -> str:
    """What a write would change, as a unified diff with paths under the output directory."""
    chunks: list[str] = []
    for relative in changes.changed:
        old = _read(changes.output / relative) or ""
        new = changes.writes.get(relative, "")
        shown = (changes.output / relative).as_posix()
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{shown}" if old else "/dev/null",
                tofile=f"b/{shown}" if relative in changes.writes else "/dev/null",
            )
        )
    return "".join(chunk if chunk.endswith("\n") else chunk + "\n" for chunk in chunks)


def write(changes: Plan) -> list[str]:
    """Apply the plan atomically; returns the changed paths (nothing is touched if none)."""
    changed = changes.changed
    if not changed:
        return []
    output = changes.output
    parent = output.parent if output.parent != Path("") else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    staging = parent / f".{output.name}.tfcompile-staging-{os.getpid()}"
    backup = parent / f".{output.name}.tfcompile-previous-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        if output.exists():
            shutil.copytree(output, staging, symlinks=True)
        else:
            staging.mkdir()
        for relative in changes.removals:
            (staging / relative).unlink()
            directory = (staging / relative).parent
            if directory != staging and not any(directory.iterdir()):
                directory.rmdir()
        for relative, text in changes.writes.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if output.exists():
            os.rename(output, backup)
        os.rename(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if backup.exists() and not output.exists():
            os.rename(backup, output)
        raise
    shutil.rmtree(backup, ignore_errors=True)
    return changed
