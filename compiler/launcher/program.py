"""tfcompile launcher: runs the training command of one TensorFlow task in a StatefulSet pod.

Written by tfcompile (see the job's settings.json beside this file). Exit 0 of the training
records success and idles; a failure is retried by the kubelet until the failure policy says stop.

A StatefulSet cannot finish: its pods restart forever (`restartPolicy: Always`), so a script that
exits 0 would train again and again. The launcher runs the training command and:

- on success records it (an emptyDir marker for this pod, and the job's state ConfigMap in the
  API server, keyed by task and revision, so a recreated pod of a succeeded revision idles too),
  then idles; with `onSuccess: release`, once the job has succeeded it scales the job's
  StatefulSets to 0 (its own pod's after the others, the evaluator's last, after its final
  evaluation);
- on failure exits non-zero so the kubelet restarts it, until `failurePolicy` says stop (too many
  restarts in this pod, or an exit code that means "do not retry"): then it records the failure
  and idles (or releases the job's pods with `onFailure: release`); a failure that follows a
  peer's stop (a peer deleted, evicted or drained during this training) is not counted;
- keeps the deadline's clock (`deadline`): the seconds this revision has trained in this task,
  the times a signal stopped it left out, in the task's record (`training <revision> since
  <epoch seconds> stops <n>`, and `stopped <revision> after <seconds> stops <n>` once a signal
  stopped it); when the clock passes the deadline it stops the training and records the failure
  (`deadline <duration> passed`), then idles or releases as after any failure;
- in a sweep's trial, records after its success the result the training wrote at
  `TFCOMPILE_RESULT_FILE` (a JSON object of numbers, at most `RESULT_MAXIMUM_BYTES`), as
  `result: <revision> <compact JSON>` beside the task's record, in a request of its own (so a
  cluster policy that predates results keeps the success); a result that is not such an
  object is said and left out, and a stale one is removed before the training starts;
- forwards SIGTERM and SIGINT to the training process, so pods stop promptly, after recording the
  stop (so a peer that fails for the loss of this task finds it and does not count the failure);
  the training has the pod's grace period (`terminationGracePeriodSeconds`) to save a checkpoint;
- holds the training back until every other task of its `TF_CONFIG` runs the same revision, and
  stops it when a peer answers another one (the revision gate; `compiler/objects/revision_gate.py`
  says why).

It uses only the standard library and the Python of TensorFlow images (3.8 and later), talks to
the API server with the pod's service-account token, and has no dollar sign at all, so neither
Flux's post-build substitution nor the kubelet's variable expansion can touch it. Its settings
come only from its settings file (which tasks make the job succeed, which StatefulSets it may
scale, the failure policy, the deadline, the gate's timing) and its arguments (`--role=`, the
pod's role); the pod's index (`TASK_INDEX`), revision and `TF_CONFIG` come from its environment.

`PROTOCOL` is what the pods of one job must agree on: the revision gate's answers, the record
format, the settings it reads, the arguments and paths it is started with. A change to any of
them raises it; the job's launcher ConfigMap is named by it, so a new protocol rolls every job,
while a new text of the same protocol replaces the program in place and restarts no pod.

The settings file sits in that same ConfigMap and is updated in place too, so it names the
revision it was compiled for: a launcher whose pod runs another revision (an old pod restarting
during a roll, or a new one before the kubelet has refreshed its files) waits until the file is
of its own revision, rather than act on another revision's settings.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Dict, NoReturn

PROTOCOL = 2
"""The launcher's protocol version (see the module's docstring)."""

RESERVED_MOUNT_PATH = "/opt/tfcompile"
"""Where tfcompile mounts its volumes in a TensorFlow container (the spec's reserved path)."""
STATE_DIRECTORY = RESERVED_MOUNT_PATH + "/state"
"""This pod's emptyDir: its markers outlive container restarts."""
SETTINGS_FILE = "settings.json"
"""The job's settings, beside the program."""
REVISION_SETTING = "revision"
"""The settings' key for the revision they belong to (absent: any revision)."""
SETTINGS_WAIT_SECONDS = 5.0
REVISION_VARIABLE = "TFCOMPILE_REVISION"
"""The pod's revision (its `tfcompile.dev/revision` annotation, through the downward API)."""
FIELD_MANAGER = "tfcompile-launcher"
SUCCEEDED = "succeeded"
FAILED = "failed"
TRAINING = "training"
STOPPED = "stopped"
"""A task's record while it trains, and after a signal stopped it (deleted, evicted, drained,
suspended): `training <revision> since <epoch seconds> stops <n>`, `stopped <revision> after
<seconds> stops <n>`. The deadline's clock, and the count of signal stops its peers compare."""
CLOCK_FILE = "clock"
"""This pod's copy of the task's training record, for a run without an API server."""
STOP_SECONDS = 30.0
"""How long a training stopped by the launcher (deadline, another revision) has to end after
SIGTERM before it is killed."""
STOP_RECORD_SECONDS = 3.0
"""The longest one attempt to record a stop may take (the pod's grace period is running)."""
FAILURES_FILE = "failures"
FAILED_REVISION_KEY = "failed-revision"
FAILED_TASK_KEY = "failed-task"
"""Beside a final failure's record, for the Argo CD health check (which compares by equality
alone): the revision that failed, and `<task> (exit <status> after <restarts> restarts)`."""
RESULT_VARIABLE = "TFCOMPILE_RESULT_FILE"
RESULT_FILE = STATE_DIRECTORY + "/result.json"
"""Where a sweep's trial may write its result (its `RESULT_VARIABLE`): this pod's emptyDir."""
RESULT_KEY = "result"
"""The state's key of a trial's result: `<revision> <JSON object of numbers>`."""
RESULT_MAXIMUM_BYTES = 4096
"""The most a result may hold, as written and as recorded (compact JSON)."""
ACCOUNT_DIRECTORY = "/var/run/secrets/kubernetes.io/serviceaccount"
API_SERVER = "https://kubernetes.default.svc"
LOG_PREFIX = "tfcompile: "

Settings = Dict[str, Any]
HERE = os.path.dirname(os.path.abspath(__file__))


def say(message: str) -> None:
    print(LOG_PREFIX + message, file=sys.stderr, flush=True)


def options(arguments: list[str]) -> tuple[dict[str, str], list[str]]:
    """Options before `--` (tests point them elsewhere); the training command after it."""
    found = {
        "state": STATE_DIRECTORY,
        "account": ACCOUNT_DIRECTORY,
        "api": API_SERVER,
        "settings": os.path.join(HERE, SETTINGS_FILE),
        "listen": "",
        "role": "",
    }
    remaining = list(arguments)
    while remaining and remaining[0] != "--":
        name, _, value = remaining.pop(0).partition("=")
        found[name.lstrip("-")] = value
    return found, remaining[1:]


class ApiServer:
    """The job's state ConfigMap and the scale of its StatefulSets, with the pod's token."""

    def __init__(self, url: str, account: str) -> None:
        with open(os.path.join(account, "token")) as token_file:
            self.token = token_file.read().strip()
        with open(os.path.join(account, "namespace")) as namespace_file:
            self.namespace = namespace_file.read().strip()
        self.url = url.rstrip("/")
        self.context = ssl.create_default_context(cafile=os.path.join(account, "ca.crt"))

    def call(self, method: str, path: str, body: Settings | None = None, attempts: int = 6,
             timeout: float = 30.0) -> Settings:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + self.token)
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/merge-patch+json")
        delay = 1.0
        problem: Exception = OSError("no attempt made")
        for attempt in range(attempts):
            try:
                with urllib.request.urlopen(request, context=self.context,
                                            timeout=timeout) as answer:
                    found = json.loads(answer.read() or b"{}")
                    return found if isinstance(found, dict) else {}
            except urllib.error.HTTPError as error:
                if error.code < 500 and error.code != 429:
                    raise
                problem = error
            except (OSError, ValueError) as error:
                problem = error
            if attempt < attempts - 1:
                time.sleep(delay)
                delay *= 2
        raise problem

    def config_map_path(self, name: str) -> str:
        return "/api/v1/namespaces/" + self.namespace + "/configmaps/" + name

    def records(self, name: str) -> dict[str, str]:
        data = self.call("GET", self.config_map_path(name)).get("data") or {}
        return {str(key): str(value) for key, value in data.items()}

    def record(self, name: str, entries: dict[str, str], attempts: int = 6,
               timeout: float = 30.0) -> None:
        self.call("PATCH", self.config_map_path(name) + "?fieldManager=" + FIELD_MANAGER,
                  {"data": entries}, attempts, timeout)

    def scale_to_zero(self, statefulset: str) -> None:
        path = ("/apis/apps/v1/namespaces/" + self.namespace + "/statefulsets/" + statefulset
                + "/scale?fieldManager=" + FIELD_MANAGER)
        self.call("PATCH", path, {"spec": {"replicas": 0}})


