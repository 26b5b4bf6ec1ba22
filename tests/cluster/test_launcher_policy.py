"""The launcher policy on a real API server: a pod's own token scales its job to 0 and to nothing
else, and writes only its own task's record.

The cluster fixture applied `deploy/cluster/launcher-policy.yaml` as `init` writes it. The tokens
here come from `kubectl create token <account> --bound-object-kind=Pod --bound-object-name=<pod>`:
the TokenRequest the kubelet makes for the token it projects into a pod, bound to the same pod,
so the API server sees the same user and the same `authentication.kubernetes.io/pod-name` extra
(the local node's release tests show the projected token itself under the same policy). The
pods stay Pending: there is no node, and none is needed for their tokens.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cluster.conftest import Cluster
from tests.cluster.test_lifecycle import Job, can, deploy
from tests.cluster.waiting import wait_for

pytestmark = pytest.mark.cluster

RELEASE = "  onSuccess: release\n"
WAIT_SECONDS = 60.0


class PodToken:
    """kubectl as a job's pod: a kubeconfig with the cluster of `cluster` and a token bound to
    the pod."""

    def __init__(self, cluster: Cluster, job: Job, pod: str, directory: Path,
                 account: str | None = None, bound: bool = True) -> None:
        self.cluster = cluster
        self.namespace = job.namespace
        wait_for(f"pod {pod}", lambda: cluster.kubectl(
            "get", "pod", pod, "--namespace", job.namespace, check=False).returncode == 0,
            WAIT_SECONDS)
        binding = ["--bound-object-kind=Pod", f"--bound-object-name={pod}"] if bound else []
        token = cluster.kubectl("create", "token", account or f"{job.name}-launcher",
                                "--namespace", job.namespace, *binding).stdout.strip()
        settings = json.loads(cluster.kubectl("config", "view", "--raw", "--minify",
                                              "--output=json").stdout)
        settings["users"] = [{"name": "pod", "user": {"token": token}}]
        settings["contexts"][0]["context"]["user"] = "pod"
        self.kubeconfig = directory / f"{pod}{'' if bound else '-unbound'}.kubeconfig"
        self.kubeconfig.write_text(json.dumps(settings))

    def kubectl(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", "--namespace", self.namespace,
             *arguments], capture_output=True, text=True, check=False, timeout=120)

    def scale(self, statefulset: str, replicas: int) -> subprocess.CompletedProcess[str]:
        """What the launcher sends: a merge patch of the StatefulSet's `scale`."""
        patch = json.dumps({"spec": {"replicas": replicas}})
        return self.kubectl("patch", f"statefulset/{statefulset}", "--subresource=scale",
                            "--type=merge", f"--patch={patch}")

    def patch_state(self, job: Job, patch: dict[str, object]) -> subprocess.CompletedProcess[str]:
        return self.kubectl("patch", f"configmap/{job.name}-state", "--type=merge",
                            f"--patch={json.dumps(patch)}")


def refused(completed: subprocess.CompletedProcess[str], policy: str, message: str) -> bool:
    """Refused by the launcher policy `policy` (not by RBAC), saying `message`."""
    return (completed.returncode != 0 and "(Forbidden)" in completed.stderr
            and f"ValidatingAdmissionPolicy 'tfcompile-launcher-{policy}'" in completed.stderr
            and message in completed.stderr)


def test_a_pod_s_own_token_scales_its_job_to_zero_and_to_nothing_else(
        cluster: Cluster, tmp_path: Path) -> None:
    job = deploy(cluster, tmp_path, "scaled", RELEASE)
    assert job.replicas() == {"scaled-chief": 1, "scaled-worker": 2, "scaled-evaluator": 1}
    pod = PodToken(cluster, job, "scaled-worker-0", tmp_path)
    # The Role lets the account patch the scale (RBAC cannot say "only to 0")...
    assert can(cluster, job, "scaled-launcher", "patch", "statefulsets/scaled-worker",
               "--subresource=scale")
    # ...and the policy refuses anything but 0: 2 -> 40, 2 -> 3, 1 -> 1.
    grown = pod.scale("scaled-worker", 40)
    assert refused(grown, "scale", "pod scaled-worker-0 may scale scaled-worker to 0 only, "
                                   "not to 40"), grown.stderr
    assert refused(pod.scale("scaled-worker", 3), "scale", "to 0 only, not to 3")
    assert refused(pod.scale("scaled-chief", 1), "scale", "to 0 only, not to 1")
    assert job.replicas() == {"scaled-chief": 1, "scaled-worker": 2, "scaled-evaluator": 1}
    # 1 -> 0 and 2 -> 0 (its own StatefulSet last: its token ends with its pod).
    assert pod.scale("scaled-chief", 0).returncode == 0
    shrunk = pod.scale("scaled-worker", 0)
    assert shrunk.returncode == 0, shrunk.stderr
    assert job.replicas() == {"scaled-chief": 0, "scaled-worker": 0, "scaled-evaluator": 1}


