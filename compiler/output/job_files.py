"""A compiled job's objects as the files of its output directory: one YAML file per object,
named by kind and name, and a kustomization.yaml that lists them under the generated mark."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfcompile.compiler.objects.compile import build_objects, file_name, kustomization
from tfcompile.compiler.yaml_output import dump
from tfcompile.spec.loaded_job import LoadedJob

from .generated_mark import GENERATED_MARK, KUSTOMIZATION_FILE
from .launcher_zip import shipped_launcher


@dataclass(frozen=True)
class CompiledJob:
    """The output of one job: `files` maps file name to text, kustomization.yaml included
    (sorted by name; a build keeps the texts in a `text_spool.TextSpool`)."""

    name: str
    objects: list[dict[str, Any]]
    files: Mapping[str, str]


def compile_job(loaded: LoadedJob, source: str, components: list[str]) -> CompiledJob:
    """Compile one job. `source` is the spec's path as the header should name it, and
    `components` the overlay directories relative to the job's output directory."""
    objects = build_objects(loaded, shipped_launcher())
    files = {file_name(document): dump(document) for document in objects}
    assert len(files) == len(objects), "two objects share a kind and a name"
    header = [
        f"{GENERATED_MARK} from {source}; edit that file and run `tfcompile build`.",
        "Render with `kubectl kustomize` (or `kustomize build`) on this directory.",
    ]
    files[KUSTOMIZATION_FILE] = dump(kustomization(sorted(files), components), header)
    return CompiledJob(
        name=loaded.job.metadata.name, objects=objects, files=dict(sorted(files.items()))
    )
