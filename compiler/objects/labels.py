"""The labels tfcompile puts on objects: stable selector labels and descriptive ones.

Selector labels are kept to the job and the role (or `tensorboard`), because a StatefulSet's
selector is immutable: anything else in it would make a harmless edit impossible to sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # validate reads the label names without the spec's models (0.13 s to import)
    from tfcompile.spec.models import RoleName, TrainingJob

JOB_LABEL = "tfcompile.dev/job"
ROLE_LABEL = "tfcompile.dev/role"
COMPONENT_LABEL = "tfcompile.dev/component"
GPU_LABEL = "tfcompile.dev/gpu"
SHARED_STORAGE_LABEL = "tfcompile.dev/shared-storage"
LOAD_BALANCER_LABEL = "tfcompile.dev/load-balancer"
REVISION_ANNOTATION = "tfcompile.dev/revision"
REPLICAS_ANNOTATION = "tfcompile.dev/replicas"
"""On a StatefulSet: the replicas committed in git, which a released job's live object lacks."""
SUCCESS_TASKS_ANNOTATION = "tfcompile.dev/success-tasks"
SUSPENDED_ANNOTATION = "tfcompile.dev/suspended"
LAUNCHER_ANNOTATION = "tfcompile.dev/launcher"
"""On the state ConfigMap of a job with `launcher: none`: `none` (nothing records its outcome)."""
LAUNCHER_DIGEST_ANNOTATION = "tfcompile.dev/launcher-sha256"
"""On the launcher's ConfigMap: the SHA-256 of the zip it ships, a line a reviewer reads where
the program's own text is one line of base64 (left out of the revision, as the program is)."""
SWEEP_LABEL = "tfcompile.dev/sweep"
"""On every object of a sweep's trial: the job name its spec gives (never in a trial's
selector); on the sweep's TensorBoard too, which selects its pod by it and the component."""
SWEEP_VALUES_ANNOTATION = "tfcompile.dev/sweep-values"
SWEEP_OBJECTIVE_ANNOTATION = "tfcompile.dev/sweep-objective"
"""On a trial's state ConfigMap: its point (JSON) and the sweep's objective (`<metric>
<goal>`), which `tfcompile status` reads to show the sweep as a table of trials."""
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
MANAGED_BY = "tfcompile"
TENSORBOARD_COMPONENT = "tensorboard"
LAUNCHER_COMPONENT = "launcher"
"""`app.kubernetes.io/component` of the launcher's ConfigMap, account, Role and RoleBinding."""
STATE_COMPONENT = "state"
"""`app.kubernetes.io/component` of a job's state ConfigMap, where its pods record outcomes."""


def role_selector(job: str, role: RoleName) -> dict[str, str]:
    """What a role's Service and StatefulSet select on: never changes for a role."""
    return {JOB_LABEL: job, ROLE_LABEL: role.value}


def tensorboard_selector(job: str) -> dict[str, str]:
    return {JOB_LABEL: job, COMPONENT_LABEL: TENSORBOARD_COMPONENT}


def sweep_tensorboard_selector(sweep: str) -> dict[str, str]:
    """What a sweep's one TensorBoard selects on: the sweep, not a job, so that its pod is no
    job's (`tfcompile status` reads the pods labelled with a job as that job's)."""
    return {SWEEP_LABEL: sweep, COMPONENT_LABEL: TENSORBOARD_COMPONENT}


def object_labels(job: TrainingJob, component: str, selector: dict[str, str]) -> dict[str, str]:
    """Every label of an object: user labels in name order, the recommended
    `app.kubernetes.io` ones, then the selector labels."""
    labels = dict(sorted(job.metadata.labels.items()))
    labels.update(
        {
            "app.kubernetes.io/name": "tensorflow" if component != TENSORBOARD_COMPONENT
            else TENSORBOARD_COMPONENT,
            "app.kubernetes.io/instance": job.metadata.name,
            "app.kubernetes.io/component": component,
            "app.kubernetes.io/managed-by": MANAGED_BY,
        }
    )
    labels.update(selector)
    return labels