def test_a_pod_s_own_token_writes_only_its_own_record(cluster: Cluster, tmp_path: Path) -> None:
    job = deploy(cluster, tmp_path, "recorded")
    revision = job.revision
    pod = PodToken(cluster, job, "recorded-worker-0", tmp_path)
    success = f"succeeded {revision}"
    other = pod.patch_state(job, {"data": {"worker-1": success}})
    assert refused(other, "records", "pod recorded-worker-0 may write only the record of its "
                                     "own task, worker-0, and remove none"), other.stderr
    assert refused(pod.patch_state(job, {"data": {"chief-0": success, "worker-0": success}}),
                   "records", "only the record of its own task")
    assert job.records() == {}
    own = pod.patch_state(job, {"data": {"worker-0": success}})
    assert own.returncode == 0, own.stderr
    failure = f"failed {revision} exit 3 after 2 restarts"
    # Beside its own final failure, the two keys the Argo CD health check reads, saying the same.
    summary = {"failed-revision": revision, "failed-task": "worker-0 (exit 3 after 2 restarts)"}
    for wrong in ({"failed-task": "worker-1 (exit 3 after 2 restarts)"},
                  {"failed-task": "worker-0 (exit 9 after 2 restarts)"},
                  {"failed-revision": "0" * 12}):
        refused_summary = pod.patch_state(job, {"data": {"worker-0": failure, **summary, **wrong}})
        assert refused(refused_summary, "records", "may set failed-revision and failed-task "
                                                   "only beside its own failure record"), wrong
    assert refused(pod.patch_state(job, {"data": summary}), "records",
                   "only beside its own failure record")  # worker-0 still says succeeded
    # The deadline's failure with its summary, and the deadline clock's records (training,
    # stopped by a signal).
    deadline = {"worker-0": f"failed {revision} deadline 1h30m passed",
                "failed-revision": revision, "failed-task": "worker-0 (deadline 1h30m passed)"}
    for data in (deadline, {"worker-0": f"training {revision} since 1795000000 stops 0"},
                 {"worker-0": f"stopped {revision} after 60 stops 1"}):
        admitted = pod.patch_state(job, {"data": data})
        assert admitted.returncode == 0, (data, admitted.stderr)
    recorded = pod.patch_state(job, {"data": {"worker-0": failure, **summary}})
    assert recorded.returncode == 0, recorded.stderr
    # Only the launcher's format, no removal, nothing but data.
    for value in (f"succeeded {revision}\x1b]0;owned\x07", "succeeded", f"done {revision}",
                  f"failed {revision} exit 3 after 2 restarts\n", "",
                  f"failed {revision} deadline soon passed", f"training {revision} since 1",
                  f"stopped {revision} after -1 stops 0"):
        assert refused(pod.patch_state(job, {"data": {"worker-0": value}}), "records",
                       "may record only"), repr(value)
    assert refused(pod.patch_state(job, {"data": {"worker-0": None}}), "records",
                   "and remove none")
    for metadata in ({"annotations": {"tfcompile.dev/success-tasks": "worker-0"}},
                     {"labels": {"app.kubernetes.io/component": "other"}},
                     {"finalizers": ["example.com/keep"]}):
        assert refused(pod.patch_state(job, {"metadata": metadata}), "records",
                       "may change only the data of recorded-state"), metadata
    # A token of the account that is not bound to a pod names no task: refused.
    unbound = PodToken(cluster, job, "recorded-worker-0", tmp_path, bound=False)
    assert refused(unbound.patch_state(job, {"data": {"worker-0": success}}), "records",
                   "only with a token bound to the pod")
    assert job.records() == {"worker-0": failure, **summary}
    # What a GitOps controller applies (a new revision annotation) is not the pods' business.
    build_again = deploy(cluster, tmp_path, "recorded", "  env: {EPOCHS: '9'}\n",
                         namespace=job.namespace)
    state = cluster.get_json("configmap/recorded-state", "--namespace", job.namespace)
    assert state["metadata"]["annotations"]["tfcompile.dev/revision"] == build_again.revision


