"""The launcher that runs a training command inside a StatefulSet pod.

A StatefulSet cannot finish: its pods restart forever (`restartPolicy: Always`), so a script that
exits 0 would train again and again. The launcher runs the training command and:

- on success records it (an emptyDir marker for this pod, and the job's state ConfigMap in the
  API server, keyed by task and revision, so a recreated pod of a succeeded revision idles too),
  then idles; with `onSuccess: release`, once the job has succeeded it scales the job's
  StatefulSets to 0 (its own pod's after the others, the evaluator's last, after its final
  evaluation);
- on failure exits non-zero so the kubelet restarts it, until `failurePolicy` says stop (too many
  restarts in this pod, or an exit code that means "do not retry"): then it records the failure
  and idles (or releases the job's pods with `onSuccess: release`);
- in a sweep's trial, records with its success the result the training wrote at
  `TFCOMPILE_RESULT_FILE` (a JSON object of numbers, at most `RESULT_MAXIMUM_BYTES`), as
  `result: <revision> <compact JSON>` beside the task's record; a result that is not such an
  object is said and left out, and a stale one is removed before the training starts;
- forwards SIGTERM and SIGINT to the training process, so pods stop promptly;
- holds the training back until every other task of its `TF_CONFIG` runs the same revision, and
  stops it when a peer answers another one (the revision gate, below).

The revision gate. A change to a job rolls every role (the revision annotation on every pod
template differs), but a StatefulSet replaces its pods one at a time and each role's StatefulSet
rolls on its own, so for a while pods of the old revision (old `TF_CONFIG`) and of the new one run
side by side; two `TF_CONFIG`s must never train together. Kubernetes' controllers cannot restart a
whole job at once (`maxUnavailable` for StatefulSets is behind the `MaxUnavailableStatefulSet`
feature gate, off by default), so the pods hold themselves back: every launcher answers its
revision (`TFCOMPILE_REVISION`, the pod's `tfcompile.dev/revision` annotation through the
downward API) on the gate port, one line; before training it asks every other task of its
`TF_CONFIG` and waits, running (so the pod is Ready and the controller goes on replacing the next
pod), until each has answered its own revision; while training it keeps asking a few peers at a
time, and a peer that answers another revision stops the training (exit 1, not counted as a
failure): it is an old task whose cluster is being replaced. The old tasks train together until
the first of them is replaced; the new ones start together once the last old pod is gone,
resuming from the job's checkpoint. No API server access is needed, and nothing waits on a
feature gate.

It is one Python program per job, shipped in a ConfigMap whose name carries a hash of its content
and mounted by every role (a reviewer reads it once; TensorFlow images have Python). It uses only
the standard library and talks to the API server with the pod's service-account token. Its text
has no dollar sign at all, so neither Flux's post-build substitution nor the kubelet's `$(VAR)`
expansion can touch it. Its settings (which tasks make the job succeed, which StatefulSets it may
scale, the failure policy) come from a JSON file beside it; each pod's task and revision come from
its environment.
"""

from __future__ import annotations

import json
from typing import Any

from tfcompile.spec.rules import RESERVED_MOUNT_PATH

STATE_VOLUME = "tfcompile-state"
STATE_DIRECTORY = f"{RESERVED_MOUNT_PATH}/state"
SUCCESS_MARKER = f"{STATE_DIRECTORY}/succeeded"
FAILURE_MARKER = f"{STATE_DIRECTORY}/failed"
RESULT_FILE = f"{STATE_DIRECTORY}/result.json"
"""Where a sweep's trial may write its result (`TFCOMPILE_RESULT_FILE`): this pod's emptyDir."""
RESULT_KEY = "result"
"""The state ConfigMap's key of a trial's result: `<revision> <JSON object of metrics>`."""
RESULT_MAXIMUM_BYTES = 4096
"""The most a result may hold, as written and as recorded (compact JSON)."""
SCRIPT_VOLUME = "script"
SCRIPT_DIRECTORY = f"{RESERVED_MOUNT_PATH}/script"
LAUNCHER_VOLUME = "tfcompile-launcher"
LAUNCHER_DIRECTORY = f"{RESERVED_MOUNT_PATH}/launcher"
PROGRAM_FILE = "tfcompile-launcher.py"
SETTINGS_FILE = "settings.json"
FIELD_MANAGER = "tfcompile-launcher"
SUCCEEDED = "succeeded"
FAILED = "failed"
REVISION_DIGITS = 12
"""A revision is this many hexadecimal digits of a digest (`compile.revision`)."""
RESULT_PATTERN = rf"^[0-9a-f]{{{REVISION_DIGITS}}} [{{].*[}}]$"
"""A recorded result, `<revision> {...}`, for RE2 (the launcher policy) as for Python."""
RECORD_PATTERN = (
    rf"^({SUCCEEDED} [0-9a-f]{{{REVISION_DIGITS}}}"
    rf"|{FAILED} [0-9a-f]{{{REVISION_DIGITS}}} exit [0-9]{{1,3}} after [0-9]{{1,9}} restarts)$"
)
"""Every value the launcher records for its task (`State.record`): `succeeded <revision>`, or
`failed <revision> exit <status> after <restarts> restarts`. A regular expression that RE2 (the
API server's, for the launcher policy) and Python read alike."""
FAILED_REVISION_KEY = "failed-revision"
FAILED_TASK_KEY = "failed-task"
"""Beside a final failure's record, for the Argo CD health check (which compares by equality
alone): the revision that failed, and `<task> (exit <status> after <restarts> restarts)`."""

