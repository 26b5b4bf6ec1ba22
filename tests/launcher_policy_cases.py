"""The requests a job's pods (and everyone else) send to what the admission policies guard, and
what the API server must answer: one table per policy, mirroring the cases that
tests/cluster/test_launcher_policy.py sends to a real API server.

The objects are tfcompile's own: a job compiled here (its StatefulSets, their selector, its state
ConfigMap and revision), patched as `kubectl patch --type=merge` patches them. A case says what
the server must decide: `ADMITTED` (the policy is concerned and lets it through), `NOT_MATCHED`
(the policy is not concerned) or the text its refusal begins with.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.admission_cel import Request
from tests.conftest import job_text
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.spec.loading import load_jobs

ADMITTED = "admitted"
NOT_MATCHED = "not matched"
MATCHED = "matched"
NAMESPACE = "ml"
LAUNCHER = f"system:serviceaccount:{NAMESPACE}:first-launcher"
TRAINER = f"system:serviceaccount:{NAMESPACE}:trainer"
"""An account of the job's namespace that a `podTemplate` names (bound to the launcher Role)."""
OUTSIDERS = {
    "a person": ("ana@example.com", None),
    "the StatefulSet controller": ("system:serviceaccount:kube-system:statefulset-controller",
                                   None),
    "Argo CD": ("system:serviceaccount:argocd:argocd-application-controller", None),
    "Flux, from a pod of its own": ("system:serviceaccount:flux-system:kustomize-controller",
                                    ("kustomize-controller-7d9f8-x2x4q",)),
}
"""Accounts of other namespaces (and a person), which the policies do not match."""
UNBOUND_OR_NOT_A_TASK = {
    "kubectl create token first-launcher": (LAUNCHER, None),
    "kubectl create token trainer": (TRAINER, None),
    "a notebook pod's": (TRAINER, ("notebook",)),
    "the TensorBoard pod's": (TRAINER, ("first-tensorboard-6c9d7f-q8z2n",)),
}
"""Tokens of accounts that hold the job's launcher rights but are not bound to a task pod."""
NOT_BOUND = "a job's pods change their job only with a token bound to the pod"


@dataclass(frozen=True)
class Case:
    """A request and what the API server must decide."""

    description: str
    request: Request
    expected: str


@dataclass(frozen=True)
class CompiledJob:
    """A job's objects as tfcompile compiles them, by kind and name."""

    name: str
    objects: dict[tuple[str, str], dict[str, Any]]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.objects[(kind, name)])

    @property
    def state(self) -> dict[str, Any]:
        return self.get("ConfigMap", f"{self.name}-state")

    @property
    def revision(self) -> str:
        return str(self.state["metadata"]["annotations"]["tfcompile.dev/revision"])


