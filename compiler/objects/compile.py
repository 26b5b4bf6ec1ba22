"""Spec -> objects: the pure pipeline from a loaded job to its objects and kustomization.

Nothing here reads or writes files or YAML; `output.job_files` turns the objects into the files
of the job's output directory, which keeps every step testable on plain values.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tfcompile.spec.loaded_job import LoadedJob

from .builders.gang import pod_group
from .builders.launcher_config_map import launcher_config_map, settings_with_revision
from .builders.network_policy import network_policy
from .builders.release import role, role_binding, service_account, state_config_map
from .builders.script import script_config_map, script_name
from .builders.service import headless_service
from .builders.statefulset import statefulset
from .builders.storage import shared_claim
from .builders.tensorboard import tensorboard_deployment, tensorboard_service
from .labels import REVISION_ANNOTATION
from .launcher_interface import REVISION_DIGITS, SETTINGS_FILE, LauncherProgram, runs_launcher
from .names import check_name_lengths
from .topology import check_tf_config_size

__all__ = ["build_objects", "file_name", "kustomization", "revision"]


def revision(statefulsets: list[dict[str, Any]], config_maps: list[dict[str, Any]]) -> str:
    """A digest of what the training pods run: every StatefulSet's pod template (its revision
    annotation still empty) and the data of the ConfigMaps they mount (the script; the launcher's
    settings, not its program).

    The launcher's program is left out: its ConfigMap is named by its protocol version, which the
    templates name, so a new protocol rolls the job and a new text of the same protocol does not
    (`builders/launcher_config_map.py`). Nothing else: a change to TensorBoard, the
    NetworkPolicy, the
    shared claim's size, the Services or the StatefulSets' own metadata (or `suspend`, which
    only sets replicas) keeps the revision, so it restarts no training and a succeeded revision
    stays succeeded.
    """
    covered = {
        "templates": [item["spec"]["template"] for item in statefulsets],
        "configMaps": [{"name": item["metadata"]["name"], "data": item.get("data", {})}
                       for item in config_maps],
    }
    canonical = json.dumps(covered, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:REVISION_DIGITS]


def without_program(config_map: dict[str, Any]) -> dict[str, Any]:
    """The launcher's ConfigMap as the revision sees it: its name and the job's settings (not
    the program in its `binaryData`; `revision` reads no annotation, so not its digest)."""
    data = {key: text for key, text in config_map["data"].items() if key == SETTINGS_FILE}
    return {"metadata": config_map["metadata"], "data": data}


def file_name(document: dict[str, Any]) -> str:
    """`statefulset-mnist-worker.yaml`: kind and name, readable in a pull request."""
    return f"{document['kind'].lower()}-{document['metadata']['name']}.yaml"


def build_objects(loaded: LoadedJob, program: LauncherProgram) -> list[dict[str, Any]]:
    """Every object of the job, in a fixed order, with `program` as its launcher; raises
    `SpecError` for limits a spec breaks. A job with `launcher: none` has no launcher
    ConfigMap, ServiceAccount, Role or RoleBinding; its state ConfigMap stays (what
    `tfcompile status` reads: the revision, a trial's point, and that it has no launcher).
    A sweep's TensorBoard (`LoadedJob.sweep_board`) is its Deployment and Service alone."""
    job, script, trial = loaded.job, loaded.script, loaded.trial
    if loaded.sweep_board is not None:
        return [tensorboard_deployment(job, loaded.sweep_board),
                tensorboard_service(job, loaded.sweep_board)]
    given = None if trial is None else trial.sweep
    problems = [*check_name_lengths(job, given), *check_tf_config_size(job)]
    if problems:
        raise loaded.fail(problems)
    objects: list[dict[str, Any]] = []
    mounted: list[dict[str, Any]] = []
    script_map = None
    if script is not None:
        mounted.append(script_config_map(job, script))
        script_map = script_name(job, script)
    covered = list(mounted)
    launcher_map = None
    if runs_launcher(job):
        launcher_map = launcher_config_map(job, program)
        mounted.append(launcher_map)
        covered.append(without_program(launcher_map))
    objects.extend(mounted)
    state = state_config_map(job, revision="", trial=trial)
    objects.append(state)
    if launcher_map is not None:
        objects.extend([service_account(job), role(job), role_binding(job)])
    claim = shared_claim(job)
    if claim is not None:
        objects.append(claim)
    roles = job.spec.roles.defined()
    for role_key, _ in roles:
        objects.append(headless_service(job, role_key))
    group = pod_group(job)
    if group is not None:
        objects.append(group)
    launcher_name = None if launcher_map is None else launcher_map["metadata"]["name"]
    sets = [
        statefulset(job, role_key, role_spec, script, script_map, launcher_name, revision="",
                    trial=trial)
        for role_key, role_spec in roles
    ]
    objects.extend(sets)
    if job.spec.tensorboard is not None:
        objects.append(tensorboard_deployment(job))
        objects.append(tensorboard_service(job))
    if job.spec.network_policy_settings() is not None:
        objects.append(network_policy(job))
    digest = revision(sets, covered)
    for item in sets:
        item["spec"]["template"]["metadata"]["annotations"][REVISION_ANNOTATION] = digest
    state["metadata"]["annotations"][REVISION_ANNOTATION] = digest
    if launcher_map is not None:
        settings_with_revision(launcher_map, digest)
    return objects


def kustomization(resources: list[str], components: list[str]) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    }
    if components:
        document["components"] = components
    return document
