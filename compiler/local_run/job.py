"""From `job.yaml` to a local run: compile, render with the job's overlays, run the pods.

The job is compiled and rendered exactly as CI and Argo CD would (into a temporary directory),
and the runtime reads the rendered manifests through `rendering`, the same code `validate` uses,
so a local run tests the YAML a cluster would get, not the compiler's intent.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tfcompile.compiler.objects.labels import ROLE_LABEL
from tfcompile.compiler.objects.launcher_interface import STATE_VOLUME
from tfcompile.compiler.output.compilation import BuildSettings, compile_all
from tfcompile.compiler.output.lock import locked
from tfcompile.compiler.output.tree import plan
from tfcompile.compiler.output.writing import write

from ..rendering.kustomize import render
from ..rendering.manifests import parse_manifests
from ..rendering.pods import Pod
from ..rendering.stateful_set_pods import pods_of
from .options import LocalRunOptions, RunOutcome
from .runner import run_pods
from .secrets_file import parse_secrets_file
from .volumes import Content
from .workspace import DIRECTORY_PREFIX, mark_owner


class LocalJobError(Exception):
    """The job file cannot be run locally; the message says why."""


@dataclass(frozen=True)
class LocalJobSettings:
    job_file: Path
    overlays: Path
    secrets_file: Path | None
    options: LocalRunOptions
    allow_remote: bool = False
    job: str | None = None
    """Which job of the file to run, when it defines several (a sweep's trials)."""


def success_pods(pods: Sequence[Pod]) -> list[str]:
    """Whose success ends the run: the chief, or every worker when there is no chief (as the
    TFJob operator judged a job). None for a job without the launcher (`launcher: none`), whose
    pods have no state volume for a success marker: as in a cluster, an exit 0 restarts the
    training, and the run ends by failure, timeout or interruption."""
    by_role: dict[str, list[str]] = {}
    for pod in pods:
        if any(volume.name == STATE_VOLUME for volume in pod.volumes):
            by_role.setdefault(pod.labels.get(ROLE_LABEL, ""), []).append(pod.name)
    return by_role.get("chief") or by_role.get("worker") or []


def config_maps(objects: Sequence[dict[str, Any]]) -> dict[str, dict[str, Content]]:
    """ConfigMap name -> its files: `data` as text, `binaryData` decoded (the launcher's zip),
    as the kubelet writes them into a configMap volume."""
    found: dict[str, dict[str, Content]] = {}
    for item in objects:
        if item.get("kind") == "ConfigMap":
            files: dict[str, Content] = {
                str(k): str(v) for k, v in (item.get("data") or {}).items()}
            for key, value in (item.get("binaryData") or {}).items():
                files[str(key)] = base64.b64decode(str(value))
            found[str(item["metadata"]["name"])] = files
    return found


def rendered_pods(
    settings: LocalJobSettings, directory: Path
) -> tuple[list[Pod], list[dict[str, Any]], dict[tuple[str, str], str]]:
    """Compile and render the job under `directory`; the pods and objects a cluster would get."""
    compiled = compile_all(BuildSettings(inputs=[settings.job_file], output=directory / "output",
                                         overlays=settings.overlays))
    names = ", ".join(job.name for job in compiled)
    if settings.job is not None:
        compiled = [job for job in compiled if job.name == settings.job]
        if not compiled:
            raise LocalJobError(f"{settings.job_file} defines no job {settings.job!r}; it "
                                f"defines {names}")
    if len(compiled) != 1:
        raise LocalJobError(f"{settings.job_file} holds {len(compiled)} jobs ({names}); "
                            "run-local runs one: name it with --job (a sweep's trial, say)")
    with locked(directory / "output", exclusive=True) as location:
        write(plan(location, compiled))
    objects = parse_manifests(render(directory / "output" / compiled[0].name,
                                     allow_remote=settings.allow_remote))
    secrets = parse_secrets_file(settings.secrets_file) if settings.secrets_file else {}
    return pods_of(objects, secrets=secrets), objects, secrets


def run_job(settings: LocalJobSettings) -> RunOutcome:
    """Run every pod of the job's StatefulSets until the training succeeds or fails."""
    with tempfile.TemporaryDirectory(prefix=f"{DIRECTORY_PREFIX}local-",
                                     dir=settings.options.temporary_directory) as temporary:
        mark_owner(Path(temporary))  # removed by the next run if this one is killed
        # Its path without links: the output directory's path may have none (output_location).
        pods, objects, secrets = rendered_pods(settings, Path(os.path.realpath(temporary)))
        if not pods:
            raise LocalJobError("the rendered job has no pods (suspend: true, or every role has "
                                "replicas: 0)")
        options = replace(settings.options, config_maps=config_maps(objects), secrets=secrets,
                          success_pods=success_pods(pods))
        return run_pods(pods, options)