PROGRAM = '''\
"""tfcompile launcher: runs the training command of one TensorFlow task in a StatefulSet pod.

Written by tfcompile (see the job's settings.json beside this file). Exit 0 of the training
records success and idles; a failure is retried by the kubelet until the failure policy says stop.
"""

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

HERE = os.path.dirname(os.path.abspath(__file__))
LOG_PREFIX = "tfcompile: "
RESULT_MAXIMUM_BYTES = 4096


def say(message):
    print(LOG_PREFIX + message, file=sys.stderr, flush=True)


def options(arguments):
    """Options before `--` (tests point them elsewhere); the training command after it."""
    found = {
        "state": "/opt/tfcompile/state",
        "account": "/var/run/secrets/kubernetes.io/serviceaccount",
        "api": "https://kubernetes.default.svc",
        "settings": os.path.join(HERE, "settings.json"),
        "listen": "",
    }
    while arguments and arguments[0] != "--":
        name, _, value = arguments.pop(0).partition("=")
        found[name.lstrip("-")] = value
    return found, arguments[1:]


class ApiServer:
    """The job's state ConfigMap and the scale of its StatefulSets, with the pod's token."""

    def __init__(self, url, account):
        with open(os.path.join(account, "token")) as token_file:
            self.token = token_file.read().strip()
        with open(os.path.join(account, "namespace")) as namespace_file:
            self.namespace = namespace_file.read().strip()
        self.url = url.rstrip("/")
        self.context = ssl.create_default_context(cafile=os.path.join(account, "ca.crt"))

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", "Bearer " + self.token)
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/merge-patch+json")
        delay = 1.0
        for attempt in range(6):
            try:
                with urllib.request.urlopen(request, context=self.context, timeout=30) as answer:
                    return json.loads(answer.read() or b"{}")
            except urllib.error.HTTPError as error:
                if error.code < 500 and error.code != 429:
                    raise
                problem = error
            except (OSError, ValueError) as error:
                problem = error
            if attempt < 5:
                time.sleep(delay)
                delay *= 2
        raise problem

    def config_map_path(self, name):
        return "/api/v1/namespaces/" + self.namespace + "/configmaps/" + name

    def records(self, name):
        return self.call("GET", self.config_map_path(name)).get("data") or {}

    def record(self, name, entries):
        self.call("PATCH", self.config_map_path(name) + "?fieldManager=tfcompile-launcher",
                  {"data": entries})

    def scale_to_zero(self, statefulset):
        path = ("/apis/apps/v1/namespaces/" + self.namespace + "/statefulsets/" + statefulset
                + "/scale?fieldManager=tfcompile-launcher")
        self.call("PATCH", path, {"spec": {"replicas": 0}})


class RevisionGate:
    """Answer this task's revision on the gate port; ask the other tasks of TF_CONFIG theirs."""

    def __init__(self, settings, listen, revision):
        self.port = settings["port"]
        self.wait_seconds = settings["waitSeconds"]
        self.watch_seconds = settings["watchSeconds"]
        self.watch_peers = settings["watchPeers"]
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

    def answer(self):
        while True:
            try:
                connection, _ = self.server.accept()
                with connection:
                    connection.settimeout(2)
                    connection.sendall(self.revision.encode() + b"\\n")
            except OSError:
                time.sleep(0.1)

    def revision_of(self, host):
        try:
            with socket.create_connection((host, self.port), timeout=2) as connection:
                connection.settimeout(2)
                return connection.makefile().readline().strip() or None
        except (OSError, UnicodeDecodeError):
            return None

    def wait(self):
        """Return once every other task has answered this task's revision."""
        pending = list(self.peers)
        reported = None
        while pending:
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

    def superseded(self):
        """A peer that answers another revision, or None; asks a few peers per call, in turn."""
        count = min(self.watch_peers, len(self.peers))
        for _ in range(count):
            host = self.peers[self.turn % len(self.peers)]
            self.turn += 1
            answer = self.revision_of(host)
            if answer is not None and answer != self.revision:
                return host + " runs revision " + answer
        return None


def peer_hosts(tf_config):
    """The host of every task in TF_CONFIG's cluster but this one."""
    task = tf_config.get("task") or {}
    hosts = []
    for role, addresses in sorted((tf_config.get("cluster") or {}).items()):
        for index, address in enumerate(addresses):
            if role != task.get("type") or index != task.get("index"):
                hosts.append(address.rsplit(":", 1)[0])
    return hosts


class State:
    """What this task and the job have done: this pod's emptyDir, and the API server's record."""

    def __init__(self, settings, where, revision, task):
        self.settings = settings
        self.directory = where["state"]
        self.revision = revision
        self.task = task
        self.api = None
        self.records = {}
        if not os.path.exists(os.path.join(where["account"], "token")):
            return  # no API server to record in (a local run): this pod's emptyDir only
        try:
            self.api = ApiServer(where["api"], where["account"])
            self.records = self.api.records(settings["stateConfigMap"])
        except (OSError, ValueError) as error:
            say("cannot read the job's state from the API server (" + describe(error)
                + "); going by this pod's own record")
            self.api = None

    def marker(self, name):
        return os.path.join(self.directory, name)

    def outcome(self):
        """"succeeded", "failed" or None for this task at this revision."""
        for name in ("succeeded", "failed"):
            if os.path.exists(self.marker(name)):
                return name
        recorded = self.records.get(self.task, "").split(" ")
        if len(recorded) >= 2 and recorded[1] == self.revision and recorded[0] in (
                "succeeded", "failed"):
            with open(self.marker(recorded[0]), "w") as marker:
                marker.write("recorded in the API server\\n")
            return recorded[0]
        return None

    def record(self, outcome, detail="", result=None):
        with open(self.marker(outcome), "w") as marker:
            marker.write(detail + "\\n")
        entries = {self.task: " ".join(part for part in (outcome, self.revision, detail)
                                       if part)}
        if result is not None:
            entries["result"] = self.revision + " " + result
        if outcome == "failed":
            # What the Argo CD health check reads with equality alone (it has no string
            # library): the revision that failed, and the task that failed last, with why.
            entries["failed-revision"] = self.revision
            entries["failed-task"] = self.task + " (" + detail + ")"
        self.records.update(entries)
        if self.api is not None:
            try:
                self.api.record(self.settings["stateConfigMap"], entries)
            except (OSError, ValueError) as error:
                say("could not record " + outcome + " in the API server (" + describe(error)
                    + "); a recreated pod will not know it")

    def failures(self):
        """How many times the training failed in this pod (the emptyDir outlives restarts)."""
        try:
            with open(self.marker("failures")) as counter:
                return int(counter.read().strip() or "0")
        except (OSError, ValueError):
            return 0

    def count_failure(self):
        count = self.failures() + 1
        with open(self.marker("failures"), "w") as counter:
            counter.write(str(count) + "\\n")
        return count

    def succeeded(self, tasks):
        wanted = "succeeded " + self.revision
        return all(self.records.get(task, "").startswith(wanted) for task in tasks)

    def refresh(self):
        if self.api is not None:
            try:
                self.records = self.api.records(self.settings["stateConfigMap"])
            except (OSError, ValueError) as error:
                say("cannot read the job's state (" + describe(error) + ")")


def read_result(path):
    """The result the training wrote at path (a sweep's trial): a JSON object of numbers, as
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


def remove_result(path):
    """A result left by an earlier attempt in this pod is not this training's."""
    if path:
        try:
            os.remove(path)
        except OSError:
            pass


def describe(error):
    if isinstance(error, urllib.error.HTTPError):
        return "HTTP " + str(error.code) + " " + str(error.reason)
    return type(error).__name__ + ": " + str(error)


def own_last(statefulsets):
    """The StatefulSets with this pod's own one last: the pod's token is bound to the pod and
    ends with it, so the others are scaled while it still holds."""
    own = "-" + os.environ.get("JOB_NAME", "")
    return ([name for name in statefulsets if not name.endswith(own)]
            + [name for name in statefulsets if name.endswith(own)])


def release(state, statefulsets):
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


def after_success(state, settings):
    """With onSuccess: release, scale the job to 0 once it has succeeded."""
    if settings["onSuccess"] != "release":
        return
    state.refresh()
    if not state.succeeded(settings["successTasks"]):
        return
    say("the job has succeeded; releasing its pods")
    last = settings["releaseLast"]
    names = own_last(settings["releaseFirst"])
    if state.succeeded(settings["evaluatorTasks"]):
        names += last
    elif last:
        say("the evaluator keeps running until its last evaluation")
    release(state, names)


def after_failure(state, settings):
    if settings["onSuccess"] == "release":
        say("releasing the job's pods")
        release(state, own_last(settings["releaseFirst"] + settings["releaseLast"]))


def idle(reason):
    say(reason + "; idling (delete or suspend the job to stop)")
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))
    signal.signal(signal.SIGINT, lambda number, frame: sys.exit(0))
    while True:
        time.sleep(3600)


def train(command, gate):
    """Run the command, forwarding SIGTERM and SIGINT and watching the peers' revisions: its
    exit status (128+N for signal N), whether a signal stopped it, and why the gate stopped it."""
    stopping = []

    def forward(number, frame):
        if child is None:
            sys.exit(0)  # stopped while waiting at the gate: nothing to stop but this
        stopping.append(number)
        try:
            child.send_signal(number)
        except OSError:
            pass

    child = None
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    gate.wait()
    try:
        child = subprocess.Popen(command)
    except OSError as error:
        say("cannot start " + repr(command[0]) + ": " + str(error))
        return 127, False, None
    while True:
        try:
            status = child.wait(timeout=gate.watch_seconds)
            break
        except subprocess.TimeoutExpired:
            pass
        if stopping or not gate.peers:
            continue
        reason = gate.superseded()
        if reason is not None:
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            return 1, False, reason
    return (128 - status if status < 0 else status), bool(stopping), None


def main(arguments):
    where, command = options(arguments)
    if not command:
        say("usage: tfcompile-launcher.py [--OPTION=VALUE...] -- COMMAND [ARGUMENT...]")
        return 2
    with open(where["settings"]) as settings_file:
        settings = json.load(settings_file)
    task = os.environ.get("JOB_NAME", "task") + "-" + os.environ.get("TASK_INDEX", "0")
    revision = os.environ.get("TFCOMPILE_REVISION") or "unknown"
    gate = RevisionGate(settings["revisionGate"], where["listen"], revision)
    state = State(settings, where, revision, task)
    outcome = state.outcome()
    if outcome is not None:
        say("task " + task + " of revision " + revision + ": " + outcome + " (recorded)")
    if outcome == "succeeded":
        after_success(state, settings)
        idle("this task already succeeded")
    if outcome == "failed":
        after_failure(state, settings)
        idle("this task already failed and stopped retrying")
    result_file = os.environ.get("TFCOMPILE_RESULT_FILE", "")
    remove_result(result_file)
    status, stopping, superseded = train(command, gate)
    if stopping:
        return status
    if superseded is not None:
        say(superseded + ", not " + revision + ": stopping the training; this pod is being "
            "replaced")
        return status
    if status == 0:
        state.record("succeeded", result=read_result(result_file))
        after_success(state, settings)
        idle("training succeeded")
    policy = settings.get("failurePolicy")
    failures = state.count_failure()
    if policy is not None:
        final = status in policy["doNotRetryExitCodes"]
        if final or failures > policy["maxRestarts"]:
            why = ("exit " + str(status) + " after " + str(failures - 1) + " restarts")
            say("training failed (" + why + "); " + (
                "that exit code means do not retry" if final
                else "no restarts left (failurePolicy.maxRestarts)"))
            state.record("failed", why)
            after_failure(state, settings)
            idle("the task stopped retrying")
    say("training exited with status " + str(status) + "; the kubelet will restart it")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def command() -> list[str]:
    """The container `command`; the training command follows as the container's `args`."""
    return ["python", f"{LAUNCHER_DIRECTORY}/{PROGRAM_FILE}", "--"]


def task_names(role: str, replicas: int) -> list[str]:
    """`worker-0`, `worker-1`, …: the keys of the job's state record."""
    return [f"{role}-{index}" for index in range(replicas)]


def settings_text(settings: dict[str, Any]) -> str:
    """The launcher's settings as the ConfigMap carries them: sorted, indented, a final newline."""
    return json.dumps(settings, indent=2, sort_keys=True) + "\n"
