"""Every object name tfcompile emits, and the Kubernetes length limits they must meet.

Names are derived from the job name in one place so that Services, StatefulSets, `TF_CONFIG`
hosts and the limits checked against them can never disagree. A name that is too long is refused
with the part to shorten; it is never truncated, because a truncated name breaks `TF_CONFIG`.
"""

from __future__ import annotations

from collections.abc import Iterator

from tfcompile.spec.models import RoleName, TrainingJob
from tfcompile.spec.problems import Problem

DNS_LABEL_MAXIMUM = 63
"""Pod names (hostnames) and Service names are DNS labels."""

STATEFULSET_NAME_MAXIMUM = 52
"""Pods carry `controller-revision-hash: <statefulset>-<10 characters>`, a label value (≤ 63)."""


def object_name(job: str, *parts: str) -> str:
    """The one way names are made: the job name, then each part, joined by '-'."""
    return "-".join((job, *parts))


def role_name(job: str, role: RoleName) -> str:
    """StatefulSet and headless Service of a role: `J-R`."""
    return object_name(job, role.value)


def pod_name(job: str, role: RoleName, index: int) -> str:
    """Pod `J-R-i`, as the StatefulSet controller names it."""
    return object_name(job, role.value, str(index))


def pod_host(job: str, role: RoleName, index: int, port: int) -> str:
    """`J-R-i.J-R:port`: the short DNS name, resolved by the pod's search domains."""
    return f"{pod_name(job, role, index)}.{role_name(job, role)}:{port}"


def script_config_map_name(job: str, digest: str) -> str:
    return object_name(job, "script", digest)


def shared_claim_name(job: str) -> str:
    return object_name(job, "shared")


def tensorboard_name(job: str) -> str:
    return object_name(job, "tensorboard")


def network_policy_name(job: str) -> str:
    return object_name(job, "tensorflow")


def check_name_lengths(job: TrainingJob) -> Iterator[Problem]:
    """Refuse names Kubernetes would refuse, saying how long the job name may be."""
    name = job.metadata.name
    where = ("metadata", "name")
    for role_key, role in job.spec.roles.defined():
        statefulset = role_name(name, role_key)
        if len(statefulset) > STATEFULSET_NAME_MAXIMUM:
            allowed = STATEFULSET_NAME_MAXIMUM - len(statefulset) + len(name)
            yield Problem(
                where,
                f"StatefulSet name {statefulset!r} is {len(statefulset)} characters; at most "
                f"{STATEFULSET_NAME_MAXIMUM} are allowed (its pods carry the label "
                f"controller-revision-hash: <name>-<10 characters>, at most 63): shorten the job "
                f"name to at most {allowed} characters",
            )
            continue
        last_pod = pod_name(name, role_key, max(role.replicas - 1, 0))
        if len(last_pod) > DNS_LABEL_MAXIMUM:
            yield Problem(
                where,
                f"pod name {last_pod!r} is {len(last_pod)} characters; pod names are DNS labels "
                f"of at most {DNS_LABEL_MAXIMUM}: shorten the job name or use fewer replicas",
            )
    if job.spec.tensorboard is not None:
        service = tensorboard_name(name)
        if len(service) > DNS_LABEL_MAXIMUM:
            yield Problem(
                where,
                f"Service name {service!r} is {len(service)} characters; Service names are DNS "
                f"labels of at most {DNS_LABEL_MAXIMUM}: shorten the job name to at most "
                f"{DNS_LABEL_MAXIMUM - len(service) + len(name)} characters",
            )


def launcher_config_map_name(job: str, digest: str) -> str:
    return object_name(job, "launcher", digest)


LAUNCHER_ACCOUNT_PART = "launcher"
STATE_PART = "state"


def launcher_account_name(job: str) -> str:
    """The ServiceAccount, Role and RoleBinding of the job's launcher."""
    return object_name(job, LAUNCHER_ACCOUNT_PART)


def state_config_map_name(job: str) -> str:
    return object_name(job, STATE_PART)


LAUNCHER_SCALE_POLICY = "tfcompile-launcher-scale"
LAUNCHER_RECORDS_POLICY = "tfcompile-launcher-records"
"""The cluster's two ValidatingAdmissionPolicies (and their bindings) for every job's pods."""
LAUNCHER_POLICY_FILE = "deploy/cluster/launcher-policy.yaml"
"""Where `init` writes them, in the repository it makes; applied once per cluster."""
