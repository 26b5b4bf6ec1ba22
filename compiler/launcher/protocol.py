"""The words the launcher and the compiler share: versions, files, keys, records and limits.

The compiler writes them into each job (the settings, the mounts, the launcher policy's
patterns) and the launcher reads and writes them in the pod, so both take them from here:
one text, and no I/O, so that the compiler proper imports this module and none of the
launcher's others (which open files, sockets and processes). Like every module of the launcher
it is shipped in its zip, imports nothing but the standard library, and keeps to Python 3.8.

`PROTOCOL` is what the pods of one job must agree on (`program.py` says what it covers); a
change to what a word below means, or to its text, raises it.
"""

PROTOCOL = 3
"""The launcher's protocol version (see `program.py`'s docstring). 3: the launcher is one zip
application, `tfcompile-launcher.pyz`, its settings beside it (2 shipped its modules as files, a
pod that restarts during the roll must find the program its template names)."""
SETTINGS_FILE = "settings.json"
"""The job's settings, beside the program."""
REVISION_SETTING = "revision"
"""The settings' key for the revision they belong to (absent: any revision)."""
FIELD_MANAGER = "tfcompile-launcher"
"""The field manager of the launcher's writes to the API server."""

RESERVED_MOUNT_PATH = "/opt/tfcompile"
"""Where tfcompile mounts its volumes in a TensorFlow container (the spec's reserved path)."""
STATE_DIRECTORY = RESERVED_MOUNT_PATH + "/state"
"""This pod's emptyDir: its markers outlive container restarts."""
SUCCEEDED = "succeeded"
FAILED = "failed"
TRAINING = "training"
STOPPED = "stopped"
"""A task's record while it trains, and after a signal stopped it (deleted, evicted, drained,
suspended): `training <revision> since <epoch seconds> stops <n>`, `stopped <revision> after
<seconds> stops <n>`. The deadline's clock, and the count of signal stops its peers compare."""
FAILED_REVISION_KEY = "failed-revision"
FAILED_TASK_KEY = "failed-task"
"""Beside a final failure's record, for the Argo CD health check (which compares by equality
alone): the revision that failed, and `<task> (exit <status> after <restarts> restarts)`."""
PROGRESS_SUFFIX = ".progress"
PROGRESS_REVISION_SUFFIX = ".progress-revision"
"""The state's keys of a task's progress (`progress.py`): `<task>.progress` holds the line,
`<task>.progress-revision` the revision it is of."""
RESULT_KEY = "result"
"""The state's key of a trial's result: `<revision> <JSON object of numbers>`, or `<revision>
refused: <reason>` when what the training wrote is not a result (`results.py`)."""

PROGRESS_MAXIMUM_BYTES = 256
"""The most a progress line may hold, in bytes (it is ASCII)."""
PROGRESS_CHARACTERS = "A-Za-z0-9_.,:/ +-"
"""What a progress line is made of (a regular expression's class, for RE2 as for Python)."""

RESULT_FILE = STATE_DIRECTORY + "/result.json"
"""Where a sweep's trial may write its result (its `results.RESULT_VARIABLE`): this pod's
emptyDir."""
RESULT_MAXIMUM_BYTES = 4096
"""The most a result may hold, in UTF-8 bytes: the file as written, and the compact JSON
recorded (which is ASCII: other characters are recorded as JSON escapes, and count as such)."""
REFUSED = "refused"
"""The recorded result of a file that is not one: `refused: <reason>`."""
TOO_LARGE = "larger than " + str(RESULT_MAXIMUM_BYTES) + " bytes"
NOT_TEXT = "not UTF-8 text"
NOT_JSON = "not JSON"
NOT_NUMBERS = "not a JSON object of finite numbers"
NOT_A_FILE = "not a regular file that can be read"
REFUSALS = (TOO_LARGE, NOT_TEXT, NOT_JSON, NOT_NUMBERS, NOT_A_FILE)
"""Every reason a result is refused for, as recorded: letters, digits, spaces and hyphens,
so that a policy's regular expression can list them as they are."""