def compiled_job(directory: Path, name: str, extra: str = "") -> CompiledJob:
    """`name` with a chief, two workers and an evaluator, released on success, in `ml`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "job.yaml").write_text(job_text(
        name, metadata_lines=f"namespace: {NAMESPACE}", image="tf",
        command="[python, train.py]",
        roles="chief: {replicas: 1}\nworker: {replicas: 2}\nevaluator: {replicas: 1}")
        + "  onSuccess: release\n" + extra)
    (directory / "train.py").write_text("print('training')\n")
    [loaded] = load_jobs(directory / "job.yaml")
    objects = build_objects(loaded, shipped_launcher())
    return CompiledJob(name, {(item["kind"], item["metadata"]["name"]): item
                              for item in objects})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as `kubectl patch --type=merge` applies it: null removes a key. A new object,
    sharing nothing with `target` or `patch`."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


# -- scale: a StatefulSet's `scale` subresource ------------------------------------------------


def scale(statefulset: Mapping[str, Any], replicas: int) -> dict[str, Any]:
    """The autoscaling/v1 Scale of `statefulset` at `replicas`, as the API server hands it to
    admission: `spec.replicas` is omitted when 0 (omitempty), the selector is a string."""
    selector = ",".join(f"{key}={value}" for key, value
                        in sorted(statefulset["spec"]["selector"]["matchLabels"].items()))
    spec = {"replicas": replicas} if replicas else {}
    return {"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": statefulset["metadata"]["name"], "namespace": NAMESPACE},
            "spec": spec, "status": {"replicas": statefulset["spec"]["replicas"],
                                     "selector": selector}}


def scale_request(job: CompiledJob, role: str, replicas: int, *, username: str = LAUNCHER,
                  pods: tuple[str, ...] | None = ("first-worker-0",)) -> Request:
    statefulset = job.get("StatefulSet", f"{job.name}-{role}")
    current = statefulset["spec"]["replicas"]
    return Request("UPDATE", f"{job.name}-{role}", NAMESPACE, username,
                   scale(statefulset, replicas), scale(statefulset, current), pods)


def scale_cases(first: CompiledJob, second: CompiledJob) -> list[Case]:
    cases = [
        Case("2 -> 0", scale_request(first, "worker", 0), ADMITTED),
        Case("1 -> 0", scale_request(first, "chief", 0), ADMITTED),
        Case("2 -> 0, replicas: 0 given", replace(
            scale_request(first, "worker", 0),
            object=scale(first.get("StatefulSet", "first-worker"), 40) | {"spec": {"replicas": 0}}),
             ADMITTED),
        Case("2 -> 40", scale_request(first, "worker", 40),
             "pod first-worker-0 may scale first-worker to 0 only, not to 40"),
        Case("2 -> 3", scale_request(first, "worker", 3),
             "pod first-worker-0 may scale first-worker to 0 only, not to 3"),
        Case("1 -> 1", scale_request(first, "chief", 1),
             "pod first-worker-0 may scale first-chief to 0 only, not to 1"),
        Case("another job's StatefulSet", scale_request(second, "worker", 0, username=TRAINER),
             "pod first-worker-0 may scale only the StatefulSets of its own job (first-<role>), "
             "not second-worker"),
        Case("a task pod of the named account", scale_request(
            first, "worker", 0, username=TRAINER, pods=("first-worker-1",)), ADMITTED),
        Case("a task pod of the named account, to 5", scale_request(
            first, "worker", 5, username=TRAINER, pods=("first-worker-1",)),
             "pod first-worker-1 may scale first-worker to 0 only, not to 5"),
        Case("a pod of a job whose name looks like a task's", replace(
            scale_request(first, "worker", 0), pods=("first-ps-1-worker-0",)),
             "pod first-ps-1-worker-0 may scale only the StatefulSets of its own job "
             "(first-ps-1-<role>), not first-worker"),
    ]
    for description, (username, pods) in UNBOUND_OR_NOT_A_TASK.items():
        for replicas in (40, 0):
            cases.append(Case(f"{description} token, to {replicas}", scale_request(
                first, "worker", replicas, username=username, pods=pods), NOT_BOUND))
    for description, (username, pods) in OUTSIDERS.items():
        cases.append(Case(description, scale_request(first, "worker", 40, username=username,
                                                     pods=pods), NOT_MATCHED))
    foreign = scale_request(first, "worker", 40)
    assert foreign.old_object is not None
    foreign.old_object["status"]["selector"] = "app=other"
    cases.append(Case("a StatefulSet of no job", foreign, NOT_MATCHED))
    return cases


# -- records: a job's state ConfigMap ----------------------------------------------------------


def state_request(job: CompiledJob, patch: Mapping[str, Any],
                  old_data: Mapping[str, str] | None = None, *, username: str = LAUNCHER,
                  pods: tuple[str, ...] | None = ("first-worker-0",),
                  operation: str = "UPDATE") -> Request:
    """`patch` merged into `job`'s state ConfigMap holding `old_data`."""
    old = job.state
    if old_data:
        old["data"] = dict(old_data)
    new = merge_patch(old, patch)
    return Request(operation, old["metadata"]["name"], NAMESPACE, username,
                   None if operation == "DELETE" else new,
                   None if operation == "CREATE" else old, pods)


def records_cases(first: CompiledJob, second: CompiledJob) -> list[Case]:
    return [*_own_record_cases(first, second), *_progress_cases(first),
            *_result_cases(first), *_whose_cases(first)]


