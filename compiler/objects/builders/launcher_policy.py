"""The API server's rule for every job's pods: scale their own job to zero only, and write only
their own record.

RBAC grants verbs on named objects, nothing finer: the launcher's Role lets a pod patch its job's
state ConfigMap and (with `onSuccess` or `onFailure: release`) the `scale` of its job's
StatefulSets, but it cannot say which key of the ConfigMap, nor which replica count. Without
more, a pod's token could scale its job to 40 replicas, or record another task's success. Two
ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, Kubernetes 1.30 and later), applied
once per cluster from the file `init` writes, say the rest in CEL:

- `scale`: a pod may set the replicas of its own job's StatefulSets (`<job>-<role>`) to 0, and
  to nothing else;
- `records`: a pod may patch only its own job's state ConfigMap (`<job>-state`), only the `data`
  key of its own task (`<role>-<index>`), only with a value in the launcher's format, removing
  no key; no create, no delete, no metadata. Beside its own final failure it may set the two
  keys the Argo CD health check reads (`failed-revision`, `failed-task`), only to what that
  failure record says; beside its own success it may set a sweep trial's `result`, only as
  `<the revision that succeeded> {…}` or `<that revision> refused: <one of the launcher's
  reasons>`, and at most `RESULT_MAXIMUM_BYTES` after the revision, counted in UTF-8 bytes as
  the launcher counts them: CEL's `size()` of a string counts code points (a 4-byte character
  as one), so the rule takes the size of the string's `bytes()`.

Whose requests. An account's labels are not part of a request, but two things are: the user
name, `system:serviceaccount:<namespace>:<account>`, and, for a token bound to a pod (the
projected token every pod gets), the user extra `authentication.kubernetes.io/pod-name`. A
request is held to these rules when it comes from an account tfcompile names (`<job>-launcher`),
from any account of the object's own namespace, or from a pod named like a task of a job
(`<job>-<role>-<index>`). Every account that holds a job's launcher rights is so held: the
Role's binding names `<job>-launcher` or the account a `podTemplate` names, both in the job's
namespace; and a token of such an account that is not bound to one of the job's task pods
(`kubectl create token trainer`, a TensorBoard or notebook pod running as it) changes nothing.
It needs a token bound to a task pod, whose name gives the job and the task. Only tfcompile's
objects are concerned: ConfigMaps labelled as a job's state (before or after the change) and
StatefulSets whose selector carries the job label. Everyone else (people, and Argo CD, Flux
and the cluster's controllers, whose accounts live in namespaces of their own) is not matched.
"""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import RoleName

from ..labels import JOB_LABEL, MANAGED_BY, STATE_COMPONENT
from ..launcher_interface import (
    FAILED,
    FAILED_REVISION_KEY,
    FAILED_TASK_KEY,
    PROGRESS_CHARACTERS,
    PROGRESS_MAXIMUM_BYTES,
    PROGRESS_REVISION_SUFFIX,
    PROGRESS_SUFFIX,
    RECORD_PATTERN,
    RESULT_KEY,
    RESULT_MAXIMUM_BYTES,
    RESULT_PATTERN,
    RESULT_RECORD_MAXIMUM_BYTES,
    REVISION_DIGITS,
    STOPPED,
    SUCCEEDED,
    TRAINING,
)
from ..names import (
    LAUNCHER_ACCOUNT_PART,
    LAUNCHER_RECORDS_POLICY,
    LAUNCHER_SCALE_POLICY,
    STATE_PART,
)

POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
"""The user extra of a token bound to a pod: the pod's name."""

_ROLES = [role.value for role in RoleName]
_ROLE_CHOICE = "|".join(_ROLES)
_TASK_SUFFIX = f"-({_ROLE_CHOICE})-(0|[1-9][0-9]*)$"
"""The end of a task's pod name, `-<role>-<index>`, as the StatefulSet controller names it."""
_ROLE_LIST = ", ".join(f"'{role}'" for role in _ROLES)

_FROM_A_JOB_POD = f"""\
request.userInfo.username.matches('^system:serviceaccount:[^:]+:[^:]+-{LAUNCHER_ACCOUNT_PART}$') ||
request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':') ||
(request.userInfo.username.startsWith('system:serviceaccount:') &&
 request.userInfo.?extra[?'{POD_NAME_EXTRA}'].orValue([])
   .exists(pod, pod.matches('{_TASK_SUFFIX}')))"""

_VARIABLES = [
    {"name": "pods",
     "expression": f"request.userInfo.?extra[?'{POD_NAME_EXTRA}'].orValue([])"},
    {"name": "pod", "expression": "size(variables.pods) == 1 ? variables.pods[0] : ''"},
    {"name": "suffix", "expression": f"variables.pod.find('{_TASK_SUFFIX}')"},
    {"name": "job",
     "expression": "variables.pod.substring(0, size(variables.pod) - size(variables.suffix))"},
    {"name": "task",
     "expression": "variables.suffix == '' ? '' : variables.suffix.substring(1)"},
]

