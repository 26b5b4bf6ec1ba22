"""Rules across fields of a job spec, each reported against the field a user must change.

These are the rules of TensorFlow's distribution strategies and of Kubernetes that a field's own
type cannot express. They run after the models accepted the document, and all of them run, so a
user sees every problem at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .lifecycle_rules import check_lifecycle
from .models import EnvironmentValue, JobSpec, Launcher, RoleName, Strategy, TrainingJob
from .mount_paths import form_problem, inside, overlaps, reserved_problem
from .pod_rules import RESERVED_VOLUMES, check_kubernetes_fields
from .pod_template import mapping, mappings
from .problems import FieldPath, Problem, format_path
from .sweep import SWEEP_VARIABLES, check_sweep

REVISION_VARIABLE = "TFCOMPILE_REVISION"
"""The pod's revision, which the launcher and its revision gate read."""

REVISION_PORT = 2223
"""Where every task's launcher answers its revision (the revision gate); not for training."""

RESERVED_ENVIRONMENT = (
    "TASK_INDEX",
    "JOB_NAME",
    "WORKER_NUMBER",
    "TOT_WORKERS",
    "NUM_WORKERS",
    "PS_HOSTS",
    "WORKER_HOSTS",
    "TF_CONFIG",
    REVISION_VARIABLE,
    *SWEEP_VARIABLES,
)
"""Variables tfcompile sets in every TensorFlow container (the last two in a sweep's trials)."""

RESERVED_LABEL_PREFIXES = ("tfcompile.dev/", "app.kubernetes.io/")

TMP_MOUNT_PATH = "/tmp"
"""An emptyDir in every pod tfcompile generates (the image's own /tmp may be read-only)."""

SMB_OVERLAY = "azure-smb"
STORAGE_CLASS_OVERLAYS = ("azure", SMB_OVERLAY)
"""Components shipped with tfcompile that choose the shared claim's storage class."""

GPU_RESOURCE = "nvidia.com/gpu"

def check_rules(job: TrainingJob) -> Iterator[Problem]:
    """Every cross-field problem of a job spec that the models accepted."""
    spec = job.spec
    yield from _check_labels(job)
    yield from _check_roles(spec)
    yield from _check_command(spec)
    if spec.port == REVISION_PORT:
        yield Problem(("spec", "port"), f"port {REVISION_PORT} is where every task answers its "
                      "revision (the launcher's revision gate); choose another training port")
    yield from _check_environment(("spec", "env"), spec.env)
    for name, role in spec.roles.defined():
        path = ("spec", "roles", name.value)
        yield from _check_environment((*path, "env"), role.env)
        if role.resources is not None:
            for kind in ("requests", "limits"):
                if GPU_RESOURCE in getattr(role.resources, kind):
                    yield Problem(
                        (*path, "resources", kind, GPU_RESOURCE),
                        f"set GPUs with roles.{name.value}.gpus, which puts them in limits",
                    )
    yield from _check_storage(spec)
    yield from _check_tensorboard(spec)
    yield from _check_overlays(spec)
    yield from check_lifecycle(spec)
    yield from check_sweep(job, RESERVED_ENVIRONMENT)
    yield from check_kubernetes_fields(job, RESERVED_ENVIRONMENT)


def _check_labels(job: TrainingJob) -> Iterator[Problem]:
    for kind in ("labels", "annotations"):
        for key in getattr(job.metadata, kind):
            if key.startswith(RESERVED_LABEL_PREFIXES):
                yield Problem(
                    ("metadata", kind, key),
                    f"keys under {' and '.join(RESERVED_LABEL_PREFIXES)} are set by tfcompile; "
                    "choose another key",
                    key=True,
                )