def _own_record_cases(job: CompiledJob, second: CompiledJob) -> list[Case]:
    revision = job.revision
    success = f"succeeded {revision}"
    failure = f"failed {revision} exit 3 after 2 restarts"
    summary = {"failed-revision": revision,
               "failed-task": "worker-0 (exit 3 after 2 restarts)"}
    own_task = "pod first-worker-0 may write only the record of its own task, worker-0, " \
               "and remove none"
    wrong_summary = "pod first-worker-0 may set failed-revision and failed-task only beside " \
                    "its own failure record, to what it says"
    cases = [
        Case("another task's record", state_request(job, {"data": {"worker-1": success}}),
             own_task),
        Case("its own and another's", state_request(
            job, {"data": {"chief-0": success, "worker-0": success}}), own_task),
        Case("its own success", state_request(job, {"data": {"worker-0": success}}), ADMITTED),
        Case("its failure and summary", state_request(
            job, {"data": {"worker-0": failure, **summary}}, {"worker-0": success}), ADMITTED),
        Case("a summary beside a success", state_request(
            job, {"data": summary}, {"worker-0": success}), wrong_summary),
        Case("the deadline's failure and summary", state_request(job, {"data": {
            "worker-0": f"failed {revision} deadline 1h30m passed", "failed-revision": revision,
            "failed-task": "worker-0 (deadline 1h30m passed)"}}), ADMITTED),
        Case("training", state_request(
            job, {"data": {"worker-0": f"training {revision} since 1795000000 stops 0"}}),
             ADMITTED),
        Case("stopped", state_request(
            job, {"data": {"worker-0": f"stopped {revision} after 60 stops 1"}}), ADMITTED),
        Case("removing its record", state_request(
            job, {"data": {"worker-0": None}}, {"worker-0": success}), own_task),
        Case("another job's state", state_request(
            second, {"data": {"worker-0": f"succeeded {second.revision}"}}, username=TRAINER),
             "pod first-worker-0 may write only the state of its own job, first-state, not "
             "second-state"),
        Case("deleting the state", state_request(job, {}, operation="DELETE"),
             "pod first-worker-0 may patch first-state, not DELETE it"),
        Case("creating a state", state_request(job, {}, operation="CREATE"),
             "pod first-worker-0 may patch first-state, not CREATE it"),
    ]
    for wrong in ({"failed-task": "worker-1 (exit 3 after 2 restarts)"},
                  {"failed-task": "worker-0 (exit 9 after 2 restarts)"},
                  {"failed-revision": "0" * 12}):
        cases.append(Case(f"a summary saying {wrong}", state_request(
            job, {"data": {"worker-0": failure, **summary, **wrong}}), wrong_summary))
    for value in (f"succeeded {revision}\x1b]0;owned\x07", "succeeded", f"done {revision}",
                  f"failed {revision} exit 3 after 2 restarts\n", "",
                  f"failed {revision} deadline soon passed", f"training {revision} since 1",
                  f"stopped {revision} after -1 stops 0"):
        cases.append(Case(f"the record {value!r}", state_request(
            job, {"data": {"worker-0": value}}), "pod first-worker-0 may record only"))
    for metadata in ({"annotations": {"tfcompile.dev/success-tasks": "worker-0"}},
                     {"labels": {"app.kubernetes.io/component": "other"}},
                     {"finalizers": ["example.com/keep"]}):
        cases.append(Case(f"metadata {metadata}", state_request(job, {"metadata": metadata}),
                          "pod first-worker-0 may change only the data of first-state"))
    cases.append(Case("binaryData", state_request(job, {"binaryData": {"worker-0": "AA=="}}),
                      "pod first-worker-0 may change only the data of first-state"))
    return cases


def _progress_cases(job: CompiledJob) -> list[Case]:
    revision = job.revision
    training = {"worker-0": f"training {revision} since 1795000000 stops 0"}
    line = {"worker-0.progress": "epoch 3/8, loss 0.21", "worker-0.progress-revision": revision}
    refusal = "pod first-worker-0 may set its progress only as a line of at most 256 plain " \
              "characters and the revision its own record is of"
    cases = [
        Case("a progress line", state_request(job, {"data": line}, training), ADMITTED),
        Case("a progress line of 256", state_request(
            job, {"data": {**line, "worker-0.progress": "x" * 256}}, training), ADMITTED),
        Case("a progress line beside its success", state_request(
            job, {"data": line}, {"worker-0": f"succeeded {revision}"}), ADMITTED),
        Case("a progress line without its record", state_request(job, {"data": line}), refusal),
        Case("another task's progress", state_request(job, {"data": {
            "worker-1.progress": "epoch 9/8", "worker-1.progress-revision": revision}},
            training), "pod first-worker-0 may write only the record of its own task"),
    ]
    for wrong in ({"worker-0.progress": "x" * 257},
                  {"worker-0.progress": "epoch 3\x1b]0;owned\x07"},
                  {"worker-0.progress": "epoch 3\nloss 1"},
                  {"worker-0.progress": "époque 3"},
                  {"worker-0.progress-revision": "0" * 12}):
        cases.append(Case(f"progress {str(wrong)[:60]}", state_request(
            job, {"data": {**line, **wrong}}, training), refusal))
    return cases