def test_an_account_a_pod_template_names_is_held_to_its_own_job(
        cluster: Cluster, tmp_path: Path) -> None:
    """Two jobs whose pods run as the same account (`podTemplate.spec.serviceAccountName`):
    both RoleBindings bind it, so RBAC lets it touch both jobs; the policy keeps each pod to its
    own job, which it learns from the pod's name."""
    namespace = cluster.fresh_namespace()
    cluster.kubectl("create", "serviceaccount", "trainer", "--namespace", namespace)
    shared = RELEASE + "  podTemplate: {spec: {serviceAccountName: trainer}}\n"
    first = deploy(cluster, tmp_path, "first", shared, namespace=namespace)
    second = deploy(cluster, tmp_path, "second", shared, namespace=namespace)
    assert can(cluster, first, "trainer", "patch", "statefulsets/second-worker",
               "--subresource=scale")
    assert can(cluster, first, "trainer", "patch", "configmaps/second-state")
    pod = PodToken(cluster, first, "first-worker-0", tmp_path, account="trainer")
    assert refused(pod.scale("second-worker", 0), "scale",
                   "pod first-worker-0 may scale only the StatefulSets of its own job "
                   "(first-<role>), not second-worker")
    assert refused(pod.patch_state(second, {"data": {"worker-0": f"succeeded {second.revision}"}}),
                   "records", "may write only the state of its own job, first-state, "
                              "not second-state")
    assert refused(pod.scale("first-worker", 5), "scale", "to 0 only, not to 5")
    assert pod.patch_state(first, {"data": {"worker-0": f"succeeded {first.revision}"}}) \
        .returncode == 0
    assert pod.scale("first-worker", 0).returncode == 0
    assert second.replicas()["second-worker"] == 2 and second.records() == {}
    assert first.records() == {"worker-0": f"succeeded {first.revision}"}


def test_a_pod_records_only_its_own_progress_as_a_short_plain_line(
        cluster: Cluster, tmp_path: Path) -> None:
    """A task's progress (`<task>.progress`, `<task>.progress-revision`) beside its own record
    of that revision; another task's, a long line, other characters or another revision are
    refused."""
    job = deploy(cluster, tmp_path, "progress")
    revision = job.revision
    pod = PodToken(cluster, job, "progress-worker-0", tmp_path)
    training = {"worker-0": f"training {revision} since 1795000000 stops 0"}
    assert pod.patch_state(job, {"data": training}).returncode == 0
    line = {"worker-0.progress": "epoch 3/8, loss 0.21", "worker-0.progress-revision": revision}
    admitted = pod.patch_state(job, {"data": line})
    assert admitted.returncode == 0, admitted.stderr
    refusal = "may set its progress only as a line of at most 256 plain characters"
    for wrong in ({"worker-0.progress": "x" * 257},
                  {"worker-0.progress": "epoch 3\x1b]0;owned\x07"},
                  {"worker-0.progress": "epoch 3\nloss 1"},
                  {"worker-0.progress-revision": "0" * 12}):
        assert refused(pod.patch_state(job, {"data": {**line, **wrong}}), "records",
                       refusal), wrong
    assert refused(pod.patch_state(job, {"data": {"worker-1.progress": "epoch 9/8",
                                                  "worker-1.progress-revision": revision}}),
                   "records", "may write only the record of its own task")
    assert job.records() == {**training, **line}


NOTEBOOK = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook"},
    "spec": {"serviceAccountName": "trainer", "containers": [{
        "name": "notebook", "image": "python:3.11", "command": ["sleep", "infinity"],
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True,
                            "runAsUser": 1000, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}}}]},
}


