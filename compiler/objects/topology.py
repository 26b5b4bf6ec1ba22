"""The TensorFlow cluster of a job: `TF_CONFIG` and the variables earlier tools set.

Every pod of a role shares one template, so the task index cannot be written into it; it comes
from the pod-index label through the downward API (`TASK_INDEX`), and `TF_CONFIG` refers to it
with Kubernetes' `$(VAR)` expansion. Hosts are short DNS names (`J-R-i.J-R:port`), which resolve
through the pod's search domains in any namespace and cluster domain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tfcompile.spec.models import Compatibility, RoleName, TrainingJob
from tfcompile.spec.problems import Problem

from .labels import POD_INDEX_LABEL
from .names import ENVIRONMENT_STRING_MAXIMUM, pod_host

INDEX_VARIABLE = "TASK_INDEX"
INDEX_PLACEHOLDER = "__TFCOMPILE_TASK_INDEX__"



def cluster(job: TrainingJob) -> dict[str, list[str]]:
    """`{role: [host:port, ...]}` with roles sorted by name, roles without replicas left out."""
    name, port = job.metadata.name, job.spec.port
    hosts = {
        role_name.value: [pod_host(name, role_name, index, port) for index in range(role.replicas)]
        for role_name, role in job.spec.roles.defined()
        if role.replicas > 0
    }
    return dict(sorted(hosts.items()))


def total_pods(job: TrainingJob) -> int:
    return sum(role.replicas for _, role in job.spec.roles.defined())


def needs_tf_config(job: TrainingJob) -> bool:
    """A job of exactly one pod trains alone, without `TF_CONFIG` (as the TFJob operator does)."""
    return total_pods(job) > 1


def tf_config(job: TrainingJob, role: RoleName, index: int | str) -> str:
    """Compact `TF_CONFIG` JSON for a task; `index` may be the `$(TASK_INDEX)` reference."""
    document: dict[str, Any] = {
        "cluster": cluster(job),
        "task": {"type": role.value, "index": INDEX_PLACEHOLDER},
        "environment": "cloud",
    }
    text = json.dumps(document, separators=(",", ":"))
    return text.replace(f'"{INDEX_PLACEHOLDER}"', str(index))


def tf_config_template(job: TrainingJob, role: RoleName) -> str:
    """The `TF_CONFIG` value of a role's pod template, expanded by the kubelet per pod."""
    return tf_config(job, role, f"$({INDEX_VARIABLE})")


def _hosts_value(job: TrainingJob, role: RoleName) -> str:
    return ",".join(cluster(job).get(role.value, []))


def compatibility_environment(job: TrainingJob, role: RoleName) -> list[dict[str, Any]]:
    """The variables of earlier tools the job asks for (`compatibility:`), in expansion order:
    TF-Spawner's `WORKER_NUMBER` and `TOT_WORKERS`, ElasticDL's `NUM_WORKERS`, and the flags of
    TensorFlow 1 scripts, `JOB_NAME`, `PS_HOSTS` and `WORKER_HOSTS`."""
    asked = set(job.spec.compatibility)
    workers = str(job.spec.roles.replicas(RoleName.WORKER))
    entries: list[dict[str, Any]] = []
    if Compatibility.TF1_FLAGS in asked:
        entries.append({"name": "JOB_NAME", "value": role.value})
    if Compatibility.TF_SPAWNER in asked:
        entries.append({"name": "WORKER_NUMBER", "value": f"$({INDEX_VARIABLE})"})
        entries.append({"name": "TOT_WORKERS", "value": workers})
    if Compatibility.ELASTICDL in asked:
        entries.append({"name": "NUM_WORKERS", "value": workers})
    if Compatibility.TF1_FLAGS in asked:
        entries.append({"name": "PS_HOSTS", "value": _hosts_value(job, RoleName.PS)})
        entries.append({"name": "WORKER_HOSTS", "value": _hosts_value(job, RoleName.WORKER)})
    return entries


def environment(job: TrainingJob, role: RoleName) -> list[dict[str, Any]]:
    """The variables tfcompile sets first in every TensorFlow container, in expansion order."""
    entries: list[dict[str, Any]] = [
        {
            "name": INDEX_VARIABLE,
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
        },
        *compatibility_environment(job, role),
    ]
    if needs_tf_config(job):
        entries.append({"name": "TF_CONFIG", "value": tf_config_template(job, role)})
    return entries


def _expanded_size(job: TrainingJob, role: RoleName) -> int:
    largest_index = max(job.spec.roles.replicas(role) - 1, 0)
    return len(f"TF_CONFIG={tf_config(job, role, largest_index)}".encode()) + 1


def check_tf_config_size(job: TrainingJob) -> Iterator[Problem]:
    """`TF_CONFIG` as the kubelet expands it must fit one environment string."""
    if not needs_tf_config(job):
        return
    sizes = [_expanded_size(job, role) for role, _ in job.spec.roles.defined()]
    largest = max(sizes)
    if largest <= ENVIRONMENT_STRING_MAXIMUM:
        return
    tasks = total_pods(job)
    empty = {"cluster": {}, "task": {"type": RoleName.EVALUATOR.value, "index": tasks},
             "environment": "cloud"}
    fixed = len("TF_CONFIG=" + json.dumps(empty, separators=(",", ":"))) + 1
    per_task = (largest - fixed) / tasks
    fitting = int((ENVIRONMENT_STRING_MAXIMUM - fixed) // per_task)
    yield Problem(
        ("spec", "roles"),
        f"TF_CONFIG for {tasks} tasks would be {largest} bytes, but one environment string "
        f"holds at most {ENVIRONMENT_STRING_MAXIMUM} (the kernel's MAX_ARG_STRLEN); with this "
        f"job name and port about {fitting} tasks fit: use fewer replicas or a shorter job name",
    )
