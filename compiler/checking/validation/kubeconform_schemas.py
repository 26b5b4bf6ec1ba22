"""The strict schemas `validate` uses, written once in the layout kubeconform reads, offline.

kubeconform, the validator the scaffold's CI runs after `validate`, downloads its schemas by
default. The `kubernetes-validate` package that `validate` uses already ships the same strict
schemas for every supported Kubernetes version, named as kubeconform names them, but their
`$ref`s point at `https://kubernetes.io/api/_definitions.json`, which kubeconform would try to
download. This module writes each kind's schema standalone (the definitions it uses inlined
under `$defs`, no `$id` to resolve against), so that

    kubeconform -strict -kubernetes-version 1.33.0 -schema-location DIRECTORY/TEMPLATE

checks offline against exactly what `validate` checks. It lives beside `versions` so both
read one source of schemas; tfcompile itself never runs kubeconform.

    python -m tfcompile.compiler.checking.validation.kubeconform_schemas [DIRECTORY] \
        [--kubernetes-version V]

prepares the versions asked for (default: the default version) under DIRECTORY (default: the
user's cache directory) and prints the `-schema-location` argument. Prepared versions are kept:
the directory name carries the kubernetes-validate version, so an upgrade prepares anew.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from importlib import metadata
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from tfcompile.compiler.kubernetes_versions import (
    DEFAULT_KUBERNETES_VERSION,
    normalize_version,
    schema_directory,
)

SCHEMA_FILE_TEMPLATE = (
    "{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/"
    "{{ .ResourceKind }}{{ .KindSuffix }}.json"
)
"""kubeconform's `-schema-location` template below the prepared directory."""

# Bump when the written files change, so that caches of an older layout are not reused.
_LAYOUT = 1
_SHARED_DEFINITIONS = "/api/_definitions.json#/$defs/"
_LOCAL_DEFINITIONS = "#/$defs/"
_SOURCE_DIRECTORY = re.compile(r"(?P<version>v\d+\.\d+\.\d+)-local-strict")


class SchemaLayoutError(Exception):
    """The installed schemas are not laid out as this module expects; nothing was written."""


def default_cache_directory() -> Path:
    """`$XDG_CACHE_HOME/tfcompile/kubeconform-schemas`, or under `~/.cache`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tfcompile" / "kubeconform-schemas"


def prepare(cache_directory: Path, kubernetes_versions: Iterable[str]) -> Path:
    """Write the standalone strict schemas of each version (once) and return the directory
    that `SCHEMA_FILE_TEMPLATE` is relative to."""
    root = cache_directory / f"kubernetes-validate-{_schemas_release()}-layout-{_LAYOUT}"
    for kubernetes_version in kubernetes_versions:
        source = schema_directory(normalize_version(kubernetes_version))
        target = root / f"{_source_version(source)}-standalone-strict"
        if not target.is_dir():
            _write_atomically(source, target)
    return root


def schema_location(root: Path) -> str:
    """The `-schema-location` argument for a directory returned by `prepare`."""
    return f"{root}/{SCHEMA_FILE_TEMPLATE}"


def standalone_schemas(source: Traversable) -> dict[str, dict[str, Any]]:
    """File name -> self-contained schema, for every kind (an object with apiVersion and kind)
    in one `kubernetes-validate` schema directory."""
    shared = json.loads(source.joinpath("_definitions.json").read_text())["$defs"]
    definitions = {key: _rewrite(value, "_definitions.json") for key, value in shared.items()}
    schemas: dict[str, dict[str, Any]] = {}
    for entry in sorted(source.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".json") or entry.name.startswith("_"):
            continue
        schema = json.loads(entry.read_text())
        if not isinstance(schema, dict) or "x-kubernetes-group-version-kind" not in schema:
            continue  # a fragment (`container-v1.json`), not a kind kubeconform looks up
        schemas[entry.name] = _standalone(schema, definitions, entry.name)
    return schemas


def _standalone(schema: dict[str, Any], definitions: dict[str, Any],
                name: str) -> dict[str, Any]:
    """`schema` with its references local and the (already rewritten) definitions it uses."""
    body: dict[str, Any] = _rewrite(
        {key: value for key, value in schema.items() if key != "$id"}, name)
    used: dict[str, Any] = {}
    pending = sorted(_references(body))
    while pending:
        definition = pending.pop()
        if definition in used:
            continue
        if definition not in definitions:
            raise SchemaLayoutError(f"{name}: refers to {definition}, which is not defined")
        used[definition] = definitions[definition]
        pending.extend(_references(used[definition]) - used.keys())
    body["$defs"] = dict(sorted(used.items()))
    return body


def _rewrite(value: Any, name: str) -> Any:
    """`value` with every `$ref` pointing into the same document's `$defs`."""
    if isinstance(value, dict):
        rewritten = {key: _rewrite(item, name) for key, item in value.items()}
        reference = rewritten.get("$ref")
        if isinstance(reference, str):
            if reference.startswith(_SHARED_DEFINITIONS):
                reference = _LOCAL_DEFINITIONS + reference.removeprefix(_SHARED_DEFINITIONS)
            if not reference.startswith(_LOCAL_DEFINITIONS):
                raise SchemaLayoutError(f"{name}: unexpected reference {reference}")
            rewritten["$ref"] = reference
        return rewritten
    if isinstance(value, list):
        return [_rewrite(item, name) for item in value]
    return value


def _references(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        reference = value.get("$ref")
        if isinstance(reference, str):
            found.add(reference.removeprefix(_LOCAL_DEFINITIONS))
        for item in value.values():
            found |= _references(item)
    elif isinstance(value, list):
        for item in value:
            found |= _references(item)
    return found


def _write_atomically(source: Traversable, target: Path) -> None:
    """Write into a temporary sibling, then rename: readers never see half a directory."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for file_name, schema in standalone_schemas(source).items():
            (temporary / file_name).write_text(
                json.dumps(schema, separators=(",", ":"), sort_keys=True), encoding="utf-8")
        try:
            temporary.rename(target)
        except OSError:
            if not target.is_dir():  # not merely another process that finished first
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def _source_version(source: Traversable) -> str:
    match = _SOURCE_DIRECTORY.fullmatch(source.name)
    if match is None:
        raise SchemaLayoutError(f"unexpected schema directory name {source.name}")
    return match.group("version")


def _schemas_release() -> str:
    try:
        return metadata.version("kubernetes-validate")
    except metadata.PackageNotFoundError:
        return "unknown"


def main(arguments: Sequence[str] | None = None) -> int:
    options = argparse.ArgumentParser(
        prog="python -m tfcompile.compiler.checking.validation.kubeconform_schemas",
        description="Write the strict Kubernetes schemas tfcompile validates with in the "
                    "layout kubeconform reads, and print its -schema-location argument.",
    )
    options.add_argument("directory", nargs="?", type=Path, default=default_cache_directory(),
                         help="where to write them (default: %(default)s)")
    options.add_argument("--kubernetes-version", action="append", metavar="VERSION",
                         help=f"a version to prepare; repeat for more (default: "
                              f"{DEFAULT_KUBERNETES_VERSION})")
    parsed = options.parse_args(arguments)
    versions = parsed.kubernetes_version or [DEFAULT_KUBERNETES_VERSION]
    try:
        root = prepare(parsed.directory, versions)
    except (ValueError, SchemaLayoutError, OSError) as error:
        print(f"kubeconform-schemas: {error}", file=sys.stderr)
        return 2
    print(schema_location(root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