def test_a_named_account_s_tokens_outside_the_job_s_task_pods_change_nothing(
        cluster: Cluster, tmp_path: Path) -> None:
    """`podTemplate.spec.serviceAccountName: trainer` binds the launcher's Role to `trainer`, so
    in RBAC every token of that account has the job's launcher rights. The policy holds every
    account of the job's namespace to them: a token from `kubectl create token trainer`, one
    bound to another pod running as `trainer` and the TensorBoard pod's (its podTemplate names
    `trainer` too) scale nothing and record nothing; a task pod's token still does its part."""
    namespace = cluster.fresh_namespace()
    cluster.kubectl("create", "serviceaccount", "trainer", "--namespace", namespace)
    named = "  podTemplate: {spec: {serviceAccountName: trainer}}\n"
    extra = (RELEASE + named + "  storage:\n    shared: {mountPath: /mnt/shared, size: 1Gi}\n"
             "  tensorboard:\n    logDir: /mnt/shared/logs\n  " + named)
    job = deploy(cluster, tmp_path, "named", extra, namespace=namespace)
    assert can(cluster, job, "trainer", "patch", "statefulsets/named-worker",
               "--subresource=scale")
    assert can(cluster, job, "trainer", "patch", "configmaps/named-state")
    notebook = tmp_path / "notebook.json"
    notebook.write_text(json.dumps(NOTEBOOK))
    cluster.kubectl("apply", "--namespace", namespace, "-f", str(notebook))

    def tensorboard_pod() -> str:
        pods = cluster.get_json("pods", "--namespace", namespace, "-l",
                                "app.kubernetes.io/component=tensorboard")["items"]
        return str(pods[0]["metadata"]["name"]) if pods else ""

    wait_for("the TensorBoard pod", tensorboard_pod, WAIT_SECONDS)
    tokens = {
        "kubectl create token trainer": PodToken(cluster, job, "named-worker-0", tmp_path,
                                                 account="trainer", bound=False),
        "a notebook pod's": PodToken(cluster, job, "notebook", tmp_path, account="trainer"),
        "the TensorBoard pod's": PodToken(cluster, job, tensorboard_pod(), tmp_path,
                                          account="trainer"),
    }
    forged = f"succeeded {job.revision}"
    for token in tokens.values():
        for replicas in (40, 0):
            assert refused(token.scale("named-worker", replicas), "scale",
                           "change their job only with a token bound to the pod"), replicas
        assert refused(token.patch_state(job, {"data": {"worker-0": forged}}), "records",
                       "change their job only with a token bound to the pod")
        assert refused(token.patch_state(job, {"data": {"result": f"{job.revision} {{}}"}}),
                       "records", "change their job only with a token bound to the pod")
    assert job.replicas()["named-worker"] == 2 and job.records() == {}
    task = PodToken(cluster, job, "named-worker-1", tmp_path, account="trainer")
    assert task.patch_state(job, {"data": {"worker-1": forged}}).returncode == 0
    assert refused(task.scale("named-worker", 40), "scale", "to 0 only, not to 40")
    assert job.records() == {"worker-1": forged}


def test_a_pod_records_a_trial_s_result_only_beside_its_own_success(
        cluster: Cluster, tmp_path: Path) -> None:
    """A sweep trial's `result`: `<revision> {…}` or the launcher's note that it refused the
    file, bounded in UTF-8 bytes (CEL's size() of a string counts characters), and only beside
    the pod's own success record of that revision (so a pod cannot rank a trial it did not
    finish)."""
    job = deploy(cluster, tmp_path, "resulted")
    revision = job.revision
    pod = PodToken(cluster, job, "resulted-worker-0", tmp_path)
    result = f'{revision} {{"loss":0.25}}'
    before = pod.patch_state(job, {"data": {"result": result}})
    assert refused(before, "records", "may set result only beside its own success record"), \
        before.stderr
    success = f"succeeded {revision}"
    for wrong in (f'{"0" * 12} {{"loss":0.25}}', f"{revision} 0.25", f'{revision} {{"a":1}}\n',
                  f'{revision} {{"a":"' + "x" * 4096 + '"}',
                  f'{revision} {{"' + "\U0001f600" * 1023 + '":1}',  # 1029 characters, 4098 bytes
                  f"{revision} refused: a reason of its own"):
        refused_result = pod.patch_state(job, {"data": {"worker-0": success, "result": wrong}})
        assert refused(refused_result, "records", "may set result only"), wrong[:40]
    failure = f"failed {revision} exit 3 after 2 restarts"
    assert refused(pod.patch_state(job, {"data": {"worker-0": failure, "result": result}}),
                   "records", "may set result only")
    for admitted in (f'{revision} {{"' + "\U0001f600" * 1022 + '":1}',  # 4094 bytes
                     f"{revision} refused: not JSON", result):
        recorded = pod.patch_state(job, {"data": {"worker-0": success, "result": admitted}})
        assert recorded.returncode == 0, recorded.stderr
    assert job.records() == {"worker-0": success, "result": result}
    # Another task's pod of the job may not overwrite it: its own record is not a success.
    other = PodToken(cluster, job, "resulted-worker-1", tmp_path)
    assert refused(other.patch_state(job, {"data": {"result": f'{revision} {{"loss":0}}'}}),
                   "records", "may set result only")
