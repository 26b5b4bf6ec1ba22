"""From a git push to a finished training under a real Flux.

A repository made by `tfcompile init`; its Flux file applied as docs/gitops.md says (only the
repository URL filled in). After each push the test asks for a reconciliation as `flux
reconcile source git training-jobs` does (the `reconcile.fluxcd.io/requestedAt` annotation),
which is what the docs tell users to do, or a webhook does, to apply a commit in seconds. Real
TensorFlow trains the example `init` writes; the other jobs run a stand-in.
"""

from __future__ import annotations

import json
import shutil
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

# On the session's real node, with every other test that runs pods (marker `node`).
pytestmark = [pytest.mark.gitops, pytest.mark.cluster, pytest.mark.end_to_end,
              pytest.mark.node]

FLUX = "flux-system"
NAME = "training-jobs"  # of the GitRepository and the Kustomization `init` writes
PUSH_TO_APPLIED_SECONDS = 10.0
EXAMPLE = "flux-example"  # the example of `init`, renamed: Argo CD's tests run one too


def flux_object(gitops: GitOps, kind: str) -> dict[str, Any]:
    return dict(gitops.node.get(kind, NAME, "-n", FLUX))


def request_reconciliation(gitops: GitOps, kind: str) -> str:
    """What `flux reconcile` does: a new value of the requestedAt annotation."""
    requested = f"{time.time():.6f}"
    gitops.node.kubectl("annotate", "--overwrite", kind, NAME, "-n", FLUX,
                        f"reconcile.fluxcd.io/requestedAt={requested}")
    return requested


def ready(gitops: GitOps, commit: str) -> bool:
    """The Kustomization Ready, with the commit applied."""
    status = flux_object(gitops, "kustomizations.kustomize.toolkit.fluxcd.io").get("status", {})
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return (conditions.get("Ready") == "True"
            and str(status.get("lastAppliedRevision", "")).endswith(commit))


def describe(gitops: GitOps) -> str:
    return json.dumps({kind: flux_object(gitops, kind).get("status") for kind in (
        "gitrepositories.source.toolkit.fluxcd.io",
        "kustomizations.kustomize.toolkit.fluxcd.io")}, indent=1)[-3000:]


def push(gitops: GitOps, repository: Repository, message: str) -> tuple[float, str]:
    """Push, then ask Flux to fetch it; (time of the push, commit)."""
    pushed = repository.push(message)
    request_reconciliation(gitops, "gitrepositories.source.toolkit.fluxcd.io")
    return pushed, repository.git("rev-parse", "HEAD").strip()


@dataclass
class Deployed:
    repository: Repository
    gang: GangWatch


@pytest.fixture(scope="module")
def deployed(gitops: GitOps, tmp_path_factory: pytest.TempPathFactory) -> Deployed:
    """The user's repository: the example `init` wrote (renamed, set to release itself) and the
    stand-in jobs of the tests below, pushed at once so that they run side by side; then the
    Flux file of `init` applied as the docs say, on a cluster without namespace `ml`."""
    node = gitops.node
    directory = tmp_path_factory.mktemp("flux") / "training-jobs"
    repository = init_repository(gitops, directory, "flux-jobs")
    repository.edit_job("example", "name: example", f"name: {EXAMPLE}")
    repository.edit_job("example", "  storage:\n", "  onSuccess: release\n  storage:\n")
    repository.write_job("flux-grows", stand_in_job("flux-grows", 2, ["--seconds", "3600"]),
                         STAND_IN)
    repository.write_job("flux-short-lived", stand_in_job(
        "flux-short-lived", 1, ["--seconds", "3600"],
        "  storage:\n    shared: {mountPath: /mnt/shared, size: 1Gi, whenDeleted: Delete}\n"),
        STAND_IN)
    install_volcano_crds(node)
    repository.write_job("flux-ganged", stand_in_job(
        "flux-ganged", 2, ["--seconds", "3600"], "  scheduling: {gang: volcano}\n"), STAND_IN)
    gang = GangWatch(node, "flux-ganged", 2)
    repository.push("The example, released when it has succeeded, and the tests' jobs")
    node.kubectl("apply", "--server-side", "-f",
                 str(repository.deploy_file("deploy/flux/training-jobs.yaml")))
    return Deployed(repository, gang)


