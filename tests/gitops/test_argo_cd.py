"""From a git push to a finished training under a real Argo CD.

A repository made by `tfcompile init`; its ApplicationSet and the argocd-cm health patch applied
as docs/gitops.md says (only the repository URL filled in). Argo CD runs with the tier's
settings (applications compared every 5 s, branch heads cached 5 s). Real TensorFlow trains the
example `init` writes; the other jobs run a stand-in where TensorFlow adds nothing.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from tests.cluster.local_node import applied_revision
from tests.cluster.waiting import wait_for
from tests.conftest import job_directories
from tests.gitops.conftest import GitOps
from tests.gitops.gangs import GangWatch, install_volcano_crds
from tests.gitops.repository import (
    NAMESPACE,
    STAND_IN,
    SYNC_TIMEOUT,
    TRAINING_TIMEOUT,
    Repository,
    compiled_revision,
    every_task_trained_on,
    init_repository,
    job_objects,
    job_pods,
    pods_on_revision,
    stand_in_job,
    state_records,
    stateful_set_replicas,
    wait_released,
)
from tfcompile.compiler.objects.names import trial_name

# On the session's real node, with every other test that runs pods (marker `node`).
pytestmark = [pytest.mark.gitops, pytest.mark.cluster, pytest.mark.end_to_end,
              pytest.mark.node]

ARGO_CD = "argocd"
PUSH_TO_APPLIED_SECONDS = 15.0  # the tier's two 5 s periods (compare, head cache), then the sync


def application(gitops: GitOps, job: str) -> dict[str, Any] | None:
    found = gitops.node.kubectl("get", "applications.argoproj.io", f"training-{job}", "-n",
                                ARGO_CD, "-o", "json", check=False)
    return json.loads(found) if found else None


def state_health(gitops: GitOps, job: str) -> dict[str, Any]:
    """The health Argo CD's health check gave the job's state ConfigMap (kept in the
    Application's status: --persist-resource-health)."""
    status = (application(gitops, job) or {}).get("status") or {}
    state: dict[str, Any] = next((r for r in status.get("resources") or []
                                  if r.get("kind") == "ConfigMap"
                                  and r.get("name") == f"{job}-state"), {})
    return dict(state.get("health") or {})


def sync_and_health(gitops: GitOps, job: str) -> tuple[str, str, str]:
    """(sync status, health status, the health check's message) of the job's Application."""
    status = (application(gitops, job) or {}).get("status") or {}
    return ((status.get("sync") or {}).get("status", ""),
            (status.get("health") or {}).get("status", ""),
            state_health(gitops, job).get("message", ""))


def describe(gitops: GitOps, job: str) -> str:
    found = application(gitops, job)
    return json.dumps((found or {}).get("status", {}), indent=1)[-3000:]


@dataclass
class Deployed:
    """The repository after its first push, and what was watched from that push on."""

    repository: Repository
    health_seen: list[str]  # the health of the example's state, sampled until Healthy
    gang: GangWatch


def sample_health(gitops: GitOps, job: str, seen: list[str]) -> None:
    deadline = time.monotonic() + TRAINING_TIMEOUT
    while time.monotonic() < deadline and "Healthy" not in seen:
        seen.append(state_health(gitops, job).get("status", ""))
        time.sleep(0.2)


@pytest.fixture(scope="module")
def deployed(gitops: GitOps, tmp_path_factory: pytest.TempPathFactory) -> Deployed:
    """The user's repository: the example `init` wrote (set to release itself) and the
    stand-in jobs of the tests below, pushed at once so that they run side by side; then the
    Argo CD files of `init` applied as the docs say."""
    node = gitops.node
    directory = tmp_path_factory.mktemp("argo-cd") / "training-jobs"
    repository = init_repository(gitops, directory, "argo-cd-jobs")
    # The health check goes into argocd-cm once, when Argo CD is set up (docs/gitops.md): Argo
    # CD computes a resource's health when the resource changes, with the checks it has then.
    node.kubectl("-n", "argocd", "patch", "configmap", "argocd-cm", "--patch-file",
                 str(repository.deploy_file("deploy/argocd/argocd-cm-health.yaml")))
    repository.edit_job("example", "  storage:\n", "  onSuccess: release\n  storage:\n")
    repository.write_job("gives-up", stand_in_job(
        "gives-up", 1, ["--exit", "3"], "  failurePolicy: {doNotRetryExitCodes: [3]}\n"),
        STAND_IN)
    repository.write_job("grows", stand_in_job("grows", 2, ["--seconds", "3600"]), STAND_IN)
    repository.write_job("short-lived", stand_in_job(
        "short-lived", 1, ["--seconds", "3600"],
        "  storage:\n    shared: {mountPath: /mnt/shared, size: 1Gi, whenDeleted: Delete}\n"),
        STAND_IN)
    install_volcano_crds(node)
    repository.write_job("ganged", stand_in_job(
        "ganged", 2, ["--seconds", "3600"], "  scheduling: {gang: volcano}\n"), STAND_IN)
    gang = GangWatch(node, "ganged", 2)
    repository.write_job("swept", stand_in_job(
        "swept", 1, ["--seconds", "$(SECONDS_TO_TRAIN)"],
        '  sweep: {parameters: {SECONDS_TO_TRAIN: ["3600", "3601"]}}\n'), STAND_IN)
    repository.push("The example, released when it has succeeded, and the tests' jobs")
    node.kubectl("apply", "-f", str(repository.deploy_file("deploy/argocd/applicationset.yaml")))
    seen: list[str] = []
    threading.Thread(target=sample_health, args=(gitops, "example", seen), daemon=True).start()
    return Deployed(repository, seen, gang)


def test_the_example_trains_and_releases_itself_and_stays_released(
        gitops: GitOps, deployed: Deployed) -> None:
    """Push → Application → StatefulSets → pods on the node → real TensorFlow trains → the
    job's pods scale it to 0; Argo CD's health check (inside Argo CD) says Progressing while
    it trains, then Healthy; self-heal does not scale it up again."""
    node = gitops.node
    started = time.monotonic()
    wait_for("the example's Application Synced and Healthy",
             lambda: sync_and_health(gitops, "example")[:2] == ("Synced", "Healthy"),
             TRAINING_TIMEOUT, lambda: describe(gitops, "example") + node.log()[-3000:])
    assert "Progressing" in deployed.health_seen, deployed.health_seen  # while it trained
    wait_released(node, "example")
    revision = compiled_revision(deployed.repository, "example")
    assert state_records(node, "example") == {"worker-0": f"succeeded {revision}",
                                              "worker-1": f"succeeded {revision}"}
    assert sync_and_health(gitops, "example") == ("Synced", "Healthy",
                                                  f"succeeded at revision {revision}")
    # Nothing but Argo CD's own comparison keeps it released (the Flux file's policy is not
    # installed yet).
    assert not node.kubectl("get", "mutatingadmissionpolicies", "-o", "name").strip()
    # Self-heal compares every 5 s here: three rounds later the job is still released.
    time.sleep(20)
    assert set(stateful_set_replicas(node, "example").values()) == {0}
    assert job_pods(node, "example") == {}
    assert sync_and_health(gitops, "example")[:2] == ("Synced", "Healthy")
    print(f"Argo CD: the example trained and released itself; checked "
          f"{time.monotonic() - started:.0f} s")


def test_a_job_that_gives_up_is_degraded(gitops: GitOps, deployed: Deployed) -> None:
    wait_for("the Application Degraded", lambda: sync_and_health(gitops, "gives-up")[1]
             == "Degraded", TRAINING_TIMEOUT, lambda: describe(gitops, "gives-up"))
    assert sync_and_health(gitops, "gives-up")[2] == (
        "failed for good: worker-0 (exit 3 after 0 restarts)")


def test_a_gang_group_is_applied_before_any_pod(gitops: GitOps, deployed: Deployed) -> None:
    """Volcano's PodGroup carries an earlier sync wave: Argo CD creates it, then the
    StatefulSets whose pods join it."""
    deployed.gang.assert_group_came_first(TRAINING_TIMEOUT)


def test_more_workers_roll_the_whole_job_to_the_new_revision(
        gitops: GitOps, deployed: Deployed) -> None:
    node, repository = gitops.node, deployed.repository
    first = compiled_revision(repository, "grows")
    wait_for("two workers training", lambda: every_task_trained_on(node, "grows", first, 2),
             TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    repository.edit_job("grows", "replicas: 2", "replicas: 3")
    pushed = repository.push("Three workers")
    second = compiled_revision(repository, "grows")
    assert second != first
    wait_for("three workers on the new revision",
             lambda: pods_on_revision(node, "grows", second, 3), TRAINING_TIMEOUT,
             lambda: describe(gitops, "grows"))
    wait_for("every worker training in the cluster of three",
             lambda: every_task_trained_on(node, "grows", second, 3), TRAINING_TIMEOUT,
             lambda: node.log()[-4000:])
    stateful_set = node.get("statefulset", "grows-worker", "-n", NAMESPACE)
    for pod in job_pods(node, "grows").values():
        assert pod["metadata"]["labels"]["controller-revision-hash"] == (
            stateful_set["status"]["updateRevision"])
    print(f"Argo CD: 2 -> 3 workers rolled {time.monotonic() - pushed:.0f} s after the push")


def test_a_deleted_job_is_pruned_with_its_claim(gitops: GitOps, deployed: Deployed) -> None:
    node, repository = gitops.node, deployed.repository
    wait_for("the job's pod", lambda: job_pods(node, "short-lived"), TRAINING_TIMEOUT,
             lambda: describe(gitops, "short-lived"))
    assert "persistentvolumeclaim/short-lived-shared" in job_objects(node, "short-lived")
    shutil.rmtree(repository.directory / "jobs" / "short-lived")
    pushed = repository.push("The job is done")
    assert not (repository.directory / "output" / "short-lived").exists()
    wait_for("every object of the job pruned", lambda: not job_objects(node, "short-lived"),
             SYNC_TIMEOUT, lambda: "\n".join(job_objects(node, "short-lived")))
    wait_for("the job's Application gone", lambda: application(gitops, "short-lived") is None,
             SYNC_TIMEOUT, lambda: describe(gitops, "short-lived"))
    print(f"Argo CD: a deleted job pruned {time.monotonic() - pushed:.0f} s after the push")


def test_each_trial_of_a_sweep_is_an_application_and_a_removed_value_prunes_its_trial(
        gitops: GitOps, deployed: Deployed) -> None:
    """The ApplicationSet `init` writes makes an Application of each trial's directory; a value
    removed from the grid prunes its trial's Application and objects, and the trial that stays
    keeps its pod (its files did not change)."""
    node, repository = gitops.node, deployed.repository
    kept, dropped = (trial_name("swept", [("SECONDS_TO_TRAIN", seconds)])
                     for seconds in ("3600", "3601"))

    def running(trial: str) -> bool:
        return any(pod["status"].get("phase") == "Running"
                   for pod in job_pods(node, trial).values())

    wait_for("each trial's pod running", lambda: running(kept) and running(dropped),
             TRAINING_TIMEOUT, lambda: describe(gitops, kept) + describe(gitops, dropped))
    assert application(gitops, kept) is not None and application(gitops, dropped) is not None
    (before,) = [pod["metadata"]["uid"] for pod in job_pods(node, kept).values()]
    repository.edit_job("swept", '["3600", "3601"]', '["3600"]')
    pushed = repository.push("One trial is enough")
    assert not (repository.directory / "output" / dropped).exists()
    wait_for("the dropped trial's objects pruned", lambda: not job_objects(node, dropped),
             SYNC_TIMEOUT, lambda: "\n".join(job_objects(node, dropped)))
    wait_for("the dropped trial's Application gone",
             lambda: application(gitops, dropped) is None, SYNC_TIMEOUT,
             lambda: describe(gitops, dropped))
    print(f"Argo CD: a trial removed from the grid pruned {time.monotonic() - pushed:.0f} s "
          "after the push")
    assert [pod["metadata"]["uid"] for pod in job_pods(node, kept).values()] == [before]
    assert sync_and_health(gitops, kept)[0] == "Synced"


def test_a_push_is_applied_within_seconds(gitops: GitOps, deployed: Deployed) -> None:
    """With the tier's settings (applications compared every 5 s, heads cached 5 s)."""
    node, repository = gitops.node, deployed.repository
    # The job runs first (whatever ran before this test), so the time is the push's alone.
    workers = "grows-worker"
    wait_for("the job applied", lambda: applied_revision(node, NAMESPACE, workers) is not None,
             SYNC_TIMEOUT)
    repository.edit_job("grows", '"3600"', '"3601"')
    pushed = repository.push("A change")
    revision = compiled_revision(repository, "grows")
    wait_for("the change applied",
             lambda: applied_revision(node, NAMESPACE, workers) == revision,
             SYNC_TIMEOUT)
    changed = time.monotonic() - pushed
    print(f"Argo CD: push -> change applied in {changed:.1f} s")
    assert changed <= PUSH_TO_APPLIED_SECONDS, changed



def test_deleting_every_job_prunes_them_all_and_their_applications(
        gitops: GitOps, deployed: Deployed) -> None:
    """The repository's last jobs deleted by one push: every Application goes and every
    object of every job is pruned; `output/` stays in git with its README alone. (Last in
    this module: it ends every job the tests started.)"""
    node, repository = gitops.node, deployed.repository
    jobs = [directory.name for directory in job_directories(repository.directory / "output")]
    assert jobs
    wait_for("every job's Application", lambda: all(application(gitops, job) for job in jobs),
             SYNC_TIMEOUT)
    # The example's claim outlives it (whenDeleted: Retain, the default); nothing else does.
    kept = [f"persistentvolumeclaim/{job}-shared" for job in jobs
            if f"persistentvolumeclaim/{job}-shared" in job_objects(node, job)]
    assert kept
    for job in (repository.directory / "jobs").iterdir():
        if job.is_dir():  # jobs/ also holds the schema editors read
            shutil.rmtree(job)
    pushed = repository.push("No job left")
    assert repository.git("ls-tree", "--name-only", "-r", "HEAD", "output").split() == [
        "output/README.md"]

    def left() -> list[str]:
        return [item for job in jobs for item in job_objects(node, job)]

    wait_for("every object of every job pruned but the kept claims", lambda: left() == kept,
             SYNC_TIMEOUT,
             lambda: "\n".join(o for job in jobs for o in job_objects(node, job)))
    wait_for("every Application gone",
             lambda: not any(application(gitops, job) for job in jobs), SYNC_TIMEOUT)
    print(f"Argo CD: every job pruned {time.monotonic() - pushed:.0f} s after the push that "
          "deleted the last ones")
    node.kubectl("delete", *kept, "-n", NAMESPACE)  # as a user does when done with the data
