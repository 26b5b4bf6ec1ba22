"""A pod's status as the kubelet reports it, read from the runtime's state.

Phase, pod IP, the four conditions (PodScheduled, Initialized, ContainersReady, Ready) and one
status per container: restart count, current state (waiting with a reason, running since, or
terminated with exit code and reason) and the last termination. Readiness probes are not run: a
running container is ready, as one without probes is.
"""

from __future__ import annotations

from typing import Any

from tfcompile.compiler.local_run.supervisor import ContainerRun

from .pod_runtime import PodRuntime, timestamp

CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


def _state(runtime: PodRuntime, run: ContainerRun | None, name: str) -> dict[str, Any]:
    history = runtime.histories.get(name)
    if run is not None and run.running() and history is not None:
        return {"running": {"startedAt": history.started_at}}
    if run is not None and run.start_at is not None and run.starts > 0:
        return {"waiting": {"reason": "CrashLoopBackOff",
                            "message": "back-off restarting the failed container"}}
    if run is not None and run.starts > 0 and history is not None and history.last_terminated:
        return {"terminated": history.last_terminated}
    waiting: dict[str, Any] = {"reason": runtime.waiting_reason}
    if runtime.waiting_message:
        waiting["message"] = runtime.waiting_message
    return {"waiting": waiting}


def _container_status(runtime: PodRuntime, container: dict[str, Any],
                      run: ContainerRun | None) -> dict[str, Any]:
    name = str(container["name"])
    state = _state(runtime, run, name)
    history = runtime.histories.get(name)
    running = "running" in state
    status: dict[str, Any] = {
        "name": name,
        "image": str(container.get("image", "")),
        "imageID": "",
        "ready": running,
        "started": running,
        "restartCount": run.restarts if run is not None else 0,
        "state": state,
        "lastState": {},
    }
    if run is not None and run.starts:
        status["containerID"] = f"tfcompile://{runtime.name}/{name}/{run.starts}"
    if history is not None and history.last_terminated is not None and "terminated" not in state:
        status["lastState"] = {"terminated": history.last_terminated}
    return status


def _phase(runtime: PodRuntime, runs: list[ContainerRun]) -> str:
    if runtime.supervisor is None:
        return "Pending"
    if runtime.ending is not None:
        return "Failed"
    if not runs or any(run.starts == 0 for run in runs):
        return "Pending"
    if any(run.running() or run.start_at is not None for run in runs):
        return "Running"
    codes = [run.last_exit_code for run in runs]
    return "Succeeded" if all(code == 0 for code in codes) else "Failed"


def pod_status(runtime: PodRuntime, host_address: str) -> dict[str, Any]:
    """The `status` of the pod now (times of unchanged conditions kept from earlier reports)."""
    spec = runtime.api_pod["spec"]
    pod_run = runtime.supervisor.pods[0] if runtime.supervisor is not None else None
    runs_by_name = {run.container.name: run for run in pod_run.runs()} if pod_run else {}
    containers = [_container_status(runtime, c, runs_by_name.get(str(c["name"])))
                  for c in spec.get("containers") or []]
    init_containers = [_container_status(runtime, c, runs_by_name.get(str(c["name"])))
                       for c in spec.get("initContainers") or []]
    main_runs = pod_run.containers if pod_run else []
    initialized = pod_run is not None and pod_run.next_init >= len(pod_run.init_containers)
    ready = bool(containers) and all(status["ready"] for status in containers)
    values = {"PodScheduled": True, "Initialized": initialized, "ContainersReady": ready,
              "Ready": ready}
    conditions = []
    for kind in CONDITIONS:
        value = "True" if values[kind] else "False"
        previous = runtime.transitions.get(kind)
        if previous is None or previous[0] != value:
            runtime.transitions[kind] = (value, timestamp())
        conditions.append({"type": kind, "status": value,
                           "lastTransitionTime": runtime.transitions[kind][1]})
    status: dict[str, Any] = {
        "phase": _phase(runtime, main_runs),
        "conditions": conditions,
        "hostIP": host_address,
        "hostIPs": [{"ip": host_address}],
        "startTime": runtime.start_time,
        "containerStatuses": containers,
    }
    if init_containers:
        status["initContainerStatuses"] = init_containers
    if runtime.address is not None:
        status["podIP"] = str(runtime.address.address)
        status["podIPs"] = [{"ip": str(runtime.address.address)}]
    if runtime.ending is not None:
        status["message"] = runtime.ending.message
    return status
