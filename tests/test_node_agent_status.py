"""What the local node reports of a pod: the kubelet's status fields, from real processes.

The node agent reads the state of run-local's Supervisor (which restarts containers with back-off)
and writes it as a pod status; these tests run real short-lived processes (without namespaces,
through the Supervisor's launch hook) and check the status a `kubectl get pod` user would read.
"""

from __future__ import annotations

import io
import subprocess
import time
from collections import deque
from typing import Any

import pytest

from tests.node_agent.claims import volume_for
from tests.node_agent.pod_runtime import PodRuntime
from tests.node_agent.pod_status import pod_status
from tests.node_agent.sources import referenced_objects
from tfcompile.compiler.local_run.backoff import RestartBackoff
from tfcompile.compiler.local_run.console import Console
from tfcompile.compiler.local_run.options import LocalRunOptions
from tfcompile.compiler.local_run.supervisor import ContainerRun, PodRun, Supervisor
from tfcompile.compiler.rendering.environment import EnvironmentSources
from tfcompile.compiler.rendering.pods import pod_from_template


def api_pod(script: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "job-worker-0", "namespace": "team", "uid": "0123"},
        "spec": {"restartPolicy": "Always", "containers": [
            {"name": "tensorflow", "image": "tensorflow/tensorflow:2.16.1",
             "command": ["sh", "-c", script]}]},
    }


def running_runtime(script: str, backoff_seconds: float) -> PodRuntime:
    pod_object = api_pod(script)
    pod = pod_from_template(
        name="job-worker-0", namespace="team", owner_kind="StatefulSet", owner_name="job-worker",
        index=0, template={"metadata": {}, "spec": pod_object["spec"]}, extra_labels={},
        hostname="job-worker-0", subdomain="job-worker", sources=EnvironmentSources())
    options = LocalRunOptions(backoff_initial_seconds=backoff_seconds, restart_limit=100)
    run = ContainerRun(pod=pod, container=pod.containers[0], is_init=False,
                       prefix="team/job-worker-0",
                       backoff=RestartBackoff(backoff_seconds, 300, 600), tail=deque())

    def launch(run: ContainerRun) -> subprocess.Popen[bytes]:
        return subprocess.Popen([*run.container.command, *run.container.args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)

    runtime = PodRuntime(pod_object)
    runtime.supervisor = Supervisor([PodRun(pod, "10.244.0.2", [], [run], None)], launch,
                                    Console(io.StringIO()), options)
    runtime.supervisor.begin()
    return runtime


def status_when(runtime: PodRuntime, wanted: Any, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        runtime.step()
        status = pod_status(runtime, "127.0.0.1")
        if wanted(status):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.05)


def container(status: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = status["containerStatuses"][0]
    return found


@pytest.mark.slow
def test_a_running_container_is_ready_and_a_failed_one_waits_in_back_off() -> None:
    runtime = running_runtime("sleep 1; exit 3", backoff_seconds=2)
    try:
        running = status_when(runtime, lambda s: "running" in container(s)["state"])
        assert running["phase"] == "Running"
        assert {c["type"]: c["status"] for c in running["conditions"]}["Ready"] == "True"
        assert container(running)["ready"] and container(running)["restartCount"] == 0

        waiting = status_when(runtime, lambda s: "waiting" in container(s)["state"])
        assert container(waiting)["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        assert {c["type"]: c["status"] for c in waiting["conditions"]}["Ready"] == "False"
        terminated = container(waiting)["lastState"]["terminated"]
        assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")

        again = status_when(runtime, lambda s: container(s)["restartCount"] == 1
                            and "running" in container(s)["state"])
        assert again["phase"] == "Running"
        assert container(again)["lastState"]["terminated"]["exitCode"] == 3
    finally:
        assert runtime.supervisor is not None
        runtime.supervisor.stop_all(lambda: True)


@pytest.mark.slow
def test_a_container_killed_by_a_signal_reports_128_plus_the_signal() -> None:
    # `$$$$`: the kubelet's expansion turns `$$` into `$`, so the shell sees its own PID, `$$`.
    runtime = running_runtime("kill -9 $$$$", backoff_seconds=5)
    try:
        waiting = status_when(runtime, lambda s: "waiting" in container(s)["state"]
                              and container(s)["lastState"])
        assert container(waiting)["lastState"]["terminated"]["exitCode"] == 137
    finally:
        assert runtime.supervisor is not None
        runtime.supervisor.stop_all(lambda: True)


def test_a_pod_reads_only_the_objects_it_names() -> None:
    spec = {
        "volumes": [{"name": "script", "configMap": {"name": "job-script-1"}},
                    {"name": "token", "projected": {"sources": [
                        {"configMap": {"name": "kube-root-ca.crt"}},
                        {"serviceAccountToken": {"path": "token"}}]}}],
        "containers": [{"name": "tensorflow", "env": [
            {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "access"}}}],
            "envFrom": [{"configMapRef": {"name": "job-script-1"}}]}],
    }
    assert referenced_objects(spec) == [("ConfigMap", "job-script-1"),
                                        ("ConfigMap", "kube-root-ca.crt"), ("Secret", "s3")]


def test_a_claim_gets_a_volume_bound_to_it_on_the_node(tmp_path: Any) -> None:
    claim = {"metadata": {"name": "job-shared", "namespace": "team", "uid": "abc"},
             "spec": {"accessModes": ["ReadWriteMany"],
                      "resources": {"requests": {"storage": "1Gi"}}},
             "status": {"phase": "Pending"}}
    volume = volume_for(claim, tmp_path / "team" / "job-shared", "tfcompile-node")
    assert volume["spec"]["claimRef"] == {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "team",
        "name": "job-shared", "uid": "abc"}
    assert volume["spec"]["hostPath"]["path"] == str(tmp_path / "team" / "job-shared")
    assert volume["spec"]["accessModes"] == ["ReadWriteMany"]
    assert volume["spec"]["capacity"] == {"storage": "1Gi"}
    assert volume["spec"]["storageClassName"] == ""
