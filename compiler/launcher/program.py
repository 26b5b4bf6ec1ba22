"""tfcompile launcher: runs the training command of one TensorFlow task in a StatefulSet pod.

Written by tfcompile (see the job's settings.json beside the zip that holds this file). Exit 0
of the training records success and idles; a failure is retried by the kubelet until the
failure policy says stop.

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
  peer's stop (a peer deleted, evicted or drained during this training) is not counted, and
  is recorded as a stop of this task in turn: a peer whose new training had already joined
  this one's fails with it, and that failure is not counted either (`stopped_peers`);
- keeps the deadline's clock (`deadline`): the seconds this revision has trained in this task,
  the times no training ran after a signal stopped it left out, in the task's record
  (`training <revision> since <epoch seconds> stops <n>`, and `stopped <revision> after
  <seconds> stops <n>` once a signal stopped it, renewed until the training has ended); when
  the clock passes the deadline it stops the training and records the failure (`deadline
  <duration> passed`), then idles or releases as after any failure. No signal stops the clock
  (`train` says why it must not);
- in a sweep's trial, records after its success the result the training wrote at
  `TFCOMPILE_RESULT_FILE` (a JSON object of finite numbers, at most `RESULT_MAXIMUM_BYTES` in
  UTF-8), as `result: <revision> <compact JSON>` beside the task's record, in a request of its
  own (so a cluster policy that predates results keeps the success); a file that is not such
  an object is recorded as `result: <revision> refused: <reason>` (and said in the log), never
  an exception, and a stale one is removed before the training starts;
- records the progress the training writes at `TFCOMPILE_PROGRESS_FILE` (`progress.py`), at
  most every `PROGRESS_SECONDS` while it runs and once where it ended, as a line beside the
  task's record that `tfcompile status` and the Argo CD health check show;
- forwards SIGTERM and SIGINT to the training process, so pods stop promptly, after recording the
  stop (so a peer that fails for the loss of this task finds it and does not count the failure);
  the training has the pod's grace period (`terminationGracePeriodSeconds`) to save a checkpoint,
  and a training that ends after a signal records neither success nor failure;
- holds the training back until every other task of its `TF_CONFIG` runs the same revision, and
  stops it when a peer answers another one (the revision gate; `compiler/objects/revision_gate.py`
  says why).

It uses only the standard library and the Python of TensorFlow images (3.8 and later), talks to
the API server with the pod's service-account token, and has no dollar sign at all, so neither
Flux's post-build substitution nor the kubelet's variable expansion can touch it. Its settings
come only from its settings file (which tasks make the job succeed, which StatefulSets it may
scale, the failure policy, the deadline, the gate's timing) and its arguments (`--role=`, the
pod's role); the pod's index (`TASK_INDEX`), revision and `TF_CONFIG` come from its environment.

`PROTOCOL` (`protocol.py`, beside every word the pods and the compiler share) is what the pods
of one job must agree on: the revision gate's answers, the record format, the settings it reads,
the arguments and paths it is started with. A change to any of them raises it; the job's
launcher ConfigMap is named by it, so a new protocol rolls every job, while a new text of the
same protocol replaces the program in place and restarts no pod.

The settings file sits in that same ConfigMap and is updated in place too, so it names the
revision it was compiled for: a launcher whose pod runs another revision (an old pod restarting
during a roll, or a new one before the kubelet has refreshed its files) waits until the file is
of its own revision, rather than act on another revision's settings.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from typing import NoReturn

from .api_server import ACCOUNT_DIRECTORY, API_SERVER, Settings
from .gate import RevisionGate, peer_tasks
from .messages import describe, say
from .progress import PROGRESS_FILE_NAME, PROGRESS_SECONDS, PROGRESS_VARIABLE, ProgressReader
from .protocol import FAILED, REVISION_SETTING, SETTINGS_FILE, STATE_DIRECTORY, SUCCEEDED
from .records import State
from .results import RESULT_VARIABLE, read_result, remove_result

SETTINGS_WAIT_SECONDS = 5.0
REVISION_VARIABLE = "TFCOMPILE_REVISION"
"""The pod's revision (its `tfcompile.dev/revision` annotation, through the downward API)."""
STOP_SECONDS = 30.0
"""How long a training stopped by the launcher (deadline, another revision) has to end after
SIGTERM before it is killed."""
STOP_CLOCK_SECONDS = 5.0
"""How often the record of a stop is renewed while the stopped training still runs: the
deadline's clock counts its time (`State.renew_stop`), and the kubelet may kill the launcher
with it at the end of the grace period."""
IDLE_SECONDS = 3600.0
"""How long an idle launcher sleeps at a time."""
PEER_RECORD_SECONDS = 30.0
"""How long the launcher of a failed training looks for a peer's stop before it counts the
failure. A peer records a signal before its training ends, but a failure it was not counted
for only once its training has ended, and the failures of the two trainings come together; on
a loaded node the kubelet may signal the peer some seconds after its training was lost, and a
record the API server did not take at once is written again while the peer's training stops
(`STOP_CLOCK_SECONDS`). A failure that is counted waits this long for its restart."""
PEER_RECORD_POLL_SECONDS = 1.0