def test_the_example_trains_releases_itself_and_stays_released(
        gitops: GitOps, deployed: Deployed) -> None:
    """The Kustomization Ready, the example trained with real TensorFlow and released by its
    pods, and the next reconciliation leaves it released and the Kustomization Ready."""
    node, repository = gitops.node, deployed.repository
    commit = repository.git("rev-parse", "HEAD").strip()
    wait_for("the Kustomization Ready", lambda: ready(gitops, commit), SYNC_TIMEOUT,
             lambda: describe(gitops))
    wait_released(node, EXAMPLE)
    revision = compiled_revision(repository, EXAMPLE)
    assert state_records(node, EXAMPLE) == {"worker-0": f"succeeded {revision}",
                                            "worker-1": f"succeeded {revision}"}
    requested = request_reconciliation(gitops, "kustomizations.kustomize.toolkit.fluxcd.io")
    wait_for("the next reconciliation", lambda: flux_object(
        gitops, "kustomizations.kustomize.toolkit.fluxcd.io").get("status", {}).get(
        "lastHandledReconcileAt") == requested, SYNC_TIMEOUT, lambda: describe(gitops))
    assert ready(gitops, commit)
    assert set(stateful_set_replicas(node, EXAMPLE).values()) == {0}
    assert job_pods(node, EXAMPLE) == {}


def test_a_gang_group_is_applied_before_any_pod(gitops: GitOps, deployed: Deployed) -> None:
    """kustomize-controller applies the kinds of `--custom-apply-stage-kinds` (PodGroups here,
    as docs/gitops.md says to set it) in a stage before the StatefulSets."""
    deployed.gang.assert_group_came_first(TRAINING_TIMEOUT)


def test_more_workers_roll_the_whole_job_to_the_new_revision(
        gitops: GitOps, deployed: Deployed) -> None:
    """A committed change of replicas applies (the release policy lets it through)."""
    node, repository = gitops.node, deployed.repository
    first = compiled_revision(repository, "flux-grows")
    wait_for("two workers training",
             lambda: every_task_trained_on(node, "flux-grows", first, 2), TRAINING_TIMEOUT,
             lambda: node.log()[-3000:])
    repository.edit_job("flux-grows", "replicas: 2", "replicas: 3")
    pushed, _ = push(gitops, repository, "Three workers")
    second = compiled_revision(repository, "flux-grows")
    wait_for("three workers on the new revision",
             lambda: pods_on_revision(node, "flux-grows", second, 3), TRAINING_TIMEOUT,
             lambda: describe(gitops))
    wait_for("every worker training in the cluster of three",
             lambda: every_task_trained_on(node, "flux-grows", second, 3), TRAINING_TIMEOUT,
             lambda: node.log()[-4000:])
    print(f"Flux: 2 -> 3 workers rolled {time.monotonic() - pushed:.0f} s after the push")


def test_a_released_job_follows_git_when_suspended_and_resumed(
        gitops: GitOps, deployed: Deployed) -> None:
    """Committed replicas apply to a released job too (the release policy lets a committed
    change through): `suspend: true` is applied, and `suspend: false` scales it up again,
    whereupon its pods find the success recorded and release it again without training."""
    node, repository = gitops.node, deployed.repository
    wait_released(node, EXAMPLE)
    revision = compiled_revision(repository, EXAMPLE)
    recorded = f"tfcompile: task worker-0 of revision {revision}: succeeded (recorded)"
    before = node.pod_lines(NAMESPACE, f"{EXAMPLE}-worker-0").count(recorded)
    repository.edit_job("example", "spec:\n", "spec:\n  suspend: true\n")
    _, commit = push(gitops, repository, "Suspend the example")
    wait_for("the suspension applied", lambda: ready(gitops, commit) and {
        s["metadata"]["annotations"]["tfcompile.dev/replicas"] for s in node.get(
            "statefulsets", "-n", NAMESPACE, "-l", f"tfcompile.dev/job={EXAMPLE}")["items"]}
        == {"0"}, SYNC_TIMEOUT, lambda: describe(gitops))
    repository.edit_job("example", "spec:\n  suspend: true\n", "spec:\n")
    _, commit = push(gitops, repository, "Resume the example")
    assert compiled_revision(repository, EXAMPLE) == revision
    wait_for("its pods to start and find their success recorded", lambda: node.pod_lines(
        NAMESPACE, f"{EXAMPLE}-worker-0").count(recorded) > before, TRAINING_TIMEOUT,
        lambda: describe(gitops) + node.log()[-3000:])
    wait_released(node, EXAMPLE)
    assert ready(gitops, commit)


