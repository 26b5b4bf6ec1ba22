"""Upgrading tfcompile on the local node: a new launcher text restarts nothing, a protocol rolls.

A job of two workers running a stand-in training (plain Python, no TensorFlow) is compiled with
`tfcompile build` and applied with `kubectl apply --server-side -k`, as a GitOps tool would. Then
it is compiled again, in process, with another launcher text of the same protocol and applied:
the ConfigMap `J-launcher-v<protocol>` changes in place (its zip, `binaryData`), the kubelet
replaces the zip under the running launchers (which imported every module at their start) and no
pod restarts. Compiled with a new protocol
and applied, the job rolls as a whole onto one new revision.
"""

from __future__ import annotations

import shutil
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
    fresh_namespace,
    processes_of_pod,
    remove_namespace,
)
from tests.cluster.waiting import wait_for
from tests.conftest import job_text
from tests.node_fixture import RealNode
from tests.test_launcher_protocol import another_text
from tfcompile.compiler.objects.compile import build_objects, file_name, kustomization
from tfcompile.compiler.objects.launcher_interface import (
    LAUNCHER_DIRECTORY,
    PROGRAM_FILE,
    LauncherProgram,
)
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.compiler.yaml_output import dump
from tfcompile.spec.loading import load_jobs

# Every test that runs pods shares the session's real node (marker `node`).
pytestmark = [pytest.mark.cluster, pytest.mark.node]

REVISION_ANNOTATION = "tfcompile.dev/revision"
STAND_IN = """\
import json, os, time
cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster", {})
print("stand-in: training with", len(cluster.get("worker", [])), "workers", flush=True)
while True:
    time.sleep(1)
"""
TIMEOUT = 180.0


@pytest.fixture
def node(real_node: RealNode) -> LocalNode:
    """The session's real node (tests/conftest.py), shared with the GitOps tier."""
    return real_node.node


def stand_in_job(tmp_path: Path) -> Job:
    name = f"upgrade-{uuid.uuid4().hex[:6]}"
    source = tmp_path / name
    source.mkdir()
    (source / "train.py").write_text(STAND_IN)
    (source / "job.yaml").write_text(job_text(
        name, image="python:3.11", script="train.py", command=None,
        roles="worker: {replicas: 2}"))
    job = Job(name, source, tmp_path / "output")
    build(job)
    return job


def compile_with(job: Job, launcher: LauncherProgram) -> None:
    """The job's output as a tfcompile shipping `launcher` would write it."""
    (loaded,) = load_jobs(job.source / "job.yaml")
    shutil.rmtree(job.compiled)
    job.compiled.mkdir(parents=True)
    names = []
    for document in build_objects(loaded, launcher):
        names.append(file_name(document))
        (job.compiled / names[-1]).write_text(dump(document))
    (job.compiled / "kustomization.yaml").write_text(dump(kustomization(sorted(names), [])))


def apply(node: LocalNode, job: Job, namespace: str) -> None:
    node.kubectl("apply", "--server-side", "-k", str(job.compiled), "-n", namespace)


def running_pods(node: LocalNode, namespace: str) -> dict[str, dict[str, Any]]:
    """Pod name → (uid, revision, restarts) of every running pod of the namespace."""
    found = {}
    for pod in node.get("pods", "-n", namespace)["items"]:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        if pod["metadata"].get("deletionTimestamp") or not statuses or "running" not in (
                statuses[0].get("state") or {}):
            continue
        found[pod["metadata"]["name"]] = {
            "uid": pod["metadata"]["uid"],
            "revision": pod["metadata"]["annotations"][REVISION_ANNOTATION],
            "restarts": statuses[0]["restartCount"]}
    return found


def training(node: LocalNode, namespace: str, job: Job, revision: str) -> bool:
    opened = f"tfcompile: every task runs revision {revision}; training"
    return all(opened in node.pod_lines(namespace, job.pod("worker", index))
               for index in range(2))


def mounted_program(pod: str) -> bytes | None:
    """The launcher's zip as a running container of `pod` sees it (read through a process of
    the container, under /proc/PID/root); None when no process of the pod shows it."""
    for pid in processes_of_pod(pod):
        try:
            return Path(f"/proc/{pid}/root{LAUNCHER_DIRECTORY}/{PROGRAM_FILE}").read_bytes()
        except OSError:
            continue
    return None


def revision_of(job: Job) -> str:
    text = (job.compiled / f"statefulset-{job.name}-worker.yaml").read_text()
    statefulset = YAML(typ="safe").load(text)
    return str(statefulset["spec"]["template"]["metadata"]["annotations"][REVISION_ANNOTATION])


def test_a_new_launcher_text_restarts_no_pod_and_a_new_protocol_rolls_the_job(
        node: LocalNode, tmp_path: Path) -> None:
    started = time.monotonic()
    job = stand_in_job(tmp_path)
    revision = revision_of(job)
    namespace = fresh_namespace(node)
    apply(node, job, namespace)
    wait_for("both workers training", lambda: training(node, namespace, job, revision),
             TIMEOUT, lambda: node.log()[-3000:])
    before = running_pods(node, namespace)
    assert set(before) == {job.pod("worker", 0), job.pod("worker", 1)}
    launcher_map = f"{job.name}-launcher-v{shipped_launcher().protocol}"

    # A fix of the launcher that keeps its protocol: the ConfigMap changes in place, nothing else.
    shipped = shipped_launcher()
    fixed = another_text()
    compile_with(job, fixed)
    assert revision_of(job) == revision
    apply(node, job, namespace)
    stored = node.get("configmap", launcher_map, "-n", namespace)
    assert stored["binaryData"] == fixed.binary_data()
    # The kubelet updates the mounted ConfigMap in the running containers, without a restart.
    wait_for("the new launcher zip in both running containers", lambda: all(
        mounted_program(pod) == fixed.archive for pod in before),
        120, lambda: node.log()[-3000:])
    time.sleep(15)  # the StatefulSet controller and the kubelet have had every chance to act
    assert running_pods(node, namespace) == before
    statefulset = node.get("statefulset", f"{job.name}-worker", "-n", namespace)
    assert statefulset["status"]["currentRevision"] == statefulset["status"]["updateRevision"]

    # A new protocol: the pod templates name another ConfigMap, and every pod is replaced onto
    # one new revision.
    compile_with(job, LauncherProgram(shipped.archive, shipped.protocol + 1))
    new_revision = revision_of(job)
    assert new_revision != revision
    apply(node, job, namespace)
    wait_for("both workers training on the new revision",
             lambda: training(node, namespace, job, new_revision), TIMEOUT,
             lambda: node.log()[-3000:])
    wait_for("only pods of the new revision", lambda: {
        pod["revision"] for pod in running_pods(node, namespace).values()} == {new_revision}
        and len(running_pods(node, namespace)) == 2, TIMEOUT)
    after = running_pods(node, namespace)
    assert all(after[name]["uid"] != before[name]["uid"] for name in before)
    volumes = statefulset_volumes(node, namespace, job)
    assert volumes["tfcompile-launcher"]["configMap"]["name"] == (
        f"{job.name}-launcher-v{shipped.protocol + 1}")
    print(f"a new launcher text restarted no pod; a new protocol rolled the job "
          f"({time.monotonic() - started:.0f} s in all)")
    remove_namespace(node, namespace, job)


def statefulset_volumes(node: LocalNode, namespace: str, job: Job) -> dict[str, Any]:
    statefulset = node.get("statefulset", f"{job.name}-worker", "-n", namespace)
    return {volume["name"]: volume
            for volume in statefulset["spec"]["template"]["spec"]["volumes"]}
