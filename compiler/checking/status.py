"""`tfcompile status`: what the cluster runs for each job, next to what git holds.

tfcompile has no operator and no custom resource, so a job's state is spread over its
StatefulSets, their pods and the launchers' record (the `J-state` ConfigMap). This module reads
them with `kubectl get -o json` in the current kubeconfig context (kubectl does authentication,
proxies and contexts exactly as the user configured them), reads the committed revision from the
compiled output, and derives one phase per job:

- Failed: a task of the deployed revision stopped retrying (its failure policy);
- Suspended: the committed StatefulSets have 0 replicas (`suspend: true`);
- Released: the StatefulSets are at 0 although git asks for more (the job's pods released them);
- Succeeded: every task that makes the job succeed recorded success at the deployed revision;
- Pending: a pod is missing, not scheduled or not running yet;
- Running: otherwise.

A job with `launcher: none` (its state ConfigMap says so) records nothing: it is never Succeeded
or Failed, only Pending, Running, Suspended or Released (scaled to 0 by hand), and the text says
that nothing records its outcome and that an exit 0 starts its training again (the LAST EXIT
column shows it).

A sweep's trials are jobs too; the text shows them as one table per sweep (`sweep_status.py`):
values, phase and result, best first.

The records are written by the job's pods, which run the user's code with a token that may
patch them; the cluster's launcher policy holds them to the launcher's formats, but a cluster
without it, or someone with more rights, may leave anything there. So no record is trusted to
be what it should: one that is not text, or a result that is not one, is shown as unreadable
(naming its key) and the rest of the job as it is; and should a job's objects still be past
reading, that job alone is shown as Unreadable, never a traceback that hides every other job.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tfcompile.compiler.objects.labels import (
    JOB_LABEL,
    LAUNCHER_ANNOTATION,
    REPLICAS_ANNOTATION,
    REVISION_ANNOTATION,
    ROLE_LABEL,
    SUCCESS_TASKS_ANNOTATION,
)
from tfcompile.compiler.objects.launcher_interface import (
    FAILED,
    PROGRESS_REVISION_SUFFIX,
    PROGRESS_SUFFIX,
    SUCCEEDED,
)
from tfcompile.compiler.objects.names import state_config_map_name
from tfcompile.compiler.printable import printable
from tfcompile.compiler.yaml_input import YamlInputError, read_generated_document

from .sweep_status import (
    TrialInfo,
    TrialRow,
    committed_trials,
    recorded_result,
    sweep_table,
    trial_info,
)

CONTAINER = "tensorflow"
ABSENT = "-"
UNREADABLE = "Unreadable"
"""The phase of a job whose objects could not be read."""
KUBECTL_TIMEOUT_SECONDS = 60


class StatusError(Exception):
    """The cluster could not be read (no kubectl, no context, the API server refused)."""


@dataclass
class RoleStatus:
    role: str
    ready: int
    replicas: int
    committed_replicas: int | None
    restarts: int
    last_exit: int | None
    succeeded: int
    failed: list[str]


@dataclass
class JobStatus:
    name: str
    namespace: str
    phase: str
    deployed_revision: str
    committed_revision: str
    roles: list[RoleStatus] = field(default_factory=list)
    sweep: str | None = None
    """A sweep's trial: the sweep's name, its point, the objective, the deployed result."""
    values: dict[str, str] = field(default_factory=dict)
    objective: str = ""
    result: dict[str, float] | None = None
    result_note: str = ""
    """Why a trial's recorded result shows no numbers (`refused: …`, `unreadable: …`)."""
    unreadable: list[str] = field(default_factory=list)
    """The records (and, for a job past reading, its objects) that could not be read, why."""
    launcher: str = "python"
    progress: dict[str, str] = field(default_factory=dict)
    """Task -> the progress its training last reported at the deployed revision."""
    """What runs the training (`launcher` in job.yaml): `python`, or `none` (nothing records)."""

    def with_trial(self, info: TrialInfo | None) -> JobStatus:
        if info is not None:
            self.sweep, self.values, self.objective = info.sweep, info.values, info.objective
        return self


