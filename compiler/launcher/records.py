"""What a task has done, kept where it outlives a restart: this pod's emptyDir and the job's state.

The job's state ConfigMap (`J-state`) holds one key per task, `<role>-<index>`, which only that
task's pod may write (the cluster's launcher policy holds it to the formats `protocol.py`
names), and beside a final failure the two keys the Argo CD health check reads. The emptyDir
keeps this pod's copy (markers that outlive container restarts, and the failure count of
`failurePolicy`).
"""

from __future__ import annotations

import os
import time

from .api_server import ApiServer, Settings
from .messages import describe, say
from .protocol import (
    FAILED,
    FAILED_REVISION_KEY,
    FAILED_TASK_KEY,
    PROGRESS_REVISION_SUFFIX,
    PROGRESS_SUFFIX,
    RESULT_KEY,
    STOPPED,
    SUCCEEDED,
    TRAINING,
)

CLOCK_FILE = "clock"
"""This pod's copy of the task's training record, for a run without an API server."""
CLOCK_MAXIMUM_DIGITS = 12
"""The most digits of a time or count in a training record (the launcher policy's too)."""
STOP_RECORD_SECONDS = 3.0
"""The longest one attempt to record a stop may take (the pod's grace period is running)."""
FAILURES_FILE = "failures"


def parse_clock(record: str, revision: str, now: float) -> tuple[float, int] | None:
    """When the deadline's clock started (epoch seconds) and how many times a signal stopped
    the task, from a training record of `revision`; None for any other record.

    Only the digits the launcher writes (and the cluster's launcher policy admits) are read:
    `float` would also take `nan`, a start after which no time ever passes the deadline."""
    parts = record.split(" ")
    if len(parts) != 6 or parts[1] != revision or parts[4] != "stops" or not all(
            part.isascii() and part.isdigit() and len(part) <= CLOCK_MAXIMUM_DIGITS
            for part in (parts[3], parts[5])):
        return None
    seconds, stops = float(parts[3]), int(parts[5])
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
        self.unsaved = False
        """The API server lacks this task's latest training record (a write failed)."""
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

    def record_progress(self, line: str) -> None:
        """The training's progress (`progress.py`) beside the task's record: the line, and the
        revision it belongs to. One attempt, briefly: progress is not worth holding a training
        up, and the next one replaces it."""
        entries = {self.task + PROGRESS_SUFFIX: line,
                   self.task + PROGRESS_REVISION_SUFFIX: self.revision}
        self.records.update(entries)
        if self.api is not None:
            try:
                self.api.record(self.settings["stateConfigMap"], entries, 1, STOP_RECORD_SECONDS)
            except (OSError, ValueError) as error:
                say("could not record the progress in the API server (" + describe(error) + ")")

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
        self.renew_stop()

    def record_interruption(self) -> None:
        """The training failed for a peer's stop, not counted: count it as a stop of this task
        (the clock goes on), so a peer whose training fails with this one's does not count
        that failure either."""
        self.stops += 1
        self.save_clock(TRAINING + " " + self.revision + " since " + str(int(self.started))
                        + " stops " + str(self.stops))

    def renew_stop(self) -> None:
        """The stopped training still runs (its grace period, or a training that ignores the
        signal): the clock goes on until it ends, so the stop's record says how long the task
        has trained by now. Whoever sent the signal, every second the training runs counts."""
        self.save_clock(STOPPED + " " + self.revision + " after "
                        + str(max(0, int(time.time() - self.started))) + " stops "
                        + str(self.stops), attempts=2, timeout=STOP_RECORD_SECONDS)

    def save_clock(self, record: str, attempts: int = 6, timeout: float = 30.0) -> None:
        """Write the training record here and in the API server. Only a record the API server
        took counts as recorded there: one it refused or never answered is written again by
        the next call, even if that record is the same (`unsaved` says one is owed)."""
        with open(self.marker(CLOCK_FILE), "w") as marker:
            marker.write(record + "\n")
        if self.records.get(self.task) == record and not self.unsaved:
            return
        if self.api is None:
            self.records[self.task] = record
            return
        try:
            self.api.record(self.settings["stateConfigMap"], {self.task: record}, attempts,
                            timeout)
        except (OSError, ValueError) as error:
            self.unsaved = True
            say("could not record " + repr(record) + " in the API server ("
                + describe(error) + "); it is written again with the next record")
            return
        self.unsaved = False
        self.records[self.task] = record

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