def _check_roles(spec: JobSpec) -> Iterator[Problem]:
    roles = spec.roles
    if not roles.defined():
        yield Problem(("spec", "roles"), "define at least one role: chief, worker, ps or evaluator")
        return
    for single in (RoleName.CHIEF, RoleName.EVALUATOR):
        if roles.replicas(single) > 1:
            yield Problem(
                ("spec", "roles", single.value, "replicas"),
                f"TensorFlow allows at most one {single.value}: replicas must be 0 or 1",
            )
    strategy = spec.resolved_strategy()
    chief, workers, ps = (roles.replicas(name) for name in (RoleName.CHIEF, RoleName.WORKER,
                                                             RoleName.PS))
    if strategy is Strategy.MULTI_WORKER_MIRRORED:
        if roles.ps is not None:
            yield Problem(
                ("spec", "roles", "ps"),
                "MultiWorkerMirrored has no parameter servers: remove roles.ps or set "
                "strategy: ParameterServer",
            )
        if chief + workers == 0:
            yield Problem(
                ("spec", "roles"),
                "MultiWorkerMirrored needs at least one chief or worker replica",
            )
    else:
        if ps == 0:
            yield Problem(
                ("spec", "roles", "ps") if roles.ps is not None else ("spec", "roles"),
                "ParameterServer needs at least one ps replica",
            )
        if workers == 0:
            yield Problem(
                ("spec", "roles", "worker") if roles.worker is not None else ("spec", "roles"),
                "ParameterServer needs at least one worker replica",
            )


NO_ENTRYPOINT = (
    "tfcompile's launcher runs the command, so the image's own entrypoint does not run: write it "
    "as the command (`docker inspect` shows the image's Entrypoint and Cmd)"
)


def _check_command(spec: JobSpec) -> Iterator[Problem]:
    """A command, unless the job runs without the launcher: then, as in a plain StatefulSet (or a
    Kubeflow TFJob), a container without one runs its image's entrypoint."""
    if spec.command is not None or spec.script is not None or spec.launcher is Launcher.NONE:
        return
    without = [name for name, role in spec.roles.defined() if role.command is None]
    if without and len(without) == len(spec.roles.defined()):
        yield Problem(("spec",), "the job has neither command nor script: set spec.command (or "
                      f"spec.script, a file to run with python); {NO_ENTRYPOINT}")
        return
    for name in without:
        yield Problem(
            ("spec", "roles", name.value),
            "no command: the job has neither command nor script, and this role has no command "
            f"of its own: set one here, or spec.command; {NO_ENTRYPOINT}",
        )


def _check_environment(
    path: tuple[str, ...], environment: dict[str, EnvironmentValue]
) -> Iterator[Problem]:
    for name in environment:
        if name in RESERVED_ENVIRONMENT:
            yield Problem(
                (*path, name),
                "this variable is set by tfcompile from the job's roles; remove it "
                f"(tfcompile sets: {', '.join(RESERVED_ENVIRONMENT)})",
                key=True,
            )


def _check_storage(spec: JobSpec) -> Iterator[Problem]:
    shared, scratch = spec.storage.shared, spec.storage.scratch
    mounts: list[tuple[tuple[str, ...], str]] = []
    if shared is not None:
        path = ("spec", "storage", "shared")
        mounts.append(((*path, "mountPath"), shared.mount_path))
        if shared.existing_claim is not None:
            for field, value in (("size", shared.size),
                                 ("storageClassName", shared.storage_class_name),
                                 ("whenDeleted", shared.when_deleted)):
                if value is not None:
                    yield Problem(
                        (*path, field),
                        f"{field} describes a new claim; with existingClaim the claim exists "
                        "already: remove one of them",
                    )
        elif shared.size is None:
            yield Problem(path, "give size (a new ReadWriteMany claim) or existingClaim")
        chosen = [name for name in STORAGE_CLASS_OVERLAYS if name in spec.overlays]
        if shared.storage_class_name is not None and chosen:
            yield Problem(
                (*path, "storageClassName"),
                f"the {chosen[0]} overlay chooses the storage class (Azure Files); remove "
                "storageClassName or the overlay",
            )
    if all(name in spec.overlays for name in STORAGE_CLASS_OVERLAYS):
        yield Problem(("spec", "overlays", spec.overlays.index(SMB_OVERLAY)),
                      "azure (Azure Files over NFS) and azure-smb (over SMB) each choose the "
                      "shared claim's storage class: name one of them")
    if scratch is not None:
        mounts.append((("spec", "storage", "scratch", "mountPath"), scratch.mount_path))
    for where, mount_path in mounts:
        problem = reserved_problem(mount_path, token=True) or form_problem(mount_path)
        if problem is not None:
            yield Problem(where, problem)
    if len(mounts) == 2 and overlaps(mounts[0][1], mounts[1][1]):
        yield Problem(mounts[1][0], "shared and scratch storage must not be mounted inside "
                      "each other")
    yield from _check_claim_mounts(spec, mounts)