def options(arguments: list[str], directory: str) -> tuple[dict[str, str], list[str]]:
    """Options before `--` (tests point them elsewhere); the training command after it. The
    settings are in `directory` (where the launcher's ConfigMap is mounted) unless one says."""
    found = {
        "state": STATE_DIRECTORY,
        "account": ACCOUNT_DIRECTORY,
        "api": API_SERVER,
        "settings": os.path.join(directory, SETTINGS_FILE),
        "listen": "",
        "role": "",
    }
    remaining = list(arguments)
    while remaining and remaining[0] != "--":
        name, _, value = remaining.pop(0).partition("=")
        found[name.lstrip("-")] = value
    return found, remaining[1:]


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


# Signals that came after the training ended, while its outcome was being recorded (and the job
# released): the record is finished first, then the launcher exits. A stop recorded then would
# overwrite the task's success (the release of a job stops its own pods).
DEFERRED_SIGNALS: list[int] = []


def idle(reason: str, stopped: bool = False) -> NoReturn:
    """Idle until the pod is stopped; exit at once when a signal already came (`stopped`, or
    one deferred while the outcome was recorded)."""
    signal.signal(signal.SIGTERM, exit_quietly)  # first: a signal while saying why ends it
    signal.signal(signal.SIGINT, exit_quietly)
    say(reason + "; idling (delete or suspend the job to stop)")
    if stopped or DEFERRED_SIGNALS:
        sys.exit(0)
    while True:
        time.sleep(IDLE_SECONDS)


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
          peers: list[str], progress: ProgressReader | None = None) -> Ending:
    """Run the command once every task runs this revision, forwarding SIGTERM and SIGINT (the
    stop recorded first), watching the peers' revisions and the deadline (`until`).

    No signal stops the deadline. The launcher cannot tell the kubelet's SIGTERM from one the
    training's own processes send it, so it treats both alike: it forwards the signal and
    waits for the training to end, and meanwhile the deadline still stops it when it comes
    (where the kubelet sent the signal, it kills the pod at the end of its grace period
    anyway), and the stop's record is renewed while the training runs and once more when it
    has ended, so a restart goes on from every second the training ran; only the time after
    it ended, when nothing of this task trains, is left out."""
    stopping: list[int] = []
    starting: list[bool] = []
    child: subprocess.Popen[bytes] | None = None

    def forward(number: int, frame: object) -> None:
        if child is not None and child.poll() is not None:
            DEFERRED_SIGNALS.append(number)  # the training has ended: record its outcome first
            return
        if not stopping:
            state.record_stop()
        stopping.append(number)
        if child is None:
            if starting:
                return  # the training is being started: it gets the signal once it runs
            sys.exit(0)  # stopped while waiting at the gate: nothing to stop but this
        with contextlib.suppress(OSError):
            child.send_signal(number)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    if not gate.wait(until) or (until is not None and time.time() >= until):
        return Ending(1, deadline=True)
    state.refresh()
    peer_stops = state.stops_of(peers)
    starting.append(True)
    try:
        child = subprocess.Popen(command, env=training_environment(progress))
    except OSError as error:
        say("cannot start " + repr(command[0]) + ": " + str(error))
        return Ending(127, signalled=bool(stopping), peer_stops=peer_stops)
    if stopping:  # a signal came while the training was being started
        with contextlib.suppress(OSError):
            child.send_signal(stopping[0])
    while True:
        wait = gate.watch_seconds if progress is None else min(gate.watch_seconds,
                                                                PROGRESS_SECONDS)
        if stopping:
            wait = STOP_CLOCK_SECONDS
        if until is not None:
            if time.time() >= until:
                return Ending(stop(child), deadline=True, signalled=bool(stopping))
            wait = max(0.1, min(wait, until - time.time()))
        try:
            status = child.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            pass
        report_progress(state, progress)
        if stopping:
            # Without a deadline the clock counts for nothing, but a stop the API server has
            # not taken yet is written again: a peer whose training fails with this one looks
            # for it (`stopped_peers`).
            if until is not None or state.unsaved:
                state.renew_stop()
            continue
        if not gate.peers:
            continue
        reason = gate.superseded()
        if reason is not None:
            state.record_stop()  # first: the peers whose training fails with this one find it
            stop(child)
            return Ending(1, superseded=reason)
    if stopping:
        state.renew_stop()  # the training's last seconds count too
    return Ending(128 - status if status < 0 else status, signalled=bool(stopping),
                  peer_stops=peer_stops)


