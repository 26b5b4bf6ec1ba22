"""End to end on the local node: real Kubernetes controllers, real TensorFlow, pods as processes.

`scripts/control-plane.sh up --node` starts the control plane and the node agent; each case
compiles a copy of the mnist example with `tfcompile build`, applies it with
`kubectl apply --server-side -k` into a namespace of its own, and watches the StatefulSet
controller, the scheduler, the EndpointSlice controller and the node agent do the rest. Needs root
(namespaces), TensorFlow, and the control plane binaries (built from source with Go once).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.cluster.local_node import (
    Job,
    LocalNode,
    build,
    copy_example,
    fresh_namespace,
    processes_of_pod,
    remove_namespace,
    start_local_node,
    wait_for,
)

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.end_to_end,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

ACCURACY_BAR = 0.90
TRAINING_TIMEOUT = 600.0  # two cores shared with other work: generous, but bounded


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNode]:
    yield from start_local_node(tmp_path_factory.mktemp("local-node") / "run")


def results(node: LocalNode, namespace: str, job: Job, replicas: int) -> list[dict[str, Any]]:
    directory = node.claim_directory(namespace, f"{job.name}-shared") / "results"
    paths = [directory / f"worker-{index}.json" for index in range(replicas)]
    if not all(path.exists() for path in paths):
        return []
    return [json.loads(path.read_text()) for path in paths]


def progress(node: LocalNode, namespace: str, job: Job, index: int) -> list[dict[str, Any]]:
    shared = node.claim_directory(namespace, f"{job.name}-shared")
    path = shared / "progress" / f"worker-{index}.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def apply(node: LocalNode, directory: Path, namespace: str) -> None:
    node.kubectl("apply", "--server-side", "-k", str(directory), "-n", namespace)


def pods(node: LocalNode, namespace: str) -> dict[str, Any]:
    return {pod["metadata"]["name"]: pod for pod in node.get("pods", "-n", namespace)["items"]}


def test_mnist_trains_under_the_statefulset_controller(node: LocalNode, tmp_path: Path) -> None:
    started = time.monotonic()
    job = copy_example(tmp_path, "mnist", {})
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    finals = wait_for("both workers' results", lambda: results(node, namespace, job, 2),
                      TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    assert [final["replicas"] for final in finals] == [2, 2]
    assert [final["epochs_completed"] for final in finals] == [8, 8]
    assert finals[0]["final_loss"] == pytest.approx(finals[1]["final_loss"], abs=1e-6)
    assert all(final["accuracy"] >= ACCURACY_BAR for final in finals)

    # What the node reported: Running, Ready, an address on the node's pod network.
    running = pods(node, namespace)
    assert sorted(running) == [job.pod("worker", 0), job.pod("worker", 1)]
    for pod in running.values():
        status = pod["status"]
        assert status["phase"] == "Running"
        assert {c["type"]: c["status"] for c in status["conditions"]} == {
            "PodScheduled": "True", "Initialized": "True", "ContainersReady": "True",
            "Ready": "True"}
        assert status["podIP"].startswith("10.244.")
        assert status["containerStatuses"][0]["restartCount"] == 0
        assert pod["spec"]["nodeName"] == "tfcompile-node"
    # The headless Service has endpoints: the EndpointSlice controller saw the pods' addresses.
    slices = node.get("endpointslices", "-n", namespace,
                      "-l", f"kubernetes.io/service-name={job.name}-worker")["items"]
    addresses = sorted(address for piece in slices for endpoint in piece["endpoints"] or []
                       for address in endpoint["addresses"])
    assert addresses == sorted(pod["status"]["podIP"] for pod in running.values())
    claim = node.get("persistentvolumeclaim", f"{job.name}-shared", "-n", namespace)
    assert claim["status"]["phase"] == "Bound"
    succeeded = "tfcompile: training succeeded; idling (delete or suspend the job to stop)"

    def recorded() -> bool:
        return all(succeeded in node.pod_lines(namespace, name) for name in running)

    wait_for("the launchers to record success", recorded, 60)
    print(f"mnist trained on the local node in {time.monotonic() - started:.0f} s")
    remove_namespace(node, namespace, job)


RESUMED_EPOCHS = 120
ROLLED_EPOCHS = 200


def test_a_deleted_worker_comes_back_and_training_resumes(node: LocalNode, tmp_path: Path) -> None:
    started = time.monotonic()
    # An epoch takes about half a second: enough of them that training outlasts the deletion.
    job = copy_example(tmp_path, "mnist", {'"8"': f'"{RESUMED_EPOCHS}"'})
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    victim = job.pod("worker", 1)
    wait_for("three epochs", lambda: len(progress(node, namespace, job, 1)) >= 3,
             TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    first_uid = pods(node, namespace)[victim]["metadata"]["uid"]
    node.kubectl("delete", "pod", victim, "-n", namespace, "--wait=false")
    finals = wait_for("the workers' results", lambda: results(node, namespace, job, 2),
                      TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    for final in finals:
        assert final["epochs_completed"] == RESUMED_EPOCHS and final["initial_epoch"] > 0, finals
        assert final["accuracy"] >= ACCURACY_BAR
    records = progress(node, namespace, job, 1)
    attempts = list(dict.fromkeys(record["attempt"] for record in records))
    assert len(attempts) >= 2, "the deleted worker never trained again"
    resumed = [record["epoch"] for record in records if record["attempt"] == attempts[-1]]
    assert resumed[0] > 0 and resumed[-1] == RESUMED_EPOCHS - 1, records
    now = pods(node, namespace)
    assert now[victim]["metadata"]["uid"] != first_uid, "the StatefulSet made a new pod"
    # The survivor's training failed with its peer; the node restarted its container and said so.
    survivor = now[job.pod("worker", 0)]["status"]["containerStatuses"][0]
    assert survivor["restartCount"] >= 1
    assert survivor["lastState"]["terminated"]["exitCode"] != 0
    assert survivor["lastState"]["terminated"]["reason"] == "Error"
    print(f"a deleted worker came back and training resumed in {time.monotonic() - started:.0f} s")
    remove_namespace(node, namespace, job)


def test_a_suspended_job_has_no_processes(node: LocalNode, tmp_path: Path) -> None:
    started = time.monotonic()
    job = copy_example(tmp_path, "mnist", {'"8"': '"200"'})
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    wait_for("an epoch", lambda: progress(node, namespace, job, 0), TRAINING_TIMEOUT,
             lambda: node.log()[-3000:])
    assert processes_of_pod(job.pod("worker", 0)) and processes_of_pod(job.pod("worker", 1))
    build(job, {"spec:\n": "spec:\n  suspend: true\n"})
    apply(node, job.compiled, namespace)
    wait_for("no pods", lambda: not pods(node, namespace), 120)
    wait_for("no processes", lambda: not (processes_of_pod(job.pod("worker", 0))
                                          or processes_of_pod(job.pod("worker", 1))), 60)
    assert node.container_helpers() == []
    # Storage is kept: the claim and the checkpoint stay for when the job resumes.
    claim = node.get("persistentvolumeclaim", f"{job.name}-shared", "-n", namespace)
    assert claim["status"]["phase"] == "Bound"
    assert progress(node, namespace, job, 0)
    print(f"a suspended job stopped in {time.monotonic() - started:.0f} s")
    remove_namespace(node, namespace, job)


def job_revision(job: Job) -> str:
    """The revision the compiled job's pods carry."""
    path = next(job.compiled.glob("statefulset-*.yaml"))
    stateful_set = YAML(typ="safe").load(path.read_text())
    return str(stateful_set["spec"]["template"]["metadata"]["annotations"][
        "tfcompile.dev/revision"])