def committed_revisions(output: Path) -> dict[str, tuple[str | None, str]]:
    """Job name -> (namespace or None, revision) of every compiled job under `output`."""
    found: dict[str, tuple[str | None, str]] = {}
    if not output.is_dir() or output.is_symlink():
        return found
    for directory in sorted(output.iterdir()):
        if directory.is_symlink() or not (directory / "kustomization.yaml").is_file():
            continue
        for path in sorted(directory.glob("statefulset-*.yaml")):
            if path.is_symlink():
                continue
            try:
                document = read_generated_document(path.read_text(encoding="utf-8"))
                template = document["spec"]["template"]["metadata"]["annotations"]
                revision = template[REVISION_ANNOTATION]
            except (OSError, YamlInputError, UnicodeDecodeError, KeyError, TypeError):
                continue
            found[directory.name] = (document["metadata"].get("namespace"), str(revision))
            break
    return found


def _kubectl_items(namespace: str | None, all_namespaces: bool) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise StatusError("`status` needs kubectl on PATH and a kubeconfig context")
    command = [kubectl, "get", "statefulsets,configmaps,pods", "--selector", JOB_LABEL,
               "--output", "json"]
    if all_namespaces:
        command.append("--all-namespaces")
    elif namespace is not None:
        command.extend(["--namespace", namespace])
    try:
        completed = subprocess.run(command, capture_output=True, check=False,
                                   timeout=KUBECTL_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired as error:
        raise StatusError("kubectl did not answer within a minute") from error
    if completed.returncode != 0:
        message = printable(completed.stderr.strip(), keep_newlines=True)  # bytes, as written
        raise StatusError(f"kubectl get failed: {message}")
    try:
        items: list[dict[str, Any]] = json.loads(completed.stdout).get("items", [])
    except (ValueError, RecursionError, AttributeError) as error:
        raise StatusError("kubectl printed something that is not JSON") from error
    return [item for item in items if isinstance(item, dict)]


def _context_namespace() -> str:
    kubectl = shutil.which("kubectl") or "kubectl"
    completed = subprocess.run(
        [kubectl, "config", "view", "--minify", "--output",
         "jsonpath={..namespace}"], capture_output=True, text=True, check=False,
        timeout=KUBECTL_TIMEOUT_SECONDS)
    return completed.stdout.strip() or "default"


def read_status(jobs: Iterable[str], output: Path, namespace: str | None = None,
                all_namespaces: bool = False) -> list[JobStatus]:
    """The status of the named jobs (none named: every job in the cluster or in `output`)."""
    committed = committed_revisions(output)
    trials = committed_trials(output)
    default_namespace = namespace or _context_namespace()
    wanted = list(jobs)
    namespaces: set[str | None] = {None if all_namespaces else default_namespace}
    if not all_namespaces and namespace is None:
        namespaces |= {ns for name, (ns, _) in committed.items()
                       if ns is not None and (not wanted or name in wanted)}
    items: list[dict[str, Any]] = []
    for each in sorted(namespaces, key=lambda value: value or ""):
        items.extend(_kubectl_items(each, all_namespaces))
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in items:
        metadata = item.get("metadata")
        labels = metadata.get("labels") if isinstance(metadata, dict) else None
        job = labels.get(JOB_LABEL) if isinstance(labels, dict) else None
        if isinstance(job, str) and job:
            namespace_of = metadata.get("namespace") if isinstance(metadata, dict) else None
            key = (job, namespace_of if isinstance(namespace_of, str) and namespace_of
                   else default_namespace)
            grouped.setdefault(key, []).append(item)
    names = _named(wanted, grouped, trials) if wanted else \
        {job for job, _ in grouped} | set(committed)
    statuses = []
    for name in sorted(names):
        keys = sorted(key for key in grouped if key[0] == name)
        revision = committed.get(name, (None, ABSENT))[1]
        if not keys:
            where = committed.get(name, (None, ""))[0] or default_namespace
            statuses.append(JobStatus(name, where, "NotDeployed", ABSENT, revision)
                            .with_trial(trials.get(name)))
        for key in keys:
            statuses.append(readable_job_status(name, key[1], grouped[key], revision)
                            .with_trial(trials.get(name)))
    return statuses


def readable_job_status(name: str, namespace: str, objects: list[dict[str, Any]],
                        committed: str) -> JobStatus:
    """`job_status`, or for a job whose objects are past reading (not as the API server
    returns them), the job as Unreadable with why, so that the other jobs are still shown."""
    try:
        return job_status(name, namespace, objects, committed)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError,
            OverflowError) as error:
        return JobStatus(name, namespace, UNREADABLE, ABSENT, committed,
                         unreadable=[f"its objects ({type(error).__name__})"])