_FROM_ITS_POD = {
    "expression": "variables.suffix != '' && variables.job != ''",
    "reason": "Forbidden",
    "message": "a job's pods change their job only with a token bound to the pod (a pod "
               "<job>-<role>-<index>); this request has none",
}


def _policy(name: str, rules: list[dict[str, Any]], object_condition: dict[str, str],
            variables: list[dict[str, str]], validations: list[dict[str, Any]]
            ) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "matchConditions": [{"name": "from-a-job-pod", "expression": _FROM_A_JOB_POD},
                                object_condition],
            "variables": [*_VARIABLES, *variables],
            "validations": [_FROM_ITS_POD, *validations],
        },
    }


def _binding(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }


def scale_policy() -> dict[str, Any]:
    """A job's pods set the replicas of their own job's StatefulSets to 0, nothing else."""
    return _policy(
        LAUNCHER_SCALE_POLICY,
        [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"],
          "resources": ["statefulsets/scale"]}],
        {"name": "a-job-statefulset",
         "expression": "oldObject.?status.?selector.orValue('').split(',')"
                       f".exists(term, term.startsWith('{JOB_LABEL}='))"},
        [],
        [
            {"expression": f"[{_ROLE_LIST}].exists(role, request.name == variables.job + '-' "
                           "+ role)",
             "reason": "Forbidden",
             "messageExpression": "'pod ' + variables.pod + ' may scale only the StatefulSets "
                                  "of its own job (' + variables.job + '-<role>), not ' + "
                                  "request.name"},
            {"expression": "object.?spec.?replicas.orValue(0) == 0",
             "reason": "Forbidden",
             "messageExpression": "'pod ' + variables.pod + ' may scale ' + request.name + "
                                  "' to 0 only, not to ' + "
                                  "string(object.?spec.?replicas.orValue(0))"},
        ],
    )


_FAILED_PREFIX_LENGTH = len(f"{FAILED} ") + REVISION_DIGITS + 1
"""`failed <revision> ` before the detail of a failure record."""
_FAILURE_SUMMARY = f"""\
!variables.changed.exists(key, key in ['{FAILED_REVISION_KEY}', '{FAILED_TASK_KEY}']) ||
(['{FAILED_REVISION_KEY}', '{FAILED_TASK_KEY}', variables.task].all(key, key in variables.new) &&
 variables.new[variables.task].startsWith(
   '{FAILED} ' + variables.new['{FAILED_REVISION_KEY}'] + ' ') &&
 size(variables.new[variables.task]) > {_FAILED_PREFIX_LENGTH} &&
 variables.new['{FAILED_TASK_KEY}'] == variables.task + ' (' +
   variables.new[variables.task].substring({_FAILED_PREFIX_LENGTH}) + ')')"""
"""The failure summary keys, when a request sets them, repeat the pod's own failure record:
the revision it names, and the task with the record's detail."""
_RESULT = f"""\
!('{RESULT_KEY}' in variables.changed) ||
(variables.task in variables.new &&
 size(bytes(variables.new['{RESULT_KEY}'])) <= {RESULT_RECORD_MAXIMUM_BYTES} &&
 variables.new['{RESULT_KEY}'].matches('{RESULT_PATTERN}') &&
 variables.new[variables.task] ==
   '{SUCCEEDED} ' + variables.new['{RESULT_KEY}'].substring(0, {REVISION_DIGITS}))"""
"""A trial's result, when a request sets it, is `<revision> {{…}}` (or the launcher's note that
it refused the file) of bounded size in UTF-8 bytes, beside the pod's own success record of
that revision."""


_LINE = f"variables.task + '{PROGRESS_SUFFIX}'"
_LINE_REVISION = f"variables.task + '{PROGRESS_REVISION_SUFFIX}'"
_PROGRESS = f"""\
!(({_LINE}) in variables.changed || ({_LINE_REVISION}) in variables.changed) ||
(({_LINE}) in variables.new && ({_LINE_REVISION}) in variables.new &&
 variables.task in variables.new &&
 size(variables.new[{_LINE}]) <= {PROGRESS_MAXIMUM_BYTES} &&
 variables.new[{_LINE}].matches('^[{PROGRESS_CHARACTERS}]+$') &&
 variables.new[{_LINE_REVISION}].matches('^[0-9a-f]{{{REVISION_DIGITS}}}$') &&
 (['{TRAINING} ', '{STOPPED} '].exists(record, variables.new[variables.task].startsWith(
    record + variables.new[{_LINE_REVISION}] + ' ')) ||
  variables.new[variables.task] == '{SUCCEEDED} ' + variables.new[{_LINE_REVISION}]))"""