def test_more_workers_roll_every_pod_onto_the_new_revision(node: LocalNode, tmp_path: Path) -> None:
    """2 -> 3 workers while training: the StatefulSet controller replaces the pods one by one,
    the revision gate keeps old and new TF_CONFIGs from training together, and the new cluster
    of three resumes from the checkpoint."""
    started = time.monotonic()
    job = copy_example(tmp_path, "mnist", {'"8"': f'"{ROLLED_EPOCHS}"'})
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    wait_for("four epochs", lambda: len(progress(node, namespace, job, 0)) >= 4,
             TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    old_revision = job_revision(job)
    assert pods(node, namespace)[job.pod("worker", 0)]["metadata"]["annotations"][
        "tfcompile.dev/revision"] == old_revision
    changed = time.monotonic()
    build(job, {"replicas: 2": "replicas: 3"})
    apply(node, job.compiled, namespace)
    new_revision = job_revision(job)

    def gate_opened() -> bool:
        opened = f"tfcompile: every task runs revision {new_revision}; training"
        return all(opened in node.pod_lines(namespace, job.pod("worker", index))
                   for index in range(3))

    wait_for("every pod on the new revision", gate_opened, TRAINING_TIMEOUT,
             lambda: node.log()[-4000:])
    rolled = time.monotonic() - changed
    finals = wait_for("three workers' results", lambda: results(node, namespace, job, 3),
                      TRAINING_TIMEOUT, lambda: node.log()[-4000:])
    for final in finals:
        assert final["replicas"] == 3, finals
        assert final["epochs_completed"] == ROLLED_EPOCHS and final["initial_epoch"] >= 4, finals
        assert final["accuracy"] >= ACCURACY_BAR
    stateful_set = node.get("statefulset", f"{job.name}-worker", "-n", namespace)
    assert new_revision != old_revision
    now = pods(node, namespace)
    assert len(now) == 3
    for pod in now.values():
        assert pod["metadata"]["labels"]["controller-revision-hash"] == (
            stateful_set["status"]["updateRevision"])
        assert pod["metadata"]["annotations"]["tfcompile.dev/revision"] == new_revision
    # The new worker came up while the old two trained, and waited for them to be replaced.
    newcomer = node.pod_lines(namespace, job.pod("worker", 2))
    assert any(f"revision {new_revision} waits for every task to run it" in line
               for line in newcomer), newcomer[-20:]
    # Every attempt that trained after the change ran the new cluster of three: each training
    # start line after the gate opened names three replicas.
    for index in range(3):
        lines = node.pod_lines(namespace, job.pod("worker", index))
        opened = [i for i, line in enumerate(lines)
                  if line == f"tfcompile: every task runs revision {new_revision}; training"]
        assert opened, lines[-20:]
        starts = [line for line in lines[opened[0]:] if "replicas, attempt" in line]
        assert starts and all(": 3 replicas" in line for line in starts), starts
    print(f"2 -> 3 workers: every pod on the new revision {rolled:.0f} s after the change, "
          f"training done {time.monotonic() - changed:.0f} s after it "
          f"({time.monotonic() - started:.0f} s in all)")
    remove_namespace(node, namespace, job)


STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, lambda *_: print("got SIGTERM, ignoring it", flush=True))
print("up", flush=True)
while True:
    time.sleep(1)
"""


def test_a_deleted_pod_gets_sigterm_then_sigkill_after_its_grace_period(node: LocalNode) -> None:
    namespace = fresh_namespace(node)
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stubborn"},
        "spec": {"terminationGracePeriodSeconds": 4, "containers": [
            {"name": "main", "image": "python:3.11", "command": ["python", "-c", STUBBORN]}]},
    }
    manifest = Path(node.run_directory.parent / f"{namespace}.json")
    manifest.write_text(json.dumps(pod))
    node.kubectl("apply", "-f", str(manifest), "-n", namespace)
    wait_for("the pod to run", lambda: "up" in node.pod_lines(namespace, "stubborn"), 120,
             lambda: node.log()[-2000:])
    assert processes_of_pod("stubborn")
    started = time.monotonic()
    node.kubectl("delete", "pod", "stubborn", "-n", namespace, "--wait=true", "--timeout=60s")
    took = time.monotonic() - started
    assert "got SIGTERM, ignoring it" in node.pod_lines(namespace, "stubborn")
    assert 4 <= took < 30, took  # the grace period, then SIGKILL, then the pod object is gone
    assert not processes_of_pod("stubborn")
    node.kubectl("delete", "namespace", namespace, "--wait=false")
