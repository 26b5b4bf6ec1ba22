"""End to end on the real node: real Kubernetes controllers, a real kubelet and container
runtime, real TensorFlow in the image each job names.

The session's node (tests/node_fixture.py: `scripts/control-plane.sh up --node`) runs the pods;
each case compiles a copy of an example (mnist, parameter-server) or a small failing job with
`tfcompile build`, applies it with `kubectl apply --server-side -k` into a namespace of its own,
and watches the StatefulSet controller, the scheduler, the EndpointSlice controller, the kubelet,
containerd, CoreDNS, kube-proxy and the pods' launchers (which reach the API server through the
`kubernetes` Service) do the rest. Real TensorFlow trains both examples once (marked
`end_to_end`); the tests whose subject is the controllers, the node and the launcher (an evicted
worker, suspension, a roll) run a stand-in program with the same files and no TensorFlow
(tests/stand_in_training.py) in the same image. Needs root, Go and the node's Debian packages.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import uuid
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
    job_pod_names,
    processes_of_pod,
    remove_namespace,
)
from tests.cluster.waiting import wait_for
from tests.conftest import job_text
from tests.node_fixture import RealNode

TFCOMPILE = str(Path(sys.executable).parent / "tfcompile")

# Every test that runs pods shares the session's real node (marker `node`).
pytestmark = [pytest.mark.cluster, pytest.mark.node]

ACCURACY_BAR = 0.90
TRAINING_TIMEOUT = 600.0  # two cores shared with other work: generous, but bounded


@pytest.fixture
def node(real_node: RealNode) -> LocalNode:
    """The session's real node (tests/conftest.py), shared with the GitOps tier."""
    return real_node.node


def _identity(pid: int) -> tuple[int, int]:
    """The real user and group IDs of a process."""
    fields = {line.split(":")[0]: line.split()[1:]
              for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line}
    return int(fields["Uid"][0]), int(fields["Gid"][0])


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


def state_records(node: LocalNode, namespace: str, job: Job) -> dict[str, str]:
    """What the job's launchers recorded in its state ConfigMap (task: outcome revision ...)."""
    state = node.get("configmap", f"{job.name}-state", "-n", namespace)
    return dict(state.get("data") or {})


def replicas(node: LocalNode, namespace: str, job: Job) -> dict[str, int]:
    items = node.get("statefulsets", "-n", namespace, "-l", f"tfcompile.dev/job={job.name}")
    return {item["metadata"]["name"]: item["spec"]["replicas"] for item in items["items"]}


def released(node: LocalNode, namespace: str, job: Job) -> bool:
    """Every StatefulSet of the job at 0 replicas, no pod left, no process left."""
    return (set(replicas(node, namespace, job).values()) == {0} and not pods(node, namespace)
            and not any(processes_of_pod(name) for name in job_pod_names(job)))