def training_environment(progress: ProgressReader | None) -> dict[str, str]:
    """The training's environment: the pod's, and where it may write its progress (set here,
    not in the pod template, so that a new launcher restarts no pod)."""
    environment = dict(os.environ)
    if progress is not None and progress.path:
        environment[PROGRESS_VARIABLE] = progress.path
    return environment


def report_progress(state: State, progress: ProgressReader | None,
                    final: bool = False) -> None:
    """Record the training's progress when it changed (at most every `PROGRESS_SECONDS`)."""
    line = progress.changed(time.time(), final) if progress is not None else None
    if line is not None:
        state.record_progress(line)


def stopped_peers(state: State, tasks: list[str], before: dict[str, int]) -> list[str]:
    """The peers stopped since the training started (`before`: their stops then), looked for
    until `PEER_RECORD_SECONDS` have passed: a training that fails for the loss of a peer may
    fail before that peer has recorded why its own training ended. A stop is a signal to the
    peer's pod, or a failure of its training that was not counted for a stop of its own peer:
    a task evicted and back before its peer's training noticed joins that doomed training, and
    fails with it."""
    give_up = time.time() + PEER_RECORD_SECONDS
    while True:
        state.refresh()
        stopped = [task for task, stops in state.stops_of(tasks).items()
                   if stops > before.get(task, 0)]
        if (stopped or not tasks or state.api is None or DEFERRED_SIGNALS
                or time.time() >= give_up):  # a signal: the pod is stopping, be prompt
            return stopped
        time.sleep(PEER_RECORD_POLL_SECONDS)


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
            signal.signal(signal.SIGTERM, exit_quietly)
            signal.signal(signal.SIGINT, exit_quietly)
            say("the settings are of revision " + str(written) + ", this pod runs " + revision
                + ": waiting for the kubelet to refresh them")
            reported = True
        time.sleep(SETTINGS_WAIT_SECONDS)


def main(arguments: list[str], directory: str) -> int:
    """The launcher, started by `start.py` with its arguments and the directory of its files."""
    where, command = options(arguments, directory)
    if not command:
        say("usage: tfcompile-launcher.pyz --role=ROLE [--OPTION=VALUE...] -- COMMAND "
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
    progress = ProgressReader(os.path.join(where["state"], PROGRESS_FILE_NAME))
    progress.remove()
    started = state.start_clock()
    deadline = settings.get("deadline")
    until = None if deadline is None else started + float(deadline["seconds"])
    tasks = peer_tasks(json.loads(os.environ.get("TF_CONFIG") or "{}"))
    ending = train(command, gate, state, until, tasks, progress)
    status = ending.status
    if status == 0 and not (ending.signalled or ending.deadline or ending.superseded):
        report_progress(state, progress, final=True)  # where it ended, before its success
    if ending.deadline and deadline is not None:  # whatever signals came before it
        why = "deadline " + str(deadline["written"]) + " passed"
        say("revision " + revision + " has trained for its deadline; stopped (" + why + ")")
        state.record(FAILED, why)
        after_failure(state, settings)
        idle("the task stopped at the deadline", stopped=ending.signalled)
    if ending.signalled:
        say("the training ended (status " + str(status) + ") after a signal stopped it: "
            "neither a success nor a failure is recorded")
        return status
    if ending.superseded is not None:
        say(ending.superseded + ", not " + revision + ": stopping the training; this pod is "
            "being replaced")
        return status
    if status == 0:
        state.record(SUCCEEDED, result=read_result(result_file))
        after_success(state, settings)
        idle("training succeeded")
    stopped = stopped_peers(state, tasks, ending.peer_stops)
    if stopped:
        say("training exited with status " + str(status) + " after " + ", ".join(stopped)
            + " stopped (deleted, evicted, drained or restarted for a peer's stop); not "
            "counted as a failure, the kubelet will restart it")
        state.record_interruption()
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
