"""Whether the cluster enforces the launcher policy this tfcompile writes, and what a job's pods
could do when it does not.

RBAC lets a job's pods patch their job's state ConfigMap and (with release) the scale of its
StatefulSets, by name only; the launcher policy (`deploy/cluster/launcher-policy.yaml`, applied
once per cluster by an administrator) holds them to their own task's record and to scaling to
0. Nothing in a job's output shows whether a cluster has it, and a dry run of the job passes
either way, so `validate --server` and `status` ask the API server for the two policies and
their bindings and say when one is missing, cannot be read, cannot exist (no
ValidatingAdmissionPolicy API: Kubernetes before 1.30), or differs from this version's (an
older tfcompile's, or edited), and what a pod's token may do then.

How the objects are read is the caller's (an API request, or kubectl): `Lookup` gives one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from enum import Enum
from typing import Any

from tfcompile.compiler.kubernetes_versions import ADMISSION_POLICY_KUBERNETES_VERSION
from tfcompile.compiler.objects.builders.launcher_policy import launcher_policy_objects
from tfcompile.compiler.objects.names import LAUNCHER_POLICY_FILE

POLICY_GROUP = "admissionregistration.k8s.io/v1"


class Found(Enum):
    """What the API server answered for one object."""

    PRESENT = "present"
    MISSING = "missing"
    FORBIDDEN = "forbidden"
    NO_API = "no api"


Lookup = Callable[[str, str], tuple[Found, dict[str, Any] | None]]
"""(kind, name) -> what the cluster holds under that name (the object when present)."""

WITHOUT_IT = ("a job's pods, and any token of an account bound to a job's launcher Role, may "
              "then write any task's record in their job's state (a forged success or failure "
              "included) and, for a job that releases itself (onSuccess or onFailure: "
              "release), scale its StatefulSets to any number of replicas")

_COMPARED = {"ValidatingAdmissionPolicy": ("matchConstraints", "matchConditions", "variables",
                                           "validations", "failurePolicy"),
             "ValidatingAdmissionPolicyBinding": ("policyName", "validationActions")}
"""The fields of each kind whose values this version sets and compares."""


def _holds(expected: Any, actual: Any) -> bool:
    """Whether `actual` has every value `expected` sets (the API server adds defaults)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            _holds(value, actual.get(key)) for key, value in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(_holds(one, other) for one, other in zip(expected, actual, strict=True)))
    return bool(expected == actual)


def launcher_policy_notes(lookup: Lookup) -> list[str]:
    """What the cluster lacks of the launcher policy, one note each (none when it holds it)."""
    missing: list[str] = []
    differing: list[str] = []
    unreadable: list[str] = []
    for wanted in launcher_policy_objects():
        kind, name = str(wanted["kind"]), str(wanted["metadata"]["name"])
        found, actual = lookup(kind, name)
        if found is Found.NO_API:
            return [f"the cluster serves no {kind} of {POLICY_GROUP} (Kubernetes "
                    f"{ADMISSION_POLICY_KUBERNETES_VERSION} or later has it), so the launcher "
                    f"policy ({LAUNCHER_POLICY_FILE}) cannot be enforced there: {WITHOUT_IT}"]
        if found is Found.FORBIDDEN:
            unreadable.append(f"{kind} {name}")
        elif found is Found.MISSING or actual is None:
            missing.append(f"{kind} {name}")
        elif not all(_holds(wanted["spec"].get(field), (actual.get("spec") or {}).get(field))
                     for field in _COMPARED[kind]):
            differing.append(f"{kind} {name}")
    notes = []
    if missing:
        notes.append(f"the cluster lacks the launcher policy ({', '.join(missing)}): {WITHOUT_IT}; "
                     f"apply {LAUNCHER_POLICY_FILE} once (`kubectl apply --server-side -f "
                     f"{LAUNCHER_POLICY_FILE}`, as a cluster administrator)")
    if differing:
        notes.append(f"the cluster's launcher policy ({', '.join(differing)}) is not the one this "
                     f"tfcompile writes (an older version's, or edited), so it may not hold what "
                     f"docs/gitops.md says; apply this version's: `tfcompile init NEW_DIRECTORY` "
                     f"writes it to {LAUNCHER_POLICY_FILE}")
    if unreadable:
        notes.append(f"this context may not read {', '.join(unreadable)}, so whether the cluster "
                     f"enforces the launcher policy is unknown; without it {WITHOUT_IT}")
    return notes


_PLURALS = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
            "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}


def kubectl_lookup(timeout_seconds: float) -> Lookup:
    """The cluster's launcher policy objects, read with `kubectl get` in the current context
    (as `status` reads everything); a kubectl that fails otherwise reads as forbidden."""

    def lookup(kind: str, name: str) -> tuple[Found, dict[str, Any] | None]:
        kubectl = shutil.which("kubectl") or "kubectl"
        resource = f"{_PLURALS[kind]}.{POLICY_GROUP.split('/')[1]}.{POLICY_GROUP.split('/')[0]}"
        try:
            completed = subprocess.run([kubectl, "get", resource, name, "--output", "json"],
                                       capture_output=True, check=False, timeout=timeout_seconds)
        except (OSError, subprocess.TimeoutExpired):
            return Found.FORBIDDEN, None
        error = completed.stderr.decode("utf-8", errors="replace")
        if completed.returncode == 0:
            try:
                found = json.loads(completed.stdout)
            except ValueError:
                return Found.FORBIDDEN, None
            return (Found.PRESENT, found) if isinstance(found, dict) else (Found.FORBIDDEN, None)
        if "(NotFound)" in error:
            return Found.MISSING, None
        if "doesn't have a resource type" in error:
            return Found.NO_API, None
        return Found.FORBIDDEN, None

    return lookup


__all__ = ["WITHOUT_IT", "Found", "Lookup", "kubectl_lookup", "launcher_policy_notes"]
