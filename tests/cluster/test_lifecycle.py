"""A job's life on a real API server: its launcher's rights, its record, release, `status`.

There is no node, so the launchers run here as local processes, each with a token of the job's
ServiceAccount bound to the task's pod (TokenRequest with the pod as bound object, as the kubelet
asks for the token it projects: the same claims, so the same user and the same pod-name extra),
the cluster's CA and the namespace, in the files a pod would have, and with the environment the
compiled pod template gives it. What the API server lets them do, under the launcher policy, and
what they leave in it, is the real thing. The pods stay Pending (nothing runs them), and one
deleted when its StatefulSet is scaled down is gone at once, its token with it.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.cluster.conftest import Cluster
from tests.cluster.waiting import wait_for
from tests.conftest import job_text
from tests.test_argo_cd_health import health
from tests.test_printable import controls
from tfcompile.compiler.printable import printable

pytestmark = pytest.mark.cluster

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")

ROLES = "chief: {replicas: 1}\nworker: {replicas: 2}\nevaluator: {replicas: 1}"


@dataclass
class Job:
    """A compiled job applied into a namespace: its output directory and objects."""

    cluster: Cluster
    name: str
    namespace: str
    output: Path

    @property
    def directory(self) -> Path:
        return self.output / self.name

    def compiled(self, prefix: str) -> dict[str, Any]:
        path = sorted(self.directory.glob(f"{prefix}*.yaml"))[0]
        document: dict[str, Any] = YAML(typ="safe").load(path.read_text())
        return document

    @property
    def revision(self) -> str:
        annotations = self.compiled("statefulset-")["spec"]["template"]["metadata"]["annotations"]
        return str(annotations["tfcompile.dev/revision"])

    def replicas(self) -> dict[str, int]:
        items = self.cluster.get_json("statefulsets", "--namespace", self.namespace,
                                      f"--selector=tfcompile.dev/job={self.name}")["items"]
        return {item["metadata"]["name"]: item["spec"]["replicas"] for item in items}

    def records(self) -> dict[str, str]:
        state = self.cluster.get_json(f"configmap/{self.name}-state", "--namespace",
                                      self.namespace)
        return dict(state.get("data") or {})

    def status(self, *arguments: str) -> str:
        completed = subprocess.run(
            [TFCOMPILE, "status", self.name, "-o", str(self.output), "-n", self.namespace,
             *arguments], capture_output=True, text=True, timeout=120, check=False,
            env=self.cluster.environment)
        assert completed.returncode == 0, completed.stderr
        return completed.stdout

    def phase(self) -> str:
        (found,) = json.loads(self.status("--json"))
        return str(found["phase"])


def build(tmp_path: Path, name: str, extra: str = "") -> Path:
    jobs = tmp_path / "jobs" / name
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "job.yaml").write_text(
        job_text(name, command="[python, train.py]", roles=ROLES) + extra)
    output = tmp_path / "output"
    subprocess.run([TFCOMPILE, "build", str(tmp_path / "jobs"), "-o", str(output)],
                   check=True, capture_output=True, timeout=120)
    return output


def apply(cluster: Cluster, job: Job) -> None:
    rendered = subprocess.run([TFCOMPILE, "render", str(job.directory)], check=True,
                              capture_output=True, text=True, timeout=120).stdout
    cluster.kubectl("apply", "--server-side", "--field-manager=gitops-controller",
                    "--namespace", job.namespace, "--filename=-", input_text=rendered)


def deploy(cluster: Cluster, tmp_path: Path, name: str, extra: str = "",
           namespace: str | None = None) -> Job:
    job = Job(cluster, name, namespace or cluster.fresh_namespace(), build(tmp_path, name, extra))
    apply(cluster, job)
    return job


def can(cluster: Cluster, job: Job, account: str, *request: str) -> bool:
    completed = cluster.kubectl(
        "auth", "can-i", *request, "--namespace", job.namespace,
        f"--as=system:serviceaccount:{job.namespace}:{account}", check=False)
    assert completed.stdout.strip() in ("yes", "no"), completed.stderr
    return completed.stdout.strip() == "yes"


def test_a_released_job_s_pods_may_scale_their_own_job_and_nothing_else(
        cluster: Cluster, tmp_path: Path) -> None:
    job = deploy(cluster, tmp_path, "release", "  onSuccess: release\n")
    other = deploy(cluster, tmp_path, "other", namespace=job.namespace)
    account = "release-launcher"
    for role in ("chief", "worker", "evaluator"):
        assert can(cluster, job, account, "patch", f"statefulsets/release-{role}",
                   "--subresource=scale")
        assert can(cluster, job, account, "get", f"statefulsets/release-{role}",
                   "--subresource=scale")
    assert can(cluster, job, account, "patch", "configmaps/release-state")
    refused = [
        ("patch", "statefulsets/other-worker", "--subresource=scale"),  # another job
        ("patch", "statefulsets/release-worker"),  # the StatefulSet itself, not its scale
        ("update", "statefulsets/release-worker"),
        ("delete", "statefulsets/release-worker"),
        ("list", "statefulsets"),
        ("create", "statefulsets"),
        ("patch", "configmaps/other-state"),
        ("patch", f"configmaps/{job.compiled('configmap-release-launcher-')['metadata']['name']}"),
        ("create", "configmaps"),
        ("get", "secrets"),
        ("create", "pods"),
        ("delete", "pods"),
        ("create", "pods/exec"),
    ]
    for request in refused:
        assert not can(cluster, job, account, *request), request
    # A job without `onSuccess: release` may record its state, and scale nothing.
    assert can(cluster, other, "other-launcher", "patch", "configmaps/other-state")
    assert not can(cluster, other, "other-launcher", "patch", "statefulsets/other-worker",
                   "--subresource=scale")


@dataclass
class Pod:
    """One task's launcher as a local process, with a pod's account files and environment."""

    job: Job
    account: Path
    server: str
    role: str
    index: int
    state: Path
    started: list[subprocess.Popen[str]]

    def run(self, command: str, revision: str | None = None) -> subprocess.Popen[str]:
        launcher_map = self.job.compiled("configmap-" + self.job.name + "-launcher-")
        launcher = launcher_map["data"]
        program = self.state.parent / "launcher"
        program.mkdir(parents=True, exist_ok=True)
        for key, text in launcher.items():
            (program / key).write_text(text)
        for key, encoded in launcher_map["binaryData"].items():  # the zip, as the kubelet writes it
            (program / key).write_bytes(base64.b64decode(encoded))
        if revision is not None:  # the settings of that revision, as its build would write them
            settings = json.loads(launcher["settings.json"])
            (program / "settings.json").write_text(json.dumps({**settings, "revision": revision}))
        self.state.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [sys.executable, str(program / "tfcompile-launcher.pyz"), f"--state={self.state}",
             f"--account={self.account}", f"--api={self.server}", f"--role={self.role}", "--",
             "sh", "-c", command],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
            env={"PATH": os.environ["PATH"], "TASK_INDEX": str(self.index),
                 "TFCOMPILE_REVISION": revision or self.job.revision},
        )
        self.started.append(process)
        return process


@pytest.fixture
def pods(cluster: Cluster, tmp_path: Path) -> Iterator[Any]:
    """Makes pods of a job; stops their launchers at the end."""
    started: list[subprocess.Popen[str]] = []

    def make(job: Job, role: str, index: int, fresh: str = "") -> Pod:
        pod = f"{job.name}-{role}-{index}"
        account = tmp_path / f"account-{pod}{fresh}"
        if not account.exists():
            account.mkdir()
            wait_for(f"pod {pod}", lambda: cluster.kubectl(
                "get", "pod", pod, "--namespace", job.namespace, check=False).returncode == 0,
                WAIT_SECONDS)
            token = cluster.kubectl("create", "token", f"{job.name}-launcher", "--namespace",
                                    job.namespace, "--bound-object-kind=Pod",
                                    f"--bound-object-name={pod}").stdout.strip()
            (account / "token").write_text(token)
            (account / "namespace").write_text(job.namespace)
            raw = cluster.kubectl("config", "view", "--raw", "--minify", "--output=json").stdout
            settings = json.loads(raw)["clusters"][0]["cluster"]
            if "certificate-authority-data" in settings:
                authority = base64.b64decode(settings["certificate-authority-data"])
            else:
                authority = Path(settings["certificate-authority"]).read_bytes()
            (account / "ca.crt").write_bytes(authority)
            (account / "server").write_text(settings["server"])
        return Pod(job, account, (account / "server").read_text(), role, index,
                   tmp_path / f"{job.name}-{role}-{index}{fresh}" / "state", started)

    yield make
    for process in started:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


WAIT_SECONDS = 60.0


def scale_up(job: Job, replicas: dict[str, int]) -> None:
    """Scale StatefulSets up as a person or a GitOps controller does (no policy applies)."""
    for name, count in replicas.items():
        job.cluster.kubectl("scale", f"statefulset/{name}", f"--replicas={count}",
                            "--namespace", job.namespace)


def idling(process: subprocess.Popen[str]) -> None:
    time.sleep(1.0)
    assert process.poll() is None, process.stdout.read() if process.stdout else ""


def test_success_is_recorded_sticks_and_releases_the_job_evaluator_last(
        cluster: Cluster, tmp_path: Path, pods: Any) -> None:
    job = deploy(cluster, tmp_path, "trained", "  onSuccess: release\n")
    revision = job.revision
    assert job.phase() == "Pending"  # no node: the pods stay Pending
    live_state = cluster.get_json("configmap/trained-state", "--namespace", job.namespace)
    assert health(live_state)[0] == "Progressing"  # Argo CD's view
    runs = tmp_path / "runs"
    train = f"echo trained >> {shlex.quote(str(runs))}"

    worker = pods(job, "worker", 0).run(train)
    wait_for("worker-0 to record its success",
             lambda: job.records().get("worker-0") == f"succeeded {revision}", WAIT_SECONDS)
    idling(worker)
    assert set(job.replicas().values()) == {1, 2}  # a worker is not the job: nothing released

    chief = pods(job, "chief", 0).run(train)
    wait_for("the chief to release the job", lambda: job.replicas()["trained-chief"] == 0,
             WAIT_SECONDS)
    idling(chief)
    assert job.replicas() == {"trained-chief": 0, "trained-worker": 0, "trained-evaluator": 1}

    evaluator = pods(job, "evaluator", 0).run(train)  # its last evaluation, then release
    wait_for("the evaluator to release itself",
             lambda: job.replicas()["trained-evaluator"] == 0, WAIT_SECONDS)
    idling(evaluator)
    assert job.phase() == "Released"
    assert runs.read_text() == "trained\n" * 3
    live_state = cluster.get_json("configmap/trained-state", "--namespace", job.namespace)
    assert health(live_state) == ("Healthy", f"succeeded at revision {revision}")  # Argo CD

    # A pod recreated after success (scaled up again, as Flux's drift correction does): a new
    # emptyDir, the same revision. It does not train; it releases the job again.
    scale_up(job, {"trained-chief": 1})
    again = pods(job, "chief", 0, fresh="-recreated").run(train)
    wait_for("the recreated chief to release the job again",
             lambda: job.replicas()["trained-chief"] == 0, WAIT_SECONDS)
    idling(again)
    assert runs.read_text() == "trained\n" * 3  # it did not train again
    assert job.records()["chief-0"] == f"succeeded {revision}"
    # A new revision trains.
    scale_up(job, {"trained-chief": 1})
    new = pods(job, "chief", 0, fresh="-new-revision").run(train, revision="0" * 12)
    wait_for("the new revision to record its success",
             lambda: job.records()["chief-0"] == f"succeeded {'0' * 12}", WAIT_SECONDS)
    assert runs.read_text() == "trained\n" * 4
    idling(new)
    # The record lives in the API server: the Role let the launcher patch its own ConfigMap,
    # as the field manager `tfcompile-launcher`, which a GitOps sync does not own.
    state = cluster.get_json("configmap/trained-state", "--namespace", job.namespace,
                             "--show-managed-fields")
    managers = {entry["manager"] for entry in state["metadata"]["managedFields"]}
    assert "tfcompile-launcher" in managers


def test_a_task_that_must_not_retry_stops_the_job_and_status_says_failed(
        cluster: Cluster, tmp_path: Path, pods: Any) -> None:
    job = deploy(cluster, tmp_path, "broken", "  onFailure: release\n"
                 "  failurePolicy: {maxRestarts: 5, doNotRetryExitCodes: [2]}\n")
    worker = pods(job, "worker", 1).run("echo bad data >&2; exit 2")
    wait_for("the failure to release the job", lambda: set(job.replicas().values()) == {0},
             WAIT_SECONDS)
    idling(worker)
    assert job.records()["worker-1"] == f"failed {job.revision} exit 2 after 0 restarts"
    assert job.phase() == "Failed"
    live_state = cluster.get_json("configmap/broken-state", "--namespace", job.namespace)
    assert health(live_state) == ("Degraded",
                                  "failed for good: worker-1 (exit 2 after 0 restarts)")
    table = job.status()
    assert "broken (" in table and ": Failed;" in table
    assert "failed worker-1: exit 2 after 0 restarts" in table
    # Scaled up again (as Flux's drift correction does): a new pod of the failed revision finds
    # the record, does not train, and releases the job again.
    scale_up(job, {"broken-chief": 1, "broken-worker": 2, "broken-evaluator": 1})
    again = pods(job, "worker", 1, fresh="-recreated").run("echo trained-again; exit 0")
    wait_for("the recreated pod to release the job",
             lambda: set(job.replicas().values()) == {0}, WAIT_SECONDS)
    idling(again)
    assert job.records()["worker-1"].startswith(f"failed {job.revision} ")


def test_a_revision_past_its_deadline_is_stopped_failed_and_released(
        cluster: Cluster, tmp_path: Path, pods: Any) -> None:
    job = deploy(cluster, tmp_path, "late", "  onFailure: release\n  deadline: 3s\n")
    revision = job.revision
    started = time.monotonic()
    worker = pods(job, "worker", 0).run(
        "sleep 60 & trap 'kill $!; echo saved-a-checkpoint; exit 0' TERM; wait")
    wait_for("the deadline to release the job", lambda: set(job.replicas().values()) == {0},
             WAIT_SECONDS)
    assert time.monotonic() - started >= 3
    idling(worker)
    assert job.records()["worker-0"] == f"failed {revision} deadline 3s passed"
    assert job.phase() == "Failed"
    live_state = cluster.get_json("configmap/late-state", "--namespace", job.namespace)
    assert health(live_state) == ("Degraded", "failed for good: worker-0 (deadline 3s passed)")
    assert "failed worker-0: deadline 3s passed" in job.status()
    worker.terminate()
    assert "saved-a-checkpoint" in (worker.communicate(timeout=10)[0] or "")


def test_a_stopped_task_records_its_stop_and_its_clock_goes_on_in_a_new_pod(
        cluster: Cluster, tmp_path: Path, pods: Any) -> None:
    """A pod deleted or evicted records that a signal stopped it (what its peers read to leave
    their own failure uncounted) and how long it had trained; a new pod of the task goes on with
    that clock. The launcher policy admits both records."""
    job = deploy(cluster, tmp_path, "paused",
                 "  deadline: 1h\n  failurePolicy: {maxRestarts: 0}\n")
    revision = job.revision
    before = time.monotonic()
    first = pods(job, "worker", 1).run("sleep 60 & trap 'kill $!; exit 143' TERM; wait")
    wait_for("the training record", lambda: job.records().get("worker-1", "").startswith(
        f"training {revision} since "), WAIT_SECONDS)
    time.sleep(2)
    first.terminate()
    assert first.wait(timeout=10) == 143
    # At least the 2 s it surely trained; at most what passed since its pod started (whole
    # seconds recorded: one more), however slowly a loaded machine went.
    ran = time.monotonic() - before + 1
    stopped = job.records()["worker-1"].split(" ")
    assert stopped[:3] == ["stopped", revision, "after"] and stopped[4:] == ["stops", "1"]
    assert 2 <= int(stopped[3]) <= ran, (stopped, ran)
    second = pods(job, "worker", 1, fresh="-recreated").run("sleep 60")
    wait_for("the new pod's training record", lambda: job.records().get("worker-1", "")
             .startswith(f"training {revision} since "), WAIT_SECONDS)
    since = int(job.records()["worker-1"].split(" ")[3])
    assert job.records()["worker-1"].endswith(" stops 1")
    assert time.time() - since >= int(stopped[3])  # the clock went on from where it stopped
    assert "failed-task" not in job.records()  # a stop is no failure, even with maxRestarts: 0
    second.terminate()
    second.wait(timeout=10)


def test_status_shows_pending_suspended_released_and_revisions(
        cluster: Cluster, tmp_path: Path) -> None:
    job = deploy(cluster, tmp_path, "shown")
    committed = job.revision
    wait_for("the StatefulSet controller to create the pods",
             lambda: len(cluster.get_json("pods", "--namespace", job.namespace)["items"]) == 4,
             WAIT_SECONDS)
    found = json.loads(job.status("--json"))
    assert [(s["phase"], s["deployed_revision"], s["committed_revision"]) for s in found] == [
        ("Pending", committed, committed)]
    roles = {role["role"]: role for role in found[0]["roles"]}
    assert {name: (role["ready"], role["replicas"], role["restarts"], role["last_exit"])
            for name, role in roles.items()} == {
        "chief": (0, 1, 0, None), "worker": (0, 2, 0, None), "evaluator": (0, 1, 0, None)}
    table = job.status()
    assert f"shown ({job.namespace}): Pending; revision deployed {committed}, committed " \
           f"{committed}\n" in table
    assert "  worker     0/2    0         -          -" in table

    build(tmp_path, "shown", "  suspend: true\n")
    apply(cluster, job)
    assert job.phase() == "Suspended"
    assert job.revision == committed  # suspend is not a new revision

    build(tmp_path, "shown", "  env: {EPOCHS: '9'}\n")  # committed, not yet synced
    assert job.revision != committed
    found = json.loads(job.status("--json"))
    assert (found[0]["deployed_revision"], found[0]["committed_revision"]) == (
        committed, job.revision)
    assert "(differs)" in job.status()
    apply(cluster, job)
    assert job.phase() == "Pending"
    for name in ("shown-chief", "shown-worker", "shown-evaluator"):
        cluster.kubectl("scale", f"statefulset/{name}", "--replicas=0", "--namespace",
                        job.namespace)
    assert job.phase() == "Released"


def test_status_prints_what_the_cluster_holds_escaped(cluster: Cluster, tmp_path: Path) -> None:
    """Someone with more rights than a job's pods (or any pod, on a cluster without the launcher
    policy) can write terminal escapes into a job's record and its revision annotations; `status`
    prints them escaped, as text and as JSON."""
    job = deploy(cluster, tmp_path, "escaped")
    attack = "\x1b]0;pwned\x07\x1b[2J\rok\u202eevil\x9b"
    revision = f"0123{attack}"
    for role in ("chief", "worker", "evaluator"):
        cluster.kubectl("patch", f"statefulset/escaped-{role}", "--namespace", job.namespace,
                        "--type=merge", "--patch=" + json.dumps({"spec": {"template": {
                            "metadata": {"annotations": {"tfcompile.dev/revision": revision}}}}}))
    record = f"failed {revision} exit 3 after 2 restarts {attack}"
    cluster.kubectl("patch", "configmap/escaped-state", "--namespace", job.namespace,
                    "--type=merge", "--patch=" + json.dumps({"data": {"worker-0": record}}))
    table = job.status()
    assert controls(table) == []
    assert f"escaped ({job.namespace}): Failed; revision deployed {printable(revision)}, " \
           f"committed {job.revision} (differs)\n" in table
    assert f"failed worker-0: exit 3 after 2 restarts {printable(attack)}" in table
    as_json = job.status("--json")
    assert controls(as_json) == []
    roles = {role["role"]: role for role in json.loads(as_json)[0]["roles"]}
    assert roles["worker"]["failed"] == [f"worker-0: exit 3 after 2 restarts {attack}"]