def _named(wanted: list[str], grouped: dict[tuple[str, str], list[dict[str, Any]]],
           trials: dict[str, TrialInfo]) -> set[str]:
    """The jobs named, a sweep's name standing for its trials (live or committed)."""
    live = {job: info for (job, _), objects in grouped.items() for item in objects
            if item.get("kind") == "ConfigMap" and (info := trial_info(item)) is not None}
    names = set(wanted)
    for job, info in [*trials.items(), *live.items()]:
        if info.sweep in wanted:
            names.add(job)
            names.discard(info.sweep)
    return names


def _state(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for item in objects:
        if item.get("kind") == "ConfigMap" and item["metadata"].get("name") == \
                state_config_map_name(name):
            return item
    return {}


def _records(objects: list[dict[str, Any]], name: str
             ) -> tuple[dict[str, str], list[str], list[str]]:
    """The job's records that are text, the tasks that make it succeed, and the keys of the
    records that are not text (`<key>: not text`)."""
    item = _state(objects, name)
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    written = annotations.get(SUCCESS_TASKS_ANNOTATION, "")
    tasks = [task for task in written.split(",") if task] if isinstance(written, str) else []
    data = item.get("data") or {}
    if not isinstance(data, dict):
        return {}, tasks, ["data: not a map"]
    records = {str(key): value for key, value in data.items() if isinstance(value, str)}
    odd = sorted(f"{key}: not text" for key, value in data.items() if not isinstance(value, str))
    return records, tasks, odd


def _container_status(pod: dict[str, Any]) -> dict[str, Any]:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == CONTAINER:
            return dict(status)
    return {}


def _outcome(record: str, revision: str) -> str | None:
    parts = record.split(" ")
    if len(parts) >= 2 and parts[1] == revision and parts[0] in (SUCCEEDED, FAILED):
        return parts[0]
    return None


def job_status(name: str, namespace: str, objects: list[dict[str, Any]],
               committed: str) -> JobStatus:
    """One job's phase and roles from its live objects."""
    sets = sorted((o for o in objects if o.get("kind") == "StatefulSet"),
                  key=lambda o: str(o["metadata"].get("name")))
    pods = [o for o in objects if o.get("kind") == "Pod"]
    records, success_tasks, unreadable = _records(objects, name)
    deployed = sorted({str(((s["spec"]["template"].get("metadata") or {}).get("annotations")
                            or {}).get(REVISION_ANNOTATION, ABSENT)) for s in sets})
    revision = deployed[0] if len(deployed) == 1 else ABSENT
    roles = []
    pending = False
    for item in sets:
        role = (item["metadata"].get("labels") or {}).get(ROLE_LABEL, ABSENT)
        replicas = int(item["spec"].get("replicas", 1))
        annotation = (item["metadata"].get("annotations") or {}).get(REPLICAS_ANNOTATION)
        committed_replicas = int(annotation) if annotation and annotation.isdigit() else None
        own = [p for p in pods if (p["metadata"].get("labels") or {}).get(ROLE_LABEL) == role]
        statuses = [_container_status(p) for p in own]
        ready = sum(1 for s in statuses if s.get("ready"))
        finished = [s["lastState"]["terminated"] for s in statuses
                    if (s.get("lastState") or {}).get("terminated")]
        finished.sort(key=lambda t: str(t.get("finishedAt", "")))
        outcomes = {task: _outcome(value, revision) for task, value in records.items()
                    if "." not in task and task.rsplit("-", 1)[0] == role}
        roles.append(RoleStatus(
            role=role, ready=ready, replicas=replicas, committed_replicas=committed_replicas,
            restarts=sum(int(s.get("restartCount", 0)) for s in statuses),
            last_exit=int(finished[-1]["exitCode"]) if finished else None,
            succeeded=sum(1 for outcome in outcomes.values() if outcome == SUCCEEDED),
            failed=sorted(f"{task}: {records[task].split(' ', 2)[2]}"
                          if records[task].count(" ") >= 2 else task
                          for task, outcome in outcomes.items() if outcome == FAILED),
        ))
        running = [p for p in own if (p.get("status") or {}).get("phase") == "Running"]
        pending = pending or len(running) < replicas
    phase = _phase(roles, records, success_tasks, revision, pending)
    status = JobStatus(name, namespace, phase, " ".join(deployed) or ABSENT, committed, roles,
                       unreadable=unreadable, progress=_progress(records, revision))
    state = _state(objects, name)
    status.with_trial(trial_info(state))
    launcher = ((state.get("metadata") or {}).get("annotations") or {}).get(LAUNCHER_ANNOTATION)
    if isinstance(launcher, str) and launcher:
        status.launcher = launcher
    if status.sweep is not None:
        result = recorded_result(records, revision)
        status.result, status.result_note = result.values, result.note
    return status


def _progress(records: dict[str, str], revision: str) -> dict[str, str]:
    """Each task's last progress line (`<task>.progress`) of the deployed revision."""
    found = {}
    for key, line in records.items():
        task = key.removesuffix(PROGRESS_SUFFIX)
        if task != key and records.get(task + PROGRESS_REVISION_SUFFIX) == revision:
            found[task] = line
    return dict(sorted(found.items()))


def _phase(roles: list[RoleStatus], records: dict[str, str], success_tasks: list[str],
           revision: str, pending: bool) -> str:
    if any(role.failed for role in roles):
        return "Failed"
    if roles and all(role.replicas == 0 for role in roles):
        if all(role.committed_replicas == 0 for role in roles):
            return "Suspended"
        return "Released"
    if success_tasks and all(_outcome(records.get(task, ""), revision) == SUCCEEDED
                             for task in success_tasks):
        return "Succeeded"
    return "Pending" if pending else "Running"


def as_json(statuses: list[JobStatus]) -> str:
    return json.dumps([asdict(status) for status in statuses], indent=2) + "\n"


def _unreadable(status: JobStatus) -> str:
    return "unreadable, left out: " + "; ".join(printable(what) for what in status.unreadable)


def as_text(statuses: list[JobStatus]) -> str:
    """A table per sweep (its trials, best first), then per job: phase and revisions, then one
    line per role. Every text that comes from the cluster (names, annotations, the records
    pods wrote) is printed escaped (`printable`)."""
    lines = []
    sweeps: dict[str, list[JobStatus]] = {}
    for status in statuses:
        if status.sweep is not None:
            sweeps.setdefault(status.sweep, []).append(status)
    for sweep, trials in sorted(sweeps.items()):
        trial_rows = [TrialRow(trial.name, trial.namespace, trial.phase, trial.values,
                               trial.result, trial.result_note,
                               tuple(failure for role in trial.roles for failure in role.failed))
                      for trial in trials]
        lines.extend(sweep_table(sweep, trial_rows, trials[0].objective))
        lines.extend(f"  {printable(trial.name)}: {_unreadable(trial)}" for trial in trials
                     if trial.unreadable)
    for status in statuses:
        if status.sweep is not None:
            continue
        stale = "" if status.deployed_revision == status.committed_revision else " (differs)"
        unrecorded = ("" if status.launcher == "python" else
                      f"; launcher {printable(status.launcher)}: nothing records success or "
                      "failure, and a training that exits 0 starts again")
        lines.append(f"{printable(status.name)} ({printable(status.namespace)}): "
                     f"{status.phase}; revision deployed {printable(status.deployed_revision)}, "
                     f"committed {printable(status.committed_revision)}{stale}{unrecorded}")
        if status.unreadable:
            lines.append(f"  {_unreadable(status)}")
        if not status.roles:
            continue
        rows = [("ROLE", "READY", "RESTARTS", "LAST EXIT", "RECORDED")]
        for role in status.roles:
            recorded = []
            if role.succeeded:
                recorded.append(f"{role.succeeded} succeeded")
            recorded.extend(f"failed {printable(failure)}" for failure in role.failed)
            rows.append((printable(role.role), f"{role.ready}/{role.replicas}",
                         str(role.restarts),
                         ABSENT if role.last_exit is None else str(role.last_exit),
                         "; ".join(recorded) or ABSENT))
        widths = [max(len(row[column]) for row in rows) for column in range(4)]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            lines.append("  " + "  ".join([*cells, row[4]]).rstrip())
        lines.extend(f"  progress {printable(task)}: {printable(line)}"
                     for task, line in status.progress.items())
    return "\n".join(lines) + ("\n" if lines else "")