def test_a_deleted_job_is_pruned_with_its_claim(gitops: GitOps, deployed: Deployed) -> None:
    node, repository = gitops.node, deployed.repository
    wait_for("the job's pod", lambda: job_pods(node, "flux-short-lived"), TRAINING_TIMEOUT,
             lambda: describe(gitops))
    assert "persistentvolumeclaim/flux-short-lived-shared" in job_objects(node,
                                                                         "flux-short-lived")
    shutil.rmtree(repository.directory / "jobs" / "flux-short-lived")
    pushed, _ = push(gitops, repository, "The job is done")
    wait_for("every object of the job pruned", lambda: not job_objects(node, "flux-short-lived"),
             SYNC_TIMEOUT, lambda: "\n".join(job_objects(node, "flux-short-lived")))
    print(f"Flux: a deleted job pruned {time.monotonic() - pushed:.0f} s after the push")


def test_a_push_is_applied_within_seconds(gitops: GitOps, deployed: Deployed) -> None:
    node, repository = gitops.node, deployed.repository
    # The job runs first (whatever ran before this test), so the time is the push's alone.
    workers = "flux-grows-worker"
    wait_for("the job applied", lambda: applied_revision(node, NAMESPACE, workers) is not None,
             SYNC_TIMEOUT)
    repository.edit_job("flux-grows", '"3600"', '"3601"')
    pushed, _ = push(gitops, repository, "A change")
    revision = compiled_revision(repository, "flux-grows")
    wait_for("the change applied",
             lambda: applied_revision(node, NAMESPACE, workers) == revision,
             SYNC_TIMEOUT, lambda: describe(gitops))
    changed = time.monotonic() - pushed
    print(f"Flux: push -> change applied in {changed:.1f} s")
    assert changed <= PUSH_TO_APPLIED_SECONDS, changed



def test_deleting_every_job_prunes_them_all_and_the_kustomization_stays_ready(
        gitops: GitOps, deployed: Deployed) -> None:
    """The repository's last jobs deleted by one push: git keeps `output/` (its README), so
    the Kustomization's path is still there; Flux applies an empty set, prunes every object of
    every job, and stays Ready. (Last in this module: it ends every job the tests started.)"""
    node, repository = gitops.node, deployed.repository
    jobs = [directory.name for directory in job_directories(repository.directory / "output")]
    assert jobs
    wait_for("every job applied", lambda: all(job_objects(node, job) for job in jobs),
             SYNC_TIMEOUT, lambda: describe(gitops))
    # The example's claim outlives it (whenDeleted: Retain, the default); nothing else does.
    kept = [f"persistentvolumeclaim/{job}-shared" for job in jobs
            if f"persistentvolumeclaim/{job}-shared" in job_objects(node, job)]
    assert kept
    for job in (repository.directory / "jobs").iterdir():
        if job.is_dir():  # jobs/ also holds the schema editors read
            shutil.rmtree(job)
    pushed, commit = push(gitops, repository, "No job left")
    assert repository.git("ls-tree", "--name-only", "-r", "HEAD", "output").split() == [
        "output/README.md"]

    def left() -> list[str]:
        return [item for job in jobs for item in job_objects(node, job)]

    wait_for("every object of every job pruned but the kept claims", lambda: left() == kept,
             SYNC_TIMEOUT,
             lambda: "\n".join(o for job in jobs for o in job_objects(node, job))
             + describe(gitops))
    wait_for("the Kustomization Ready at the commit", lambda: ready(gitops, commit), SYNC_TIMEOUT,
             lambda: describe(gitops))
    print(f"Flux: every job pruned {time.monotonic() - pushed:.0f} s after the push that "
          "deleted the last ones")
    node.kubectl("delete", *kept, "-n", NAMESPACE)  # as a user does when done with the data
