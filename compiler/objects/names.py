"""Every object name tfcompile emits, and the Kubernetes length limits they must meet.

Names are derived from the job name in one place so that Services, StatefulSets, `TF_CONFIG`
hosts and the limits checked against them can never disagree. A name that is too long is refused
with the part to shorten; it is never truncated, because a truncated name breaks `TF_CONFIG`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from tfcompile.spec.problems import Problem

if TYPE_CHECKING:  # `validate` reads this module's limits without the spec's models (0.13 s)
    from tfcompile.spec.models import RoleName, TrainingJob

DNS_LABEL_MAXIMUM = 63
"""Pod names (hostnames) and Service names are DNS labels."""

STATEFULSET_NAME_MAXIMUM = 52
"""Pods carry `controller-revision-hash: <statefulset>-<10 characters>`, a label value (≤ 63)."""

ENVIRONMENT_STRING_MAXIMUM = 131072
"""The kernel's MAX_ARG_STRLEN: one `NAME=value` string of a container, with its NUL, must fit
(`topology` holds `TF_CONFIG` to it, `validate` every variable)."""


def object_name(job: str, *parts: str) -> str:
    """The one way names are made: the job name, then each part, joined by '-'."""
    return "-".join((job, *parts))


TRIAL_DIGITS = 8
"""A trial's name ends in this many hexadecimal digits of a digest of its point's values."""


def trial_name(job: str, values: Sequence[tuple[str, str]]) -> str:
    """A sweep's trial `J-<digest>`: a digest of its point (each parameter and its value), not
    its index, so that adding a value to the grid renames no existing trial."""
    point = json.dumps(sorted(values), separators=(",", ":"), ensure_ascii=False)
    return object_name(job, hashlib.sha256(point.encode()).hexdigest()[:TRIAL_DIGITS])


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


def check_name_lengths(job: TrainingJob, given: str | None = None) -> Iterator[Problem]:
    """Refuse names Kubernetes would refuse, saying how long the job name may be; `given` is
    the name the spec gives when the job's is made from it (a sweep's trial)."""
    name = job.metadata.name
    given = name if given is None else given
    where = ("metadata", "name")
    for role_key, role in job.spec.roles.defined():
        statefulset = role_name(name, role_key)
        if len(statefulset) > STATEFULSET_NAME_MAXIMUM:
            allowed = STATEFULSET_NAME_MAXIMUM - len(statefulset) + len(given)
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
                f"{DNS_LABEL_MAXIMUM - len(service) + len(given)} characters",
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