@pytest.mark.end_to_end  # real TensorFlow
def test_mnist_trains_records_success_and_releases_itself(node: LocalNode,
                                                          tmp_path: Path) -> None:
    """`onSuccess: release`: the workers train, record success in the state ConfigMap, and the
    launcher that completes the job scales its StatefulSet to 0 through the API server, with the
    pod's own service-account token (the local node relays `kubernetes.default.svc`)."""
    started = time.monotonic()
    job = copy_example(tmp_path, "mnist", {"  storage:\n": "  onSuccess: release\n  storage:\n"})
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    names = [job.pod("worker", 0), job.pod("worker", 1)]

    # What the node reports: Running, Ready, an address on the node's pod network.
    def ready() -> dict[str, Any] | None:
        found = pods(node, namespace)
        return found if sorted(found) == names and all(
            pod["status"].get("podIP") and {c["type"]: c["status"] for c in
                                            pod["status"].get("conditions") or []}.get("Ready")
            == "True" for pod in found.values()) else None

    running = wait_for("both pods Ready", ready, TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    for pod in running.values():
        status = pod["status"]
        assert status["phase"] == "Running"
        assert {c["type"]: c["status"] for c in status["conditions"]} == {
            "PodScheduled": "True", "PodReadyToStartContainers": "True", "Initialized": "True",
            "ContainersReady": "True", "Ready": "True"}
        assert status["podIP"].startswith("10.244.")
        container = status["containerStatuses"][0]
        assert container["restartCount"] == 0
        assert pod["spec"]["nodeName"] == "tfcompile-node"
        # A container of the runtime, from the image the job names, as the job's user.
        assert container["containerID"].startswith("containerd://")
        assert container["image"] == "docker.io/tensorflow/tensorflow:2.15.0"
        assert container["imageID"].startswith("sha256:")
        identities = {_identity(pid) for pid in processes_of_pod(pod["metadata"]["name"])}
        assert identities == {(1000, 1000)}, identities
    # The claim's files belong to the pods' group (fsGroup: 1000), set by the kubelet.
    shared = node.claim_directory(namespace, f"{job.name}-shared")
    assert shared.stat().st_gid == 1000 and shared.stat().st_mode & stat.S_ISGID
    node_object = node.get("node", "tfcompile-node")
    assert node_object["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    # The headless Service has endpoints: the EndpointSlice controller saw the pods' addresses.
    slices = node.get("endpointslices", "-n", namespace,
                      "-l", f"kubernetes.io/service-name={job.name}-worker")["items"]
    addresses = sorted(address for piece in slices for endpoint in piece["endpoints"] or []
                       for address in endpoint["addresses"])
    assert addresses == sorted(pod["status"]["podIP"] for pod in running.values())
    claim = node.get("persistentvolumeclaim", f"{job.name}-shared", "-n", namespace)
    assert claim["status"]["phase"] == "Bound"

    finals = wait_for("both workers' results", lambda: results(node, namespace, job, 2),
                      TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    assert [final["replicas"] for final in finals] == [2, 2]
    assert [final["epochs_completed"] for final in finals] == [8, 8]
    assert finals[0]["final_loss"] == pytest.approx(finals[1]["final_loss"], abs=1e-6)
    assert all(final["accuracy"] >= ACCURACY_BAR for final in finals)
    trained = time.monotonic() - started

    wait_for("the job to release itself", lambda: released(node, namespace, job), 120,
             lambda: "\n".join(node.pod_lines(namespace, names[0])[-15:]
                               + node.pod_lines(namespace, names[1])[-15:]))
    revision = job_revision(job)
    records = state_records(node, namespace, job)
    tasks = {key: value for key, value in records.items() if "." not in key}
    assert sorted(tasks) == ["worker-0", "worker-1"]
    assert all(value == f"succeeded {revision}" for value in tasks.values()), records
    # The script reported its progress (TFCOMPILE_PROGRESS_FILE); each launcher recorded the
    # last line, where the training ended, and `tfcompile status` shows it per task.
    for task in tasks:
        assert records[f"{task}.progress-revision"] == revision, records
        assert records[f"{task}.progress"].startswith("epoch 8/8, loss "), records
    shown = subprocess.run(
        [TFCOMPILE, "status", job.name, "-o", str(job.output), "-n", namespace],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "KUBECONFIG": str(node.kubeconfig)})
    assert shown.returncode == 0, shown.stderr
    assert "progress worker-0: epoch 8/8, loss " in shown.stdout, shown.stdout
    # A launcher did it (nothing else in this test scales anything).
    lines = node.pod_lines(namespace, names[0]) + node.pod_lines(namespace, names[1])
    assert f"tfcompile: scaled {job.name}-worker to 0" in lines
    assert not any("cannot read the job's state" in line or "could not" in line
                   for line in lines), lines
    # Storage stays for the next run.
    assert node.get("persistentvolumeclaim", f"{job.name}-shared", "-n", namespace)
    print(f"mnist trained in {trained:.0f} s and released itself "
          f"{time.monotonic() - started:.0f} s after it was applied")
    remove_namespace(node, namespace, job)


RESUMED_EPOCHS = 40
ROLLED_EPOCHS = 240  # a quarter second each: the training outlasts the roll
STAND_IN = Path(__file__).parents[1] / "stand_in_training.py"


def copy_stand_in(tmp_path: Path, epochs: int, epoch_seconds: float,
                  arguments: list[str] | None = None) -> Job:
    """The mnist example with the stand-in program (tests/stand_in_training.py) as its script:
    the same files on the shared volume, no TensorFlow; for the tests whose subject is what the
    controllers, the node and the launcher do."""
    more = "".join(f', "{argument}"' for argument in arguments or [])
    job = copy_example(tmp_path, "mnist", {
        '[--epochs, "8", --shared-dir, /mnt/shared]':
            f'[--epochs, "{epochs}", --shared-dir, /mnt/shared, --epoch-seconds,'
            f' "{epoch_seconds}"{more}]'})
    shutil.copyfile(STAND_IN, job.source / "train.py")
    return job


def evict(node: LocalNode, namespace: str, pod: str, tmp_path: Path) -> None:
    """Ask the Eviction API to evict `pod`, as `kubectl drain` and the cluster autoscaler do."""
    request = tmp_path / f"eviction-{pod}.json"
    request.write_text(json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": pod, "namespace": namespace}}))
    node.kubectl("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction",
                 "-f", str(request))


def workers_said(node: LocalNode, namespace: str, job: Any) -> str:
    """What each worker printed last (every incarnation: the launcher says whether a failure
    counted and why it stopped), the job's state records (the stops and failures the launchers
    read), then the node's log: what a timeout needs to be understood."""
    parts = []
    for index in range(2):
        pod = job.pod("worker", index)
        parts.append(f"--- {pod}:\n" + "\n".join(node.pod_lines(namespace, pod)[-40:]))
    try:
        records = state_records(node, namespace, job)
    except Exception as failure:  # a description must not hide the timeout
        records = {"(unreadable)": str(failure)}
    parts.append("--- state records:\n" + "\n".join(
        f"{key}: {value}" for key, value in sorted(records.items())))
    return "\n".join(parts) + "\n--- node:\n" + node.log()[-2000:]


def test_an_evicted_worker_saves_a_checkpoint_and_training_resumes_from_it_uncounted(
        node: LocalNode, tmp_path: Path) -> None:
    """Preemption: a worker evicted mid-training gets SIGTERM and the grace period the spec sets,
    saves a checkpoint, and its pod comes back; its peer's training fails with it and restarts;
    both resume from that checkpoint. With `maxRestarts: 0`, one counted failure would stop the
    job: none is counted, since the evicted pod recorded its stop before its training learnt."""
    started = time.monotonic()
    job = copy_stand_in(tmp_path, RESUMED_EPOCHS, 0.25, ["--save-every", "1000"])
    build(job, {"  storage:\n": "  failurePolicy: {maxRestarts: 0}\n  podTemplate:\n"
                               "    spec: {terminationGracePeriodSeconds: 20}\n  storage:\n"})
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    victim = job.pod("worker", 1)
    wait_for("three epochs", lambda: len(progress(node, namespace, job, 1)) >= 3,
             TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    first = pods(node, namespace)[victim]
    assert first["spec"]["terminationGracePeriodSeconds"] == 20
    evict(node, namespace, victim, tmp_path)
    finals = wait_for("the workers' results", lambda: results(node, namespace, job, 2),
                      TRAINING_TIMEOUT, lambda: workers_said(node, namespace, job))
    lines = node.pod_lines(namespace, victim)
    saved = [line for line in lines if "saved a checkpoint at epoch" in line]
    assert len(saved) == 1, lines[-20:]
    epoch = int(saved[0].split("at epoch ")[1].split(" ")[0])
    assert epoch >= 3
    for final in finals:  # both resumed from the checkpoint saved on SIGTERM (none other exists)
        assert final["epochs_completed"] == RESUMED_EPOCHS and final["initial_epoch"] == epoch, \
            finals
    records = progress(node, namespace, job, 1)
    attempts = list(dict.fromkeys(record["attempt"] for record in records))
    # Trained again: once, or more when its new training joined the survivor's before that
    # noticed the loss, and failed with it (not counted either).
    assert len(attempts) >= 2, "the evicted worker trained again"
    assert [record["epoch"] for record in records if record["attempt"] == attempts[-1]] == \
        list(range(epoch, RESUMED_EPOCHS))
    now = pods(node, namespace)
    assert now[victim]["metadata"]["uid"] != first["metadata"]["uid"]
    # The survivor's training failed with its peer and the node restarted it; not counted.
    survivor = job.pod("worker", 0)
    status = now[survivor]["status"]["containerStatuses"][0]
    assert status["restartCount"] >= 1 and status["lastState"]["terminated"]["exitCode"] != 0
    assert any("worker-1 stopped (deleted, evicted, drained or restarted for a peer's stop); "
               "not counted as a failure" in line
               for line in node.pod_lines(namespace, survivor))
    revision = job_revision(job)
    succeeded = {"worker-0": f"succeeded {revision}", "worker-1": f"succeeded {revision}"}
    wait_for("both successes recorded", lambda: state_records(node, namespace, job) == succeeded,
             60, lambda: str(state_records(node, namespace, job)))
    print(f"an evicted worker came back and training resumed in "
          f"{time.monotonic() - started:.0f} s")
    remove_namespace(node, namespace, job)


def test_a_worker_killed_mid_training_restarts_in_its_pod_and_training_resumes(
        node: LocalNode, tmp_path: Path) -> None:
    """A worker's training killed outright (SIGKILL, as the kernel's OOM killer does): the
    container's launcher counts the failure and exits, the kubelet restarts the container in
    the same pod, its peer's collective fails and restarts too, and both resume from the last
    checkpoint on the shared claim and finish."""
    started = time.monotonic()
    job = copy_stand_in(tmp_path, RESUMED_EPOCHS, 0.25, ["--save-every", "2"])
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    victim = job.pod("worker", 1)
    wait_for("five epochs", lambda: len(progress(node, namespace, job, 1)) >= 5,
             TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    first = pods(node, namespace)[victim]
    training = [pid for pid in processes_of_pod(victim)
                if b"train.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
                and b"tfcompile-launcher" not in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert training, "no training process found in the victim's container"
    for pid in training:
        os.kill(pid, 9)
    finals = wait_for("the workers' results", lambda: results(node, namespace, job, 2),
                      TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    for final in finals:
        assert final["epochs_completed"] == RESUMED_EPOCHS and final["initial_epoch"] >= 4, \
            finals
    now = pods(node, namespace)[victim]
    # The same pod: the kubelet restarted its container, it was not replaced.
    assert now["metadata"]["uid"] == first["metadata"]["uid"]
    status = now["status"]["containerStatuses"][0]
    assert status["restartCount"] >= 1, status
    assert status["lastState"]["terminated"]["exitCode"] != 0, status
    print(f"a killed worker restarted in its pod; training resumed and finished in "
          f"{time.monotonic() - started:.0f} s")
    remove_namespace(node, namespace, job)


def test_a_suspended_job_has_no_processes(node: LocalNode, tmp_path: Path) -> None:
    started = time.monotonic()
    job = copy_stand_in(tmp_path, 200, 0.5)
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
    assert node.running_containers(namespace) == []
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
    job = copy_stand_in(tmp_path, ROLLED_EPOCHS, 0.25)
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


@pytest.mark.end_to_end  # real TensorFlow
def test_parameter_server_evaluator_scores_the_last_checkpoint_then_the_job_is_released(
        node: LocalNode, tmp_path: Path) -> None:
    """The parameter-server example (chief, two workers, ps, evaluator; `onSuccess: release`):
    the chief trains and finishes, the evaluator evaluates the final checkpoint, then the job's
    own pods scale every StatefulSet to 0, the evaluator's last."""
    started = time.monotonic()
    job = copy_example(tmp_path, "parameter-server", {
        # What a local node has: no GPUs, no Azure, no load balancer; a short training.
        "  namespace: ml\n": "",
        "      gpus: 1\n": "",
        'requests: {cpu: "4", memory: 16Gi}': 'requests: {cpu: "1", memory: 1Gi}',
        'requests: {cpu: "2", memory: 8Gi}': 'requests: {cpu: "1", memory: 1Gi}',
        "  tensorboard:\n    logDir: /mnt/shared/logs\n    serviceType: LoadBalancer\n": "",
        "  overlays: [gpu, azure]\n": "",
        "args: [--shared-dir, /mnt/shared]":
            'args: [--shared-dir, /mnt/shared, --epochs, "3", --steps-per-epoch, "10"]',
    })
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    roles = ("chief", "worker", "ps", "evaluator")
    wait_for("the job to release itself", lambda: released(node, namespace, job),
             TRAINING_TIMEOUT, lambda: node.log()[-4000:])
    took = time.monotonic() - started
    shared = node.claim_directory(namespace, f"{job.name}-shared") / "results"
    chief = json.loads((shared / "chief-0.json").read_text())
    evaluator = json.loads((shared / "evaluator-0.json").read_text())
    assert chief["epochs_completed"] == 3
    assert evaluator["final"] is True and evaluator["epoch"] == 3, evaluator
    assert evaluator["checkpoint"].endswith("ckpt-0003")
    assert evaluator["accuracy"] > 0.5, evaluator  # ten digits: chance is 0.1
    assert chief["evaluator"] == evaluator, "the chief had the evaluator's final report"
    revision = job_revision(job)
    records = state_records(node, namespace, job)
    assert records["chief-0"] == f"succeeded {revision}", records
    assert records["evaluator-0"] == f"succeeded {revision}", records

    # In the node's log (one stream, in time order): the final evaluation comes before any
    # release, and each launcher that released the job scaled the evaluator after the others.
    prefixes = [f"{namespace}/{job.pod(role, 0)} | " for role in roles]
    prefixes.append(f"{namespace}/{job.pod('worker', 1)} | ")
    events: list[tuple[str, str]] = []
    for line in node.log().splitlines():
        for prefix in prefixes:
            if line.startswith(prefix):
                events.append((line[:len(prefix)], line[len(prefix):]))
    final_evaluation = next(i for i, (_, text) in enumerate(events)
                            if text.startswith("evaluator: ") and "ckpt-0003: accuracy" in text)
    scaled = [(i, source, text.split()[2]) for i, (source, text) in enumerate(events)
              if text.startswith("tfcompile: scaled ")]
    assert scaled and final_evaluation < scaled[0][0], events[-30:]
    # A launcher scales the evaluator only once the evaluator has succeeded, and then last; one
    # that releases earlier (the chief, when it succeeds first) leaves the evaluator running for
    # its last evaluation, and the evaluator's launcher releases it.
    evaluator = f"{job.name}-evaluator"
    for source in {source for _, source, _ in scaled}:
        order = [name for _, where, name in scaled if where == source]
        assert evaluator not in order or order[-1] == evaluator, (source, order)
    assert {name for _, _, name in scaled} == {f"{job.name}-{role}" for role in roles}, scaled
    print(f"parameter-server trained, evaluated and released itself in {took:.0f} s")
    remove_namespace(node, namespace, job)


# What each further example needs in its namespace beforehand (what its comments tell a user to
# create once), and what is cut for the test node: a sweep of two trials instead of nine.
EXAMPLE_NEEDS: dict[str, tuple[list[str], dict[str, dict[str, str]]]] = {
    "tf-spawner": (["tf-spawner-data"],
                   {"s3-credentials": {"access-key": "key", "secret-key": "secret"}}),
    "tensorflow1": ([], {}),
    "sweep": (["sweep-logs"], {}),
}
EXAMPLE_CUTS: dict[str, dict[str, str]] = {
    "tf-spawner": {"  storage:\n": "  onSuccess: release\n  storage:\n"},
    "tensorflow1": {"  storage:\n": "  onSuccess: release\n  storage:\n"},
    "sweep": {'LEARNING_RATE: ["0.001", "0.01", "0.1"]': 'LEARNING_RATE: ["0.01"]',
              'HIDDEN_LAYERS: ["5", "6", "7"]': 'HIDDEN_LAYERS: ["5", "6"]'},
}


def _owned_by_stateful_set(pod: dict[str, Any]) -> bool:
    return any(owner["kind"] == "StatefulSet"
               for owner in pod["metadata"].get("ownerReferences") or [])


@pytest.mark.end_to_end  # real TensorFlow
@pytest.mark.parametrize("example", sorted(EXAMPLE_NEEDS))
def test_each_further_example_trains_to_success_and_releases_itself_in_its_image(
        node: LocalNode, tmp_path: Path, example: str) -> None:
    """tf-spawner, tensorflow1 and sweep, as committed but for `onSuccess: release` (and two
    trials of the sweep): each compiled job runs in the image it names, every task records
    success, and the job's own pods scale it to zero."""
    started = time.monotonic()
    job = copy_example(tmp_path, example, EXAMPLE_CUTS[example])
    build(job)
    namespace = fresh_namespace(node)
    claims, secrets = EXAMPLE_NEEDS[example]
    for claim in claims:
        (tmp_path / f"{claim}.json").write_text(json.dumps({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteMany"],
                     "resources": {"requests": {"storage": "1Gi"}}}}))
        node.kubectl("apply", "--server-side", "-f", str(tmp_path / f"{claim}.json"))
    for secret, data in secrets.items():
        node.kubectl("create", "secret", "generic", secret, "-n", namespace,
                     *(f"--from-literal={key}={value}" for key, value in data.items()))
    directories = sorted(path for path in job.output.iterdir() if path.is_dir())
    trials = [path for path in directories if not path.name.endswith("-tensorboard")]
    assert len(trials) == (2 if example == "sweep" else 1), directories
    # The sweep's one TensorBoard over every trial's logs is a directory of its own.
    assert len(directories) - len(trials) == (1 if example == "sweep" else 0), directories
    for directory in directories:
        apply(node, directory, namespace)

    def released() -> bool:
        counts = [item["spec"]["replicas"] for item in node.get(
            "statefulsets", "-n", namespace)["items"]]
        return bool(counts) and set(counts) == {0} and not any(
            _owned_by_stateful_set(pod) for pod in pods(node, namespace).values())

    wait_for(f"{example} to release itself", released, TRAINING_TIMEOUT,
             lambda: node.log()[-4000:])
    if example == "sweep":  # its TensorBoard runs in the job's image, over the shared logs
        def board_ready() -> bool:
            found = node.get("pods", "-n", namespace, "-l",
                             "app.kubernetes.io/component=tensorboard")["items"]
            return bool(found) and all(
                status.get("ready") for pod in found
                for status in pod["status"].get("containerStatuses") or [{}]) and all(
                any("TensorBoard" in line and "http://" in line
                    for line in node.pod_lines(namespace, pod["metadata"]["name"]))
                for pod in found)

        wait_for("the sweep's TensorBoard ready", board_ready, 300, lambda: node.log()[-3000:])
    for directory in trials:
        records = node.get("configmap", f"{directory.name}-state", "-n", namespace)["data"]
        revision = job_revision(Job(directory.name, job.source, job.output))
        assert records and all(value.startswith(f"succeeded {revision}")
                               for key, value in records.items()
                               if not key.startswith(("failed-", "result"))), records
    print(f"{example} trained and released itself in {time.monotonic() - started:.0f} s")
    remove_namespace(node, namespace, job)


PYTHON_REPORT = """\
import platform, sys
print("training under", platform.python_implementation(), platform.python_version(), flush=True)
"""


@pytest.mark.parametrize(("image", "implementation"), [
    ("python:3.11", "CPython 3.11"), ("localhost/tfcompile-test/pypy3:3.9", "PyPy 3.9")])
def test_the_launcher_runs_under_each_python_the_image_contract_allows(
        node: LocalNode, tmp_path: Path, image: str, implementation: str) -> None:
    """The launcher in a real container of Debian's CPython and of Debian's PyPy: it gates,
    runs the training, records success and releases the job, as in a TensorFlow image."""
    name = f"python-{uuid.uuid4().hex[:6]}"
    source = tmp_path / name
    source.mkdir()
    (source / "report.py").write_text(PYTHON_REPORT)
    (source / "job.yaml").write_text(job_text(
        name, image=image, script="report.py", command=None, spec_lines="args: []",
        roles="worker: {replicas: 2}") + "  onSuccess: release\n")
    job = Job(name, source, tmp_path / "output")
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    wait_for("the job to release itself", lambda: released(node, namespace, job),
             TRAINING_TIMEOUT, lambda: node.log()[-3000:])
    revision = job_revision(job)
    assert state_records(node, namespace, job) == {
        "worker-0": f"succeeded {revision}", "worker-1": f"succeeded {revision}"}
    for index in range(2):
        lines = node.pod_lines(namespace, job.pod("worker", index))
        assert any(line.startswith(f"training under {implementation}") for line in lines), lines
    remove_namespace(node, namespace, job)


# The training command of the failing jobs: it probes what the pod's own token may do through
# `kubernetes.default.svc` (the pod's CA checks the API server): grow its job, scale another
# job, touch its StatefulSet itself, list, read Secrets, delete its pod, record for another task;
# then it fails with exit status 3.
FAILING_SCRIPT = """\
import json, os, ssl, sys, urllib.error, urllib.request

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def call(method, path, body=None):
    token = open(ACCOUNT + "/token").read().strip()
    request = urllib.request.Request(
        "https://kubernetes.default.svc" + path, method=method,
        data=None if body is None else json.dumps(body).encode())
    request.add_header("Authorization", "Bearer " + token)
    request.add_header("Content-Type", "application/merge-patch+json")
    context = ssl.create_default_context(cafile=ACCOUNT + "/ca.crt")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            status = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    print("probe:", method, path.rsplit("/namespaces/", 1)[-1].split("/", 1)[-1], status,
          flush=True)


namespace = open(ACCOUNT + "/namespace").read().strip()
statefulsets = "/apis/apps/v1/namespaces/" + namespace + "/statefulsets"
for own, other in zip(sys.argv[1::2], sys.argv[2::2]):
    call("GET", statefulsets + "/" + own + "/scale")
    call("PATCH", statefulsets + "/" + own + "/scale", {"spec": {"replicas": 40}})
    call("PATCH", statefulsets + "/" + other + "/scale", {"spec": {"replicas": 1}})
    call("PATCH", statefulsets + "/" + own, {"spec": {"replicas": 1}})
    call("GET", statefulsets)
    call("GET", "/api/v1/namespaces/" + namespace + "/secrets")
    call("DELETE", "/api/v1/namespaces/" + namespace + "/pods/" + os.environ["HOSTNAME"])
    call("PATCH", "/api/v1/namespaces/" + namespace + "/configmaps/" + own.rsplit("-", 1)[0]
         + "-state", {"data": {"worker-1": "succeeded 0123456789ab"}})
print("failing with exit status 3", flush=True)
sys.exit(3)
"""


def failing_job(tmp_path: Path, prefix: str, extra: str, arguments: list[str] | None = None,
                name: str | None = None) -> Job:
    name = name or f"{prefix}-{uuid.uuid4().hex[:6]}"
    source = tmp_path / name
    source.mkdir()
    (source / "fail.py").write_text(FAILING_SCRIPT)
    (source / "job.yaml").write_text(job_text(
        name, image="python:3.11", script="fail.py", command=None,
        spec_lines=f"args: {json.dumps(arguments or [])}", roles="worker: {replicas: 1}") + extra)
    job = Job(name, source, tmp_path / "output")
    build(job)
    return job


def container_status(node: LocalNode, namespace: str, pod: str) -> dict[str, Any] | None:
    found = pods(node, namespace).get(pod)
    statuses = (found or {}).get("status", {}).get("containerStatuses") or [None]
    status: dict[str, Any] | None = statuses[0]
    return status


def test_a_task_that_always_fails_stops_at_its_restart_limit_and_idles(
        node: LocalNode, tmp_path: Path) -> None:
    """`failurePolicy: {maxRestarts: 2}`: the kubelet restarts the failing command twice, then
    the launcher records the failure in the state ConfigMap and the pod idles, Running."""
    started = time.monotonic()
    job = failing_job(tmp_path, "fails", "  failurePolicy: {maxRestarts: 2}\n")
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    pod = job.pod("worker", 0)
    revision = job_revision(job)
    wait_for("the failure record", lambda: state_records(node, namespace, job).get(
        "worker-0", "").startswith("failed "),
             TRAINING_TIMEOUT, lambda: "\n".join(node.pod_lines(namespace, pod)[-20:]))
    took = time.monotonic() - started
    assert state_records(node, namespace, job) == {
        "worker-0": f"failed {revision} exit 3 after 2 restarts",
        "failed-revision": revision, "failed-task": "worker-0 (exit 3 after 2 restarts)"}

    def idling() -> dict[str, Any] | None:
        status = container_status(node, namespace, pod)
        return status if status and "running" in status["state"] else None

    status = wait_for("the pod to idle", idling, 60)
    assert status["restartCount"] == 2
    assert status["lastState"]["terminated"]["exitCode"] == 3
    # No more restarts: the next back-off (2 s doubling) would have been due within 8 s.
    time.sleep(12)
    later = idling()
    assert later is not None and later["restartCount"] == 2, later
    assert pods(node, namespace)[pod]["status"]["phase"] == "Running"
    lines = node.pod_lines(namespace, pod)
    assert lines.count("failing with exit status 3") == 3
    assert ("tfcompile: training failed (exit 3 after 2 restarts); no restarts left "
            "(failurePolicy.maxRestarts)") in lines
    assert ("tfcompile: the task stopped retrying; idling (delete or suspend the job to stop)"
            in lines)
    assert replicas(node, namespace, job) == {f"{job.name}-worker": 1}
    print(f"a failing task stopped at its limit in {took:.0f} s")
    remove_namespace(node, namespace, job)


def test_an_exit_code_that_must_not_retry_releases_the_job_whose_pods_scale_only_it(
        node: LocalNode, tmp_path: Path) -> None:
    """`doNotRetryExitCodes: [3]` with `onFailure: release`: the first failure is final, is
    recorded, and the job's pod scales its own StatefulSet to 0. Before failing, the pod shows
    with its own projected token what it may do: get its job's scale and, under the launcher
    policy, set it to 0 only (40 is refused, as is another task's record); nothing else."""
    started = time.monotonic()
    other = failing_job(tmp_path, "other", "  suspend: true\n")
    name = f"stops-{uuid.uuid4().hex[:6]}"
    job = failing_job(tmp_path, "stops",
                      "  onFailure: release\n  failurePolicy: {doNotRetryExitCodes: [3]}\n",
                      [f"{name}-worker", f"{other.name}-worker"], name=name)
    namespace = fresh_namespace(node)
    apply(node, other.compiled, namespace)
    apply(node, job.compiled, namespace)
    pod = job.pod("worker", 0)
    wait_for("the job to release itself", lambda: released(node, namespace, job),
             TRAINING_TIMEOUT, lambda: "\n".join(node.pod_lines(namespace, pod)[-20:]))
    took = time.monotonic() - started
    lines = node.pod_lines(namespace, pod)
    own, foreign = f"statefulsets/{job.name}-worker", f"statefulsets/{other.name}-worker"
    assert [line for line in lines if line.startswith("probe:")] == [
        f"probe: GET {own}/scale 200",
        f"probe: PATCH {own}/scale 403",  # to 40: the launcher policy
        f"probe: PATCH {foreign}/scale 403",
        f"probe: PATCH {own} 403",
        "probe: GET statefulsets 403",
        "probe: GET secrets 403",
        f"probe: DELETE pods/{pod} 403",
        f"probe: PATCH configmaps/{job.name}-state 403",  # worker-1's record: the policy
    ]
    assert lines.count("failing with exit status 3") == 1
    assert ("tfcompile: training failed (exit 3 after 0 restarts); that exit code means do not "
            "retry") in lines
    assert f"tfcompile: scaled {job.name}-worker to 0" in lines
    assert state_records(node, namespace, job) == {
        "worker-0": f"failed {job_revision(job)} exit 3 after 0 restarts",
        "failed-revision": job_revision(job),
        "failed-task": "worker-0 (exit 3 after 0 restarts)"}
    # The other job was left alone.
    assert replicas(node, namespace, other) == {f"{other.name}-worker": 0}
    print(f"a task that must not retry released its job in {took:.0f} s")
    remove_namespace(node, namespace, job, other)


HANGING_SCRIPT = """\
import signal, sys, time


def save(number, frame):
    print("saving a checkpoint on SIGTERM", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, save)
print("training", flush=True)
while True:
    time.sleep(1)
"""


def test_a_revision_past_its_deadline_is_stopped_recorded_failed_and_released(
        node: LocalNode, tmp_path: Path) -> None:
    """`deadline: 4s` with `onFailure: release`: a training that hangs gets SIGTERM when its
    revision has trained 4 s, the failure is recorded with its reason, and the job's own pod
    scales its StatefulSet to 0."""
    started = time.monotonic()
    name = f"late-{uuid.uuid4().hex[:6]}"
    source = tmp_path / name
    source.mkdir()
    (source / "hang.py").write_text(HANGING_SCRIPT)
    (source / "job.yaml").write_text(job_text(
        name, image="python:3.11", script="hang.py", command=None, spec_lines="args: []",
        roles="worker: {replicas: 1}") + "  deadline: 4s\n  onFailure: release\n")
    job = Job(name, source, tmp_path / "output")
    build(job)
    namespace = fresh_namespace(node)
    apply(node, job.compiled, namespace)
    pod = job.pod("worker", 0)
    wait_for("the job to release itself", lambda: released(node, namespace, job),
             TRAINING_TIMEOUT, lambda: "\n".join(node.pod_lines(namespace, pod)[-20:]))
    revision = job_revision(job)
    assert state_records(node, namespace, job) == {
        "worker-0": f"failed {revision} deadline 4s passed", "failed-revision": revision,
        "failed-task": "worker-0 (deadline 4s passed)"}
    lines = node.pod_lines(namespace, pod)
    assert lines.index("training") < lines.index("saving a checkpoint on SIGTERM")
    assert (f"tfcompile: revision {revision} has trained for its deadline; stopped (deadline 4s "
            "passed)") in lines
    assert f"tfcompile: scaled {job.name}-worker to 0" in lines
    print(f"a revision past its deadline was released in {time.monotonic() - started:.0f} s")
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


CLAIMS_SCRIPT = """
import errno, json, os
pod = os.environ["HOSTNAME"]
report = {"dataset": open("/data/part-0.txt").read()}
try:
    open("/data/written-by-training", "w").close()
    report["dataset_write"] = "written"
except OSError as error:
    report["dataset_write"] = errno.errorcode.get(error.errno, str(error.errno))
report["models"] = os.path.isdir("/models")
if report["models"]:
    with open(f"/models/{pod}.txt", "w") as model:
        model.write("weights")
os.makedirs("/mnt/shared/results", exist_ok=True)
with open(f"/mnt/shared/results/{pod}.json", "w") as result:
    json.dump(report, result)
"""

CLAIMS_STORAGE = """\
  storage:
    shared: {mountPath: /mnt/shared, size: 1Gi}
    volumes:
    - {name: dataset, claimName: dataset, mountPath: /data, readOnly: true, subPath: train}
    - {name: models, claimName: models, mountPath: /models, readOnly: false, roles: [chief]}
"""


def test_existing_claims_are_mounted_as_the_spec_says_and_outlive_the_job(
        node: LocalNode, tmp_path: Path) -> None:
    """`storage.volumes`: a dataset claim made beforehand, mounted read-only from its `train`
    folder in every role, and a model store only the chief writes. Deleting every object of
    the job (what prune does when job.yaml goes) deletes its own claim, not these."""
    namespace = fresh_namespace(node)
    for claim in ("dataset", "models"):
        (tmp_path / f"{claim}.json").write_text(json.dumps({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteMany"],
                     "resources": {"requests": {"storage": "1Gi"}}}}))
        node.kubectl("apply", "--server-side", "-f", str(tmp_path / f"{claim}.json"))
    wait_for("the claims to be bound", lambda: all(
        node.get("pvc", name, "-n", namespace)["status"].get("phase") == "Bound"
        for name in ("dataset", "models")), 60)
    dataset = node.claim_directory(namespace, "dataset")
    (dataset / "train").mkdir()
    (dataset / "train" / "part-0.txt").write_text("images")

    name = f"claims-{uuid.uuid4().hex[:6]}"
    source = tmp_path / name
    source.mkdir()
    (source / "train.py").write_text(CLAIMS_SCRIPT)
    (source / "job.yaml").write_text(job_text(
        name, image="python:3.11", script="train.py", command=None,
        roles="chief: {replicas: 1}\nworker: {replicas: 1}") + CLAIMS_STORAGE)
    job = Job(name, source, tmp_path / "output")
    build(job)
    apply(node, job.compiled, namespace)
    results = node.claim_directory(namespace, f"{name}-shared") / "results"
    pods_of_job = [job.pod("chief", 0), job.pod("worker", 0)]
    wait_for("both tasks' reports", lambda: all(
        (results / f"{pod}.json").exists() for pod in pods_of_job), TRAINING_TIMEOUT,
        lambda: "\n".join(line for pod in pods_of_job
                          for line in node.pod_lines(namespace, pod)[-10:]))
    chief, worker = (json.loads((results / f"{pod}.json").read_text()) for pod in pods_of_job)
    for report in (chief, worker):
        assert report["dataset"] == "images"  # the `train` folder, not the claim's root
        assert report["dataset_write"] == "EROFS"
    assert chief["models"] and not worker["models"]
    models = node.claim_directory(namespace, "models")
    assert (models / f"{job.pod('chief', 0)}.txt").read_text() == "weights"
    assert not (dataset / "written-by-training").exists()
    assert not (dataset / "train" / "written-by-training").exists()

    node.kubectl("delete", "-k", str(job.compiled), "-n", namespace, "--wait=true",
                 "--timeout=120s")
    wait_for("the job's own claim to go", lambda: f"{name}-shared" not in node.kubectl(
        "get", "pvc", "-n", namespace, "-o", "name"), 120)
    remaining = node.kubectl("get", "pvc", "-n", namespace, "-o", "name").split()
    assert sorted(remaining) == ["persistentvolumeclaim/dataset", "persistentvolumeclaim/models"]
    assert (dataset / "train" / "part-0.txt").read_text() == "images"
    assert (models / f"{job.pod('chief', 0)}.txt").read_text() == "weights"
    remove_namespace(node, namespace, job)
