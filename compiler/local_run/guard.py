"""The guard of a local run: removes its pods when the runner dies without doing it.

podman's containers do not end with the process that started them (each has a monitor of its
own), so a runner killed with SIGKILL would leave its pods training. The runner starts this
module as a process in a session of its own, connected by a pipe only the runner writes to:
when the runner ends, however it ends, the kernel closes the pipe, the guard reads the end of
it, removes every pod, container and network labelled with the run (`remove_labelled`) and the
run's temporary directories, and exits. After a normal end the runner has removed them first,
and the guard finds nothing left.

    python -m tfcompile.compiler.local_run.guard PODMAN RUN_IDENTIFIER [DIRECTORY ...]
"""

from __future__ import annotations

import shutil
import signal
import sys

from .container_runtime import remove_labelled


def main(arguments: list[str]) -> int:
    program, run_identifier, *directories = arguments
    # The terminal's Ctrl-C reaches the runner, which stops the pods with their grace periods;
    # the guard waits for the pipe instead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass
    remove_labelled(program, run_identifier)
    for directory in directories:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