class RevisionGate:
    """Answer this task's revision on the gate port; ask the other tasks of TF_CONFIG theirs."""

    def __init__(self, settings: Settings, listen: str, revision: str) -> None:
        self.port = int(settings["port"])
        self.wait_seconds = float(settings["waitSeconds"])
        self.watch_seconds = float(settings["watchSeconds"])
        self.watch_peers = int(settings["watchPeers"])
        self.revision = revision
        self.peers = peer_hosts(json.loads(os.environ.get("TF_CONFIG") or "{}"))
        self.turn = 0
        try:
            self.server = socket.create_server((listen, self.port))
        except OSError as error:
            say("cannot answer the revision on port " + str(self.port) + " (" + str(error)
                + "); the other tasks will wait for this one")
            return
        threading.Thread(target=self.answer, daemon=True).start()

    def answer(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
                with connection:
                    connection.settimeout(2)
                    connection.sendall(self.revision.encode() + b"\n")
            except OSError:
                time.sleep(0.1)

    def revision_of(self, host: str) -> str | None:
        try:
            with socket.create_connection((host, self.port), timeout=2) as connection:
                connection.settimeout(2)
                return connection.makefile().readline().strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def wait(self, until: float | None = None) -> bool:
        """Return True once every other task has answered this task's revision; False when the
        time `until` (epoch seconds) comes first."""
        pending = list(self.peers)
        reported = None
        while pending:
            if until is not None and time.time() >= until:
                return False
            answers = [(host, self.revision_of(host)) for host in pending]
            pending = [host for host, answer in answers if answer != self.revision]
            if not pending:
                break
            text = ", ".join(host + " (" + (answer or "no answer") + ")"
                             for host, answer in answers if answer != self.revision)
            if text != reported:
                say("revision " + self.revision + " waits for every task to run it: " + text)
                reported = text
            time.sleep(self.wait_seconds)
        if self.peers:
            say("every task runs revision " + self.revision + "; training")
        return True

    def superseded(self) -> str | None:
        """A peer that answers another revision, or None; asks a few peers per call, in turn."""
        count = min(self.watch_peers, len(self.peers))
        for _ in range(count):
            host = self.peers[self.turn % len(self.peers)]
            self.turn += 1
            answer = self.revision_of(host)
            if answer is not None and answer != self.revision:
                return host + " runs revision " + answer
        return None


def peer_hosts(tf_config: Settings) -> list[str]:
    """The host of every task in TF_CONFIG's cluster but this one."""
    return [str(address).rsplit(":", 1)[0] for _, address in peers(tf_config)]


def peer_tasks(tf_config: Settings) -> list[str]:
    """The record key (`<role>-<index>`) of every task in TF_CONFIG's cluster but this one."""
    return [task for task, _ in peers(tf_config)]


def peers(tf_config: Settings) -> list[tuple[str, str]]:
    task = tf_config.get("task") or {}
    found = []
    for role, addresses in sorted((tf_config.get("cluster") or {}).items()):
        for index, address in enumerate(addresses):
            if role != task.get("type") or index != task.get("index"):
                found.append((str(role) + "-" + str(index), str(address)))
    return found


def parse_clock(record: str, revision: str, now: float) -> tuple[float, int] | None:
    """When the deadline's clock started (epoch seconds) and how many times a signal stopped
    the task, from a training record of `revision`; None for any other record."""
    parts = record.split(" ")
    if len(parts) != 6 or parts[1] != revision or parts[4] != "stops":
        return None
    try:
        seconds, stops = float(parts[3]), int(parts[5])
    except ValueError:
        return None
    if parts[0] == TRAINING and parts[2] == "since":
        return min(seconds, now), stops
    if parts[0] == STOPPED and parts[2] == "after":
        return now - seconds, stops
    return None


class State:
    """What this task and the job have done: this pod's emptyDir, and the API server's record."""

    def __init__(self, settings: Settings, where: dict[str, str], revision: str,
                 task: str) -> None:
        self.settings = settings
        self.role = where["role"]
        self.directory = where["state"]
        self.revision = revision
        self.task = task
        self.api: ApiServer | None = None
        self.records: dict[str, str] = {}
        self.started = time.time()
        self.stops = 0
        if not os.path.exists(os.path.join(where["account"], "token")):
            return  # no API server to record in (a local run): this pod's emptyDir only
        try:
            self.api = ApiServer(where["api"], where["account"])
            self.records = self.api.records(settings["stateConfigMap"])
        except (OSError, ValueError) as error:
            say("cannot read the job's state from the API server (" + describe(error)
                + "); going by this pod's own record")
            self.api = None

    def marker(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def outcome(self) -> str | None:
        """`succeeded`, `failed` or None for this task at this revision."""
        for name in (SUCCEEDED, FAILED):
            if os.path.exists(self.marker(name)):
                return name
        recorded = self.records.get(self.task, "").split(" ")
        if len(recorded) >= 2 and recorded[1] == self.revision and recorded[0] in (
                SUCCEEDED, FAILED):
            with open(self.marker(recorded[0]), "w") as marker:
                marker.write("recorded in the API server\n")
            return recorded[0]
        return None

    def record(self, outcome: str, detail: str = "", result: str | None = None) -> None:
        with open(self.marker(outcome), "w") as marker:
            marker.write(detail + "\n")
        entries = {self.task: " ".join(part for part in (outcome, self.revision, detail)
                                       if part)}
        if outcome == FAILED:
            # What the Argo CD health check reads with equality alone (it has no string
            # library): the revision that failed, and the task that failed last, with why.
            entries[FAILED_REVISION_KEY] = self.revision
            entries[FAILED_TASK_KEY] = self.task + " (" + detail + ")"
        self.records.update(entries)
        if self.api is not None:
            try:
                self.api.record(self.settings["stateConfigMap"], entries)
            except (OSError, ValueError) as error:
                say("could not record " + outcome + " in the API server (" + describe(error)
                    + "); a recreated pod will not know it")
                return
        if result is not None:
            self.record_result(result)

    def record_result(self, result: str) -> None:
        """A trial's result, after its success record and in a request of its own: a cluster
        whose launcher policy predates results refuses this one and keeps the success."""
        entry = {RESULT_KEY: self.revision + " " + result}
        self.records.update(entry)
        if self.api is not None:
            try:
                self.api.record(self.settings["stateConfigMap"], entry)
                say("recorded the result " + result)
            except (OSError, ValueError) as error:
                say("could not record the result in the API server (" + describe(error)
                    + "); a launcher policy applied before results existed refuses it: apply "
                    "deploy/cluster/launcher-policy.yaml as tfcompile init writes it now")

    def start_clock(self) -> float:
        """Go on with the deadline's clock of this revision (the API server's record, or this
        pod's copy) or start it, and record that the task trains; when the clock started."""
        now = time.time()
        clock = None
        for record in (self.records.get(self.task, ""), self.read_marker(CLOCK_FILE)):
            clock = parse_clock(record, self.revision, now)
            if clock is not None:
                break
        self.started, self.stops = clock if clock is not None else (now, 0)
        self.save_clock(TRAINING + " " + self.revision + " since " + str(int(self.started))
                        + " stops " + str(self.stops))
        return self.started

    def record_stop(self) -> None:
        """A signal stops the training: pause the clock and count the stop, first thing, so a
        peer that fails for the loss of this task finds the stop recorded."""
        self.stops += 1
        self.save_clock(STOPPED + " " + self.revision + " after "
                        + str(max(0, int(time.time() - self.started))) + " stops "
                        + str(self.stops), attempts=2, timeout=STOP_RECORD_SECONDS)

    def save_clock(self, record: str, attempts: int = 6, timeout: float = 30.0) -> None:
        with open(self.marker(CLOCK_FILE), "w") as marker:
            marker.write(record + "\n")
        if self.records.get(self.task) == record:
            return
        self.records[self.task] = record
        if self.api is not None:
            try:
                self.api.record(self.settings["stateConfigMap"], {self.task: record}, attempts,
                                timeout)
            except (OSError, ValueError) as error:
                say("could not record " + repr(record) + " in the API server ("
                    + describe(error) + ")")

    def read_marker(self, name: str) -> str:
        try:
            with open(self.marker(name)) as marker:
                return marker.read().strip()
        except OSError:
            return ""

    def stops_of(self, tasks: list[str]) -> dict[str, int]:
        """How many times a signal stopped each task at this revision, by its record."""
        now = time.time()
        found = {}
        for task in tasks:
            clock = parse_clock(self.records.get(task, ""), self.revision, now)
            found[task] = 0 if clock is None else clock[1]
        return found

    def failures(self) -> int:
        """How many times the training failed in this pod (the emptyDir outlives restarts)."""
        try:
            with open(self.marker(FAILURES_FILE)) as counter:
                return int(counter.read().strip() or "0")
        except (OSError, ValueError):
            return 0

    def count_failure(self) -> int:
        count = self.failures() + 1
        with open(self.marker(FAILURES_FILE), "w") as counter:
            counter.write(str(count) + "\n")
        return count

    def succeeded(self, tasks: list[str]) -> bool:
        wanted = SUCCEEDED + " " + self.revision
        return all(self.records.get(task, "").startswith(wanted) for task in tasks)

    def refresh(self) -> None:
        if self.api is not None:
            try:
                self.records = self.api.records(self.settings["stateConfigMap"])
            except (OSError, ValueError) as error:
                say("cannot read the job's state (" + describe(error) + ")")


def read_result(path: str) -> str | None:
    """The result the training wrote at `path` (a sweep's trial): a JSON object of numbers, as
    compact JSON; None when there is none or it is not one (said)."""
    if not path:
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        say("cannot read the result " + path + " (" + describe(error) + "); not recorded")
        return None
    try:
        with os.fdopen(descriptor, "rb") as handle:
            text = handle.read(RESULT_MAXIMUM_BYTES + 1)
        if len(text) > RESULT_MAXIMUM_BYTES:
            raise ValueError("more than " + str(RESULT_MAXIMUM_BYTES) + " bytes")
        result = json.loads(text.decode("utf-8"))
        if not isinstance(result, dict) or not result or not all(
                isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value) for value in result.values()):
            raise ValueError("not a JSON object of finite numbers, such as "
                             + json.dumps({"accuracy": 0.9}))
    except (OSError, ValueError) as error:
        say("the result in " + path + " is not recorded: " + describe(error))
        return None
    compact = json.dumps(result, sort_keys=True, separators=(",", ":"))
    if len(compact) > RESULT_MAXIMUM_BYTES:
        say("the result in " + path + " is not recorded: more than "
            + str(RESULT_MAXIMUM_BYTES) + " bytes as compact JSON")
        return None
    return compact


def remove_result(path: str) -> None:
    """A result left by an earlier attempt in this pod is not this training's."""
    if path:
        with contextlib.suppress(OSError):
            os.remove(path)


def describe(error: Exception) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return "HTTP " + str(error.code) + " " + str(error.reason)
    return type(error).__name__ + ": " + str(error)


def own_last(statefulsets: list[str], role: str) -> list[str]:
    """The StatefulSets with this pod's own one (its role's) last: the pod's token is bound to
    the pod and ends with it, so the others are scaled while it still holds."""
    own = "-" + role
    return ([name for name in statefulsets if not name.endswith(own)]
            + [name for name in statefulsets if name.endswith(own)])


def release(state: State, statefulsets: list[str]) -> None:
    """Scale the StatefulSets to 0 (the Role and the cluster's policy allow only theirs, and
    only to 0), ending this pod too."""
    if state.api is None:
        say("cannot release the job's pods without the API server")
        return
    for name in statefulsets:
        try:
            state.api.scale_to_zero(name)
            say("scaled " + name + " to 0")
        except (OSError, ValueError) as error:
            say("could not scale " + name + " to 0 (" + describe(error) + ")")


def after_success(state: State, settings: Settings) -> None:
    """With onSuccess: release, scale the job to 0 once it has succeeded."""
    if settings["onSuccess"] != "release":
        return
    state.refresh()
    if not state.succeeded(settings["successTasks"]):
        return
    say("the job has succeeded; releasing its pods")
    last = list(settings["releaseLast"])
    names = own_last(settings["releaseFirst"], state.role)
    if state.succeeded(settings["evaluatorTasks"]):
        names += last
    elif last:
        say("the evaluator keeps running until its last evaluation")
    release(state, names)


def after_failure(state: State, settings: Settings) -> None:
    """With onFailure: release, scale the job to 0 once it has given up."""
    if settings.get("onFailure") == "release":
        say("the job has given up; releasing its pods")
        release(state, own_last(settings["releaseFirst"] + settings["releaseLast"], state.role))


def exit_quietly(number: int, frame: object) -> NoReturn:
    sys.exit(0)


def idle(reason: str) -> NoReturn:
    say(reason + "; idling (delete or suspend the job to stop)")
    signal.signal(signal.SIGTERM, exit_quietly)
    signal.signal(signal.SIGINT, exit_quietly)
    while True:
        time.sleep(3600)


class Ending:
    """How a training ended: its exit status (128+N for signal N) and what, if anything, ended
    it from outside: a signal to the pod, a peer of another revision, or the deadline; and how
    many times each peer had been stopped when it started."""

    def __init__(self, status: int, signalled: bool = False, superseded: str | None = None,
                 deadline: bool = False, peer_stops: dict[str, int] | None = None) -> None:
        self.status = status
        self.peer_stops = peer_stops or {}
        self.signalled = signalled
        self.superseded = superseded
        self.deadline = deadline


def stop(child: subprocess.Popen[bytes]) -> int:
    """SIGTERM, `STOP_SECONDS` to end, then SIGKILL; the exit status."""
    child.terminate()
    try:
        return child.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.wait()


def train(command: list[str], gate: RevisionGate, state: State, until: float | None,
          peers: list[str]) -> Ending:
    """Run the command once every task runs this revision, forwarding SIGTERM and SIGINT (the
    stop recorded first), watching the peers' revisions and the deadline (`until`)."""
    stopping: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def forward(number: int, frame: object) -> None:
        if not stopping:
            state.record_stop()
        stopping.append(number)
        if child is None:
            sys.exit(0)  # stopped while waiting at the gate: nothing to stop but this
        with contextlib.suppress(OSError):
            child.send_signal(number)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    if not gate.wait(until):
        return Ending(1, deadline=True)
    state.refresh()
    peer_stops = state.stops_of(peers)
    try:
        child = subprocess.Popen(command)
    except OSError as error:
        say("cannot start " + repr(command[0]) + ": " + str(error))
        return Ending(127, peer_stops=peer_stops)
    while True:
        wait = gate.watch_seconds
        if until is not None and not stopping:
            if time.time() >= until:
                return Ending(stop(child), deadline=True)
            wait = max(0.1, min(wait, until - time.time()))
        try:
            status = child.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            pass
        if stopping or not gate.peers:
            continue
        reason = gate.superseded()
        if reason is not None:
            stop(child)
            return Ending(1, superseded=reason)
    return Ending(128 - status if status < 0 else status, signalled=bool(stopping),
                  peer_stops=peer_stops)


def read_settings(path: str, revision: str) -> Settings:
    """The job's settings of this pod's revision, waiting while the file is of another one."""
    reported = False
    while True:
        with open(path) as settings_file:
            settings: Settings = json.load(settings_file)
        written = settings.get(REVISION_SETTING)
        if written is None or written == revision:
            return settings
        if not reported:
            say("the settings are of revision " + str(written) + ", this pod runs " + revision
                + ": waiting for the kubelet to refresh them")
            signal.signal(signal.SIGTERM, exit_quietly)
            signal.signal(signal.SIGINT, exit_quietly)
            reported = True
        time.sleep(SETTINGS_WAIT_SECONDS)


def main(arguments: list[str]) -> int:
    where, command = options(arguments)
    if not command:
        say("usage: tfcompile-launcher.py --role=ROLE [--OPTION=VALUE...] -- COMMAND "
            "[ARGUMENT...]")
        return 2
    task = (where["role"] or "task") + "-" + os.environ.get("TASK_INDEX", "0")
    revision = os.environ.get(REVISION_VARIABLE) or "unknown"
    settings = read_settings(where["settings"], revision)
    gate = RevisionGate(settings["revisionGate"], where["listen"], revision)
    state = State(settings, where, revision, task)
    outcome = state.outcome()
    if outcome is not None:
        say("task " + task + " of revision " + revision + ": " + outcome + " (recorded)")
    if outcome == SUCCEEDED:
        after_success(state, settings)
        idle("this task already succeeded")
    if outcome == FAILED:
        after_failure(state, settings)
        idle("this task already failed and stopped retrying")
    result_file = os.environ.get(RESULT_VARIABLE, "")
    remove_result(result_file)
    started = state.start_clock()
    deadline = settings.get("deadline")
    until = None if deadline is None else started + float(deadline["seconds"])
    tasks = peer_tasks(json.loads(os.environ.get("TF_CONFIG") or "{}"))
    ending = train(command, gate, state, until, tasks)
    status = ending.status
    if ending.signalled:
        return status
    if ending.superseded is not None:
        say(ending.superseded + ", not " + revision + ": stopping the training; this pod is "
            "being replaced")
        return status
    if ending.deadline and deadline is not None:
        why = "deadline " + str(deadline["written"]) + " passed"
        say("revision " + revision + " has trained for its deadline; stopped (" + why + ")")
        state.record(FAILED, why)
        after_failure(state, settings)
        idle("the task stopped at the deadline")
    if status == 0:
        state.record(SUCCEEDED, result=read_result(result_file))
        after_success(state, settings)
        idle("training succeeded")
    state.refresh()
    stopped = [task for task, stops in state.stops_of(tasks).items()
               if stops > ending.peer_stops.get(task, 0)]
    if stopped:
        say("training exited with status " + str(status) + " after " + ", ".join(stopped)
            + " stopped (deleted, evicted or drained); not counted as a failure, the kubelet "
            "will restart it")
        return status
    policy = settings.get("failurePolicy")
    failures = state.count_failure()
    if policy is not None:
        final = status in policy["doNotRetryExitCodes"]
        if final or failures > policy["maxRestarts"]:
            why = "exit " + str(status) + " after " + str(failures - 1) + " restarts"
            say("training failed (" + why + "); " + (
                "that exit code means do not retry" if final
                else "no restarts left (failurePolicy.maxRestarts)"))
            state.record(FAILED, why)
            after_failure(state, settings)
            idle("the task stopped retrying")
    say("training exited with status " + str(status) + "; the kubelet will restart it")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
