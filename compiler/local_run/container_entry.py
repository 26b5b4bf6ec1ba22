"""The helper that starts one container: it joins the pod's namespaces and becomes its command.

The runner starts `python -P -m <package>.container_entry START_FILE` in a new session with the
pod's namespace descriptors inherited. This process joins the pod's network and UTS namespaces,
then creates a mount namespace and a PID namespace and forks: the child (process 1 of the new PID
namespace, as a container's first process is) builds the container's filesystem view
(`filesystem_view`) and executes the container's command with its environment; this process
waits and exits with the child's status (128 + signal number when the child was killed).

Signals: this process ignores SIGTERM, SIGINT and SIGHUP; the runner signals the whole process
group, which reaches the container's processes directly. Like any container's process 1, the
command only sees SIGTERM if it handles it; SIGKILL always works. Both processes are killed by the
kernel when their parent ends, and when process 1 ends the kernel ends every other process of the
PID namespace, so no process of a container outlives it.

START_FILE is JSON: runner_process, network_namespace, uts_namespace (inherited descriptors),
staging_directory, mounts [{source, target, read_only}], working_directory, arguments, environment,
user, group, groups, no_new_privileges, traversable (paths whose directories the container's user
must be able to enter). After the filesystem view is entered, the child takes the pod's user and
groups (setgroups, setgid, setuid, in that order) just before it executes the command, as a
container runtime does.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any, NoReturn

from . import filesystem_view, linux
from .filesystem_view import MountRequest

START_FAILURE = 128


def _report(message: str) -> None:
    sys.stderr.write(f"tfcompile run-local: {message}\n")
    sys.stderr.flush()


def _become_container(start: dict[str, Any]) -> NoReturn:
    try:
        linux.die_with_parent()
        arguments: list[str] = start["arguments"]
        mounts = [MountRequest(m["source"], m["target"], m["read_only"]) for m in start["mounts"]]
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
    user, group, groups = int(start["user"]), int(start["group"]), start["groups"]
    if user != 0:
        _make_traversable(start["traversable"])
    os.setgroups([int(value) for value in groups])
    os.setgid(group)
    os.setuid(user)
    if start["no_new_privileges"]:
        linux.no_new_privileges()


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
    child = os.fork()
    if child == 0:
        _become_container(start)
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)
    _, status = os.waitpid(child, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1]))
    except OSError as failure:
        _report(f"cannot enter the pod's namespaces: {failure}")
        sys.exit(START_FAILURE)