"""A task's progress, when a request sets it, is a short line of plain characters (ASCII, so
its size in characters is its size in bytes) and the revision the task's own record is of."""


def records_policy() -> dict[str, Any]:
    """A job's pods patch only their own task's record in their job's state ConfigMap."""
    state_labels = (f"o.metadata.?labels[?'app.kubernetes.io/managed-by'].orValue('') == "
                    f"'{MANAGED_BY}' &&\n"
                    f" o.metadata.?labels[?'app.kubernetes.io/component'].orValue('') == "
                    f"'{STATE_COMPONENT}'")
    unchanged = " &&\n".join(
        f"object{path}.orValue({empty}) == oldObject{path}.orValue({empty})"
        for path, empty in ((".metadata.?labels", "{}"), (".metadata.?annotations", "{}"),
                            (".metadata.?finalizers", "[]"),
                            (".metadata.?ownerReferences", "[]"),
                            (".?binaryData", "{}"), (".?immutable", "false")))
    return _policy(
        LAUNCHER_RECORDS_POLICY,
        [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"],
          "resources": ["configmaps"]}],
        {"name": "a-job-state",
         "expression": f"[object, oldObject].exists(o, o != null &&\n {state_labels})"},
        [{"name": "old", "expression": "oldObject == null ? {} : oldObject.?data.orValue({})"},
         {"name": "new", "expression": "object == null ? {} : object.?data.orValue({})"},
         {"name": "changed",
          "expression": "variables.new.filter(key, !(key in variables.old) ||\n"
                        "  variables.old[key] != variables.new[key])"}],
        [
            {"expression": "request.operation == 'UPDATE'",
             "reason": "Forbidden",
             "messageExpression": "'pod ' + variables.pod + ' may patch ' + request.name + "
                                  "', not ' + request.operation + ' it'"},
            {"expression": f"request.name == variables.job + '-{STATE_PART}'",
             "reason": "Forbidden",
             "messageExpression": "'pod ' + variables.pod + ' may write only the state of its "
                                  f"own job, ' + variables.job + '-{STATE_PART}, not ' + "
                                  "request.name"},
            {"expression": unchanged,
             "reason": "Forbidden",
             "messageExpression": "'pod ' + variables.pod + ' may change only the data of ' + "
                                  "request.name"},
            {"expression": "variables.old.all(key, key in variables.new) &&\n"
                           "variables.changed.all(key, key in\n"
                           f"  [variables.task, '{FAILED_REVISION_KEY}', '{FAILED_TASK_KEY}',"
                           f" '{RESULT_KEY}', {_LINE}, {_LINE_REVISION}])",
             "reason": "Forbidden",
             "messageExpression": "'pod ' + variables.pod + ' may write only the record of its "
                                  "own task, ' + variables.task + ', and remove none'"},
            {"expression": _FAILURE_SUMMARY,
             "reason": "Forbidden",
             "messageExpression": f"'pod ' + variables.pod + ' may set {FAILED_REVISION_KEY} "
                                  f"and {FAILED_TASK_KEY} only beside its own failure record, "
                                  "to what it says'"},
            {"expression": _PROGRESS,
             "reason": "Forbidden",
             "messageExpression": f"'pod ' + variables.pod + ' may set its progress only as a "
                                  f"line of at most {PROGRESS_MAXIMUM_BYTES} plain characters "
                                  "and the revision its own record is of'"},
            {"expression": _RESULT,
             "reason": "Forbidden",
             "messageExpression": f"'pod ' + variables.pod + ' may set {RESULT_KEY} only "
                                  f"beside its own success record, as \"<revision> {{...}}\" "
                                  f"of at most {RESULT_MAXIMUM_BYTES} bytes (UTF-8) or "
                                  f"\"<revision> refused: <reason>\"'"},
            {"expression": "!(variables.task in variables.new) ||\n"
                           f"variables.new[variables.task].matches('{RECORD_PATTERN}')",
             "reason": "Forbidden",
             "messageExpression": "'pod ' + variables.pod + ' may record only \"succeeded "
                                  "<revision>\", \"failed <revision> exit <status> after "
                                  "<restarts> restarts\", \"failed <revision> deadline "
                                  "<duration> passed\", \"training <revision> since <time> "
                                  "stops <n>\" or \"stopped <revision> after <seconds> stops "
                                  "<n>\"'"},
        ],
    )


def launcher_policy_objects() -> list[dict[str, Any]]:
    """Both policies, each followed by its binding (every namespace, requests refused)."""
    return [scale_policy(), _binding(LAUNCHER_SCALE_POLICY),
            records_policy(), _binding(LAUNCHER_RECORDS_POLICY)]