def _result_cases(job: CompiledJob) -> list[Case]:
    revision = job.revision
    success = {"worker-0": f"succeeded {revision}"}
    result = f'{revision} {{"loss":0.25}}'
    refusal = "pod first-worker-0 may set result only beside its own success record"
    cases = [
        Case("a result before its success", state_request(job, {"data": {"result": result}}),
             refusal),
        Case("a result beside a failure", state_request(job, {"data": {
            "worker-0": f"failed {revision} exit 3 after 2 restarts", "result": result}}),
             refusal),
        Case("a result from another task's pod", state_request(
            job, {"data": {"result": f'{revision} {{"loss":0}}'}}, {**success, "result": result},
            pods=("first-worker-1",)),
             "pod first-worker-1 may set result only beside its own success record"),
    ]
    for admitted in (f'{revision} {{"' + "\U0001f600" * 1022 + '":1}',  # 4094 bytes
                     f"{revision} refused: not JSON", result):
        cases.append(Case(f"the result {admitted[:30]!r}", state_request(
            job, {"data": {**success, "result": admitted}}), ADMITTED))
    for wrong in (f'{"0" * 12} {{"loss":0.25}}', f"{revision} 0.25", f'{revision} {{"a":1}}\n',
                  f'{revision} {{"a":"' + "x" * 4096 + '"}',
                  f'{revision} {{"' + "\U0001f600" * 1023 + '":1}',  # 1029 characters, 4098 bytes
                  f"{revision} refused: a reason of its own"):
        cases.append(Case(f"the result {wrong[:30]!r}", state_request(
            job, {"data": {**success, "result": wrong}}), refusal))
    return cases


def _whose_cases(job: CompiledJob) -> list[Case]:
    forged = {"worker-0": f"succeeded {job.revision}"}
    cases = [Case("a task pod of the named account", state_request(
        job, {"data": {"worker-1": f"succeeded {job.revision}"}}, username=TRAINER,
        pods=("first-worker-1",)), ADMITTED)]
    for description, (username, pods) in UNBOUND_OR_NOT_A_TASK.items():
        for data in (forged, {"result": f"{job.revision} {{}}"}):
            cases.append(Case(f"{description} token, {list(data)}", state_request(
                job, {"data": data}, username=username, pods=pods), NOT_BOUND))
    new_revision = {"metadata": {"annotations": {"tfcompile.dev/revision": "0" * 12}}}
    for description, (username, pods) in OUTSIDERS.items():
        cases.append(Case(f"{description} applying a new revision", state_request(
            job, new_revision, username=username, pods=pods), NOT_MATCHED))
    other = state_request(job, {"data": {"worker-1": "anything"}})
    for item in (other.object, other.old_object):
        assert item is not None
        item["metadata"]["labels"]["app.kubernetes.io/component"] = "settings"
    cases.append(Case("a ConfigMap that is no job's state", other, NOT_MATCHED))
    return cases


# -- the Flux MutatingAdmissionPolicy: keep a released job at 0 ---------------------------------


def statefulset_update(old: Mapping[str, Any], new: Mapping[str, Any],
                       old_replicas: int, new_replicas: int) -> Request:
    """An update of a StatefulSet from `old` at `old_replicas` to `new` at `new_replicas`, as
    Flux applies it."""
    before = merge_patch(old, {"spec": {"replicas": old_replicas}})
    after = merge_patch(new, {"spec": {"replicas": new_replicas}})
    return Request("UPDATE", str(after["metadata"]["name"]), NAMESPACE,
                   "system:serviceaccount:flux-system:kustomize-controller", after, before)


def keep_released_cases(job: CompiledJob, rebuilt: CompiledJob) -> list[Case]:
    """`rebuilt` is `job` compiled again after a committed change to its pods."""
    worker = job.get("StatefulSet", "first-worker")
    changed = rebuilt.get("StatefulSet", "first-worker")
    assert changed["spec"]["template"] != worker["spec"]["template"]
    more = merge_patch(worker, {"metadata": {"annotations": {"tfcompile.dev/replicas": "3"}}})
    older = merge_patch(worker, {"metadata": {"annotations": None}})
    return [
        Case("released, scaled up again, nothing committed changed",
             statefulset_update(worker, worker, 0, 2), MATCHED),
        Case("a committed change to the pods", statefulset_update(worker, changed, 0, 2),
             NOT_MATCHED),
        Case("a committed replicas change", statefulset_update(worker, more, 0, 3),
             NOT_MATCHED),
        Case("not released", statefulset_update(worker, worker, 2, 2), NOT_MATCHED),
        Case("suspended in git", statefulset_update(worker, worker, 2, 0), NOT_MATCHED),
        Case("released, staying at 0", statefulset_update(worker, worker, 0, 0), NOT_MATCHED),
        Case("written by a tfcompile without the annotation",
             statefulset_update(older, older, 0, 2), NOT_MATCHED),
    ]
