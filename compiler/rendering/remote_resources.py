"""Find what a kustomization would fetch over the network, before Kustomize runs.

Kustomize fetches a `resources:` (or component, base, patch, generator…) entry that is a URL or a
git repository without a word: a `validate` in CI would then check, and a GitOps controller later
apply, whatever that host serves at that moment. tfcompile refuses such entries unless the user
says `--allow-remote`. This module walks every kustomization reachable from a directory through
local directories, reading only, and names each remote entry by its file and field; it never
prints the entry itself (a URL may carry a token).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompile.compiler.yaml_input import YamlInputError, read_document, read_generated_document

KUSTOMIZATION_FILE_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

# Fields whose entries are paths Kustomize loads (a URL included) and, when an entry is a local
# directory, another kustomization to walk.
_DIRECTORY_LISTS = ("resources", "bases", "components", "generators", "transformers",
                    "validators")
# Fields whose entries are files (or, for patchesStrategicMerge, inline patches).
_FILE_LISTS = ("crds", "configurations", "patchesStrategicMerge")
# Fields holding a list of objects whose `path` Kustomize loads.
_PATH_OBJECT_LISTS = ("patches", "patchesJson6902", "replacements")
_GENERATORS = ("configMapGenerator", "secretGenerator")
# Helm chart repositories are downloaded as well.
_HELM_REPOSITORIES = (("helmCharts", "repo"), ("helmChartInflationGenerator", "chartRepoUrl"))

_DIRECTORY = "directory"  # a local directory there is another kustomization to walk
_FILE = "file"
_DOWNLOAD = "download"  # always fetched from elsewhere

_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP_LIKE = re.compile(r"^[\w.-]+@[\w.-]+:")
_GIT_PREFIXES = ("git::", "gh:", "git@", "github.com/", "github.com:", "gitlab.com/",
                 "bitbucket.org/")
_GIT_MARKERS = ("?ref=", "?version=", "&ref=", "&version=", "_git/", ".git//", ".git?")
_HOST_NAME = re.compile(r"^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:\d+)?$")


@dataclass(frozen=True)
class RemoteEntry:
    """A remote entry: the kustomization file that names it and the field, e.g. `resources[3]`."""

    kustomization: str
    field: str

    def explain(self) -> str:
        return (
            f"{self.kustomization}: {self.field}: remote resource refused (a URL or git "
            "repository, which kustomize would fetch over the network); pass --allow-remote to "
            "let kustomize fetch it"
        )


def remote_entries(directory: Path) -> list[RemoteEntry]:
    """Every remote entry of the kustomization in `directory` and of those it reaches locally.

    Paths in the result start from `directory` as given (normalized), so they read as the user
    would write them. Files that cannot be read or parsed are skipped: Kustomize reports them.
    """
    found: list[RemoteEntry] = []
    visited: set[str] = set()
    pending = [Path(os.path.normpath(directory))]
    while pending:
        current = pending.pop(0)
        kustomization = _kustomization_file(current)
        if kustomization is None:
            continue
        identity = os.path.realpath(kustomization)
        if identity in visited:
            continue
        visited.add(identity)
        content = _load(kustomization)
        if content is None:
            continue
        for field, entry, kind in _entries(content):
            if kind == _DOWNLOAD or is_remote(entry, current):
                found.append(RemoteEntry(str(kustomization), field))
            elif kind == _DIRECTORY and "\n" not in entry:
                target = Path(os.path.normpath(current / entry))
                if target.is_dir():
                    pending.append(target)
    return found


def is_remote(entry: str, base: Path) -> bool:
    """Whether Kustomize, in the kustomization directory `base`, would fetch `entry` from
    elsewhere rather than read a local file or directory."""
    text = entry.strip()
    if "\n" in text or not text:
        return False  # an inline patch or generator configuration, not a path
    lowered = text.lower()
    if _URL_SCHEME.match(text) or _SCP_LIKE.match(text) or lowered.startswith(_GIT_PREFIXES):
        return True
    if any(marker in lowered for marker in _GIT_MARKERS):
        return True
    # `example.com/org/repo//path`: Kustomize tries a git clone of what looks like a host.
    first = text.split("/", 1)[0]
    return "/" in text and _HOST_NAME.match(first) is not None and not (base / text).exists()


def _kustomization_file(directory: Path) -> Path | None:
    for name in KUSTOMIZATION_FILE_NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return read_kustomization(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def read_kustomization(text: str) -> dict[str, Any] | None:
    """A kustomization's text as data, None when it is not a mapping of YAML; each text up to
    64 KiB read once (the components a hundred jobs name are parsed once, not a hundred times,
    and a job's own kustomization once for all that look at it). Callers only read the
    result."""
    return _read_kept(text) if len(text) <= _KEPT_TEXT_CHARACTERS else _read(text)


_KEPT_TEXT_CHARACTERS = 64 * 1024


@functools.lru_cache(maxsize=256)
def _read_kept(text: str) -> dict[str, Any] | None:
    return _read(text)


def _read(text: str) -> dict[str, Any] | None:
    """With the C parser first: the kustomizations tfcompile writes are read in a fifth of the
    time (0.23 ms against 1.1 ms each, a twentieth of a job's `validate`); what libyaml
    refuses and YAML allows (`{image: a:1}`) is read again by the pure-Python one."""
    try:
        content = read_generated_document(text)
    except YamlInputError:
        try:
            content = read_document(text)
        except YamlInputError:
            return None
    return content if isinstance(content, dict) else None


def _entries(content: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(field path, entry, what kind of entry it is) for every entry Kustomize would load."""
    for field in _DIRECTORY_LISTS:
        for index, entry in _strings(content.get(field)):
            yield f"{field}[{index}]", entry, _DIRECTORY
    for field in _FILE_LISTS:
        for index, entry in _strings(content.get(field)):
            yield f"{field}[{index}]", entry, _FILE
    for field in _PATH_OBJECT_LISTS:
        for index, item in _mappings(content.get(field)):
            if isinstance(item.get("path"), str):
                yield f"{field}[{index}].path", item["path"], _FILE
    for field in _GENERATORS:
        for index, generator in _mappings(content.get(field)):
            for key in ("files", "envs"):
                for position, entry in _strings(generator.get(key)):
                    # `key=path` names the key in the generated object.
                    yield (f"{field}[{index}].{key}[{position}]", entry.split("=", 1)[-1],
                           _FILE)
            if isinstance(generator.get("env"), str):
                yield f"{field}[{index}].env", generator["env"], _FILE
    openapi = content.get("openapi")
    if isinstance(openapi, dict) and isinstance(openapi.get("path"), str):
        yield "openapi.path", openapi["path"], _FILE
    for field, key in _HELM_REPOSITORIES:
        for index, chart in _mappings(content.get(field)):
            if isinstance(chart.get(key), str) and chart[key].strip():
                yield f"{field}[{index}].{key}", chart[key], _DOWNLOAD


def _strings(value: Any) -> Iterator[tuple[int, str]]:
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str):
                yield index, item


def _mappings(value: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict):
                yield index, item
