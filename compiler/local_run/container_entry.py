"""The helper that starts one container: it joins the pod's namespaces and becomes its command.

The runner starts `python -P -m <package>.container_entry START_FILE` in a new session with the
pod's namespace descriptors inherited. This process joins the pod's network and UTS namespaces,
creates a mount namespace and a PID namespace, and forks the guard: process 1 of that PID
namespace, which stays the host's root, asks the kernel for SIGKILL when this process ends, and
forks the container's first process into a PID namespace of its own (so the command is process 1
of what it sees, as a container's first process is). That process builds the container's
filesystem view (`filesystem_view`), enters the run's user namespace (`user_namespace`), takes
the pod's user and groups there (setgroups, setgid, setuid, in that order, as a container runtime
does) and executes the container's command with its environment. The guard waits and exits with
the command's status (128 + signal number when it was killed); so does this process.

Why a guard: the kernel kills every process of a PID namespace when its process 1 ends, and
sends a process a chosen signal when its parent ends (PR_SET_PDEATHSIG), but forgets that
request when the process changes user, which the command's process does. The guard never changes
user, and no process of the container can signal or trace it (they run as other, unprivileged
host users, in a PID namespace below its). So however the run ends, SIGKILL of the runner
included: the runner's end kills this process (its own PR_SET_PDEATHSIG), that kills the guard,
and the kernel then kills every process of the container, whatever it did to escape (a new
session, a double fork, PR_SET_PDEATHSIG cleared). Its mount namespace, and every mount in it,
goes with its last process.

Signals: this process and the guard ignore SIGTERM, SIGINT and SIGHUP; the runner signals the
whole process group, which reaches the container's processes directly. Like any container's
process 1, the command only sees SIGTERM if it handles it; SIGKILL always works.

START_FILE is JSON: runner_process, network_namespace, uts_namespace, user_namespace (inherited
descriptors), staging_directory, mounts [{source, target, read_only, sub_path, create}],
working_directory, arguments, environment, user, group, groups (IDs inside the user namespace),
no_new_privileges, traversable (paths whose directories the container's user must be able to
enter).
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from typing import Any, NoReturn

from . import filesystem_view, linux
from .filesystem_view import MountRequest

START_FAILURE = 128
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _report(message: str) -> None:
    sys.stderr.write(f"tfcompile run-local: {message}\n")
    sys.stderr.flush()


def _exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def _become_container(start: dict[str, Any]) -> NoReturn:
    try:
        arguments: list[str] = start["arguments"]
        mounts = [MountRequest(m["source"], m["target"], m["read_only"], m.get("sub_path", ""),
                               m.get("create", False)) for m in start["mounts"]]
        for number in _STOP_SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        try:
            filesystem_view.prepare(start["staging_directory"], mounts,
                                    start["working_directory"])
        except OSError as error:
            _report(f"cannot prepare the container's filesystem: {error}")
            os._exit(START_FAILURE)
        try:
            _become_user(start)
        except OSError as error:
            _report(f"cannot run as user {start['user']} and group {start['group']}: {error}")
            os._exit(START_FAILURE)
        for number in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(number, signal.SIG_DFL)
        try:
            os.execvpe(arguments[0], arguments, start["environment"])
        except OSError as error:
            reason = ("not found in $PATH" if isinstance(error, FileNotFoundError)
                      else error.strerror)
            _report(f"cannot run {arguments[0]!r}: {reason}")
            os._exit(START_FAILURE)
    except BaseException as error:
        # Process 1 of the container must never return into the code it was forked from.
        _report(f"cannot start the container: {error!r}")
        os._exit(START_FAILURE)


def _make_traversable(paths: list[str]) -> None:
    """Let any user enter the directories above `paths` (the interpreter's), in this
    container's view only: the root is an overlay, so the change lands in its per-start upper
    layer and never on this machine's files. Directories under other mounts are left alone."""
    points = filesystem_view.mount_points()
    for path in paths:
        directory = os.path.dirname(path) if not os.path.isdir(path) else path
        while directory not in ("", "/"):
            deepest = max((point for point in points
                           if directory == point or directory.startswith(point.rstrip("/") + "/")),
                          key=len, default="/")
            if deepest == "/":
                mode = os.stat(directory).st_mode
                if not mode & 0o001:
                    os.chmod(directory, (mode & 0o7777) | 0o001)
            directory = os.path.dirname(directory)


def _become_user(start: dict[str, Any]) -> None:
    """Enter the user namespace, then take the pod's IDs inside it. Until setuid the process is
    still the host's root by ID (not by capability), so nothing runs in between."""
    user, group, groups = int(start["user"]), int(start["group"]), start["groups"]
    _make_traversable(start["traversable"])
    linux.setns(start["user_namespace"], linux.CLONE_NEWUSER)
    os.close(start["user_namespace"])
    os.setgroups([int(value) for value in groups])
    os.setresgid(group, group, group)
    os.setresuid(user, user, user)
    if start["no_new_privileges"]:
        linux.no_new_privileges()


def _parent_ended(alive: int) -> bool:
    """Whether the write end of the `alive` pipe, held only by the parent, is closed."""
    readable, _, _ = select.select([alive], [], [], 0)
    return bool(readable)


def _guard(start: dict[str, Any], alive: int) -> NoReturn:
    """Process 1 of the container's outer PID namespace (see the module's docstring)."""
    try:
        linux.die_with_parent()
        if _parent_ended(alive):  # the parent ended before the request took effect
            os._exit(START_FAILURE)
        os.close(alive)
        linux.unshare(linux.CLONE_NEWPID)
        child = os.fork()
        if child == 0:
            _become_container(start)
        os.close(start["user_namespace"])
        _, status = os.waitpid(child, 0)
        os._exit(_exit_code(status))
    except BaseException as error:
        _report(f"cannot start the container: {error!r}")
        os._exit(START_FAILURE)


def main(start_file: str) -> int:
    """Start the container described in `start_file` and return its exit status."""
    linux.die_with_parent()
    with open(start_file, encoding="utf-8") as stream:
        start: dict[str, Any] = json.load(stream)
    if os.getppid() != start["runner_process"]:
        return START_FAILURE
    for key, kind in (("network_namespace", linux.CLONE_NEWNET),
                      ("uts_namespace", linux.CLONE_NEWUTS)):
        linux.setns(start[key], kind)
        os.close(start[key])
    linux.unshare(linux.CLONE_NEWNS | linux.CLONE_NEWPID)
    for number in _STOP_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    alive, keep_alive = os.pipe()
    guard = os.fork()
    if guard == 0:
        os.close(keep_alive)
        _guard(start, alive)
    os.close(alive)
    os.close(start["user_namespace"])
    _, status = os.waitpid(guard, 0)
    return _exit_code(status)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except OSError as failure:
        _report(f"cannot enter the pod's namespaces: {failure}")
        sys.exit(START_FAILURE)