def _check_claim_mounts(spec: JobSpec,
                        every_role: list[tuple[tuple[str, ...], str]]) -> Iterator[Problem]:
    """`storage.volumes`: names unique and not tfcompile's, roles defined, paths apart from each
    other and from what tfcompile mounts in the same pods."""
    defined = {name for name, _ in spec.roles.defined()}
    names: dict[str, int] = {}
    placed: list[tuple[FieldPath, str, set[RoleName]]] = [
        (where, path, set(defined)) for where, path in every_role]
    for index, volume in enumerate(spec.storage.volumes):
        path: FieldPath = ("spec", "storage", "volumes", index)
        if volume.name in RESERVED_VOLUMES:
            yield Problem((*path, "name"), f"the volume names {', '.join(RESERVED_VOLUMES)} are "
                          "tfcompile's; choose another name")
        elif volume.name in names:
            yield Problem((*path, "name"), f"this volume name is used twice (also at "
                          f"storage.volumes[{names[volume.name]}])")
        names.setdefault(volume.name, index)
        roles = set(defined) if volume.roles is None else set(volume.roles)
        if volume.roles is not None:
            if not volume.roles:
                yield Problem((*path, "roles"), "list at least one role, or leave roles out to "
                              "mount the claim in every role")
            for role_index, role in enumerate(volume.roles):
                if role not in defined:
                    yield Problem((*path, "roles", role_index),
                                  f"the job has no {role.value} role; roles defined: "
                                  f"{', '.join(sorted(name.value for name in defined))}")
                elif volume.roles.index(role) != role_index:
                    yield Problem((*path, "roles", role_index), "this role is listed twice")
        if volume.sub_path is not None:
            parts = volume.sub_path.split("/")
            if volume.sub_path.startswith("/") or ".." in parts or "\x00" in volume.sub_path:
                yield Problem((*path, "subPath"), "a folder inside the claim: a relative path "
                              "without `..` components")
        where = (*path, "mountPath")
        mount_path = volume.mount_path
        problem = reserved_problem(mount_path, token=True)
        if problem is None and inside(TMP_MOUNT_PATH, mount_path):
            problem = (f"tfcompile mounts an emptyDir at {TMP_MOUNT_PATH} in every pod; a mount "
                       "at it or around it would hide it: choose a path apart from it (a "
                       "folder inside it is allowed)")
        problem = problem or form_problem(mount_path)
        if problem is not None:
            yield Problem(where, problem)
            continue
        for other_where, other_path, other_roles in placed:
            if roles & other_roles and overlaps(mount_path, other_path):
                yield Problem(where, f"mounted in the same pods as {format_path(other_where)} "
                              "and inside it (or it inside this): give each volume a path of "
                              "its own")
                break
        placed.append((where, mount_path, roles))
    templates: list[tuple[FieldPath, Any]] = [(("spec", "podTemplate"), spec.pod_template)]
    templates.extend((("spec", "roles", name.value, "podTemplate"), role.pod_template)
                     for name, role in spec.roles.defined())
    for template_path, fragment in templates:
        for index, entry in mappings(mapping(mapping(fragment).get("spec")).get("volumes")):
            name = entry.get("name")
            if isinstance(name, str) and name in names:  # other shapes: pod_rules reports them
                yield Problem((*template_path, "spec", "volumes", index, "name"),
                              "storage.volumes names a volume so too: choose another name")


def _check_tensorboard(spec: JobSpec) -> Iterator[Problem]:
    if spec.tensorboard is None:
        return
    shared = spec.storage.shared
    where = ("spec", "tensorboard", "logDir")
    if shared is None:
        yield Problem(where, "TensorBoard reads logs from the shared volume: add storage.shared")
    elif not inside(spec.tensorboard.log_dir, shared.mount_path):
        yield Problem(
            where,
            "must be inside storage.shared.mountPath, where the training writes and "
            "TensorBoard can read",
        )


def _check_overlays(spec: JobSpec) -> Iterator[Problem]:
    seen: dict[str, int] = {}
    for index, name in enumerate(spec.overlays):
        if name in seen:
            yield Problem(("spec", "overlays", index),
                          f"this overlay is named twice (also at overlays[{seen[name]}])")
        seen.setdefault(name, index)
