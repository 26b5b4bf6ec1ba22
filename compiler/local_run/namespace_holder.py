"""A short-lived process that creates namespaces for the runner: a pod's network and UTS
namespaces, or the run's user namespace.

The runner starts one per pod (one for the run's bridge, one for the run's user namespace),
configures the new namespace from outside while this process keeps it alive (addresses and links,
or the user namespace's ID maps), opens the namespaces by file descriptor and then closes this
process's standard input, which ends it. The namespaces are never given a name under /run/netns:
they belong to the run's open descriptors and processes only, so the kernel frees them once the
run ends, even when the runner itself is killed.

Usage: python -P -m <package>.namespace_holder RUNNER_PID network [HOSTNAME]
       python -P -m <package>.namespace_holder RUNNER_PID user
"""

from __future__ import annotations

import os
import socket
import sys

from . import linux

NETWORK = "network"
USER = "user"


def main(arguments: list[str]) -> int:
    """Create the namespaces, say `ready`, and wait until the runner closes standard input."""
    linux.die_with_parent()
    if os.getppid() != int(arguments[0]):
        return 1
    if arguments[1] == USER:
        linux.unshare(linux.CLONE_NEWUSER)
    else:
        linux.unshare(linux.CLONE_NEWNET | linux.CLONE_NEWUTS)
        if len(arguments) > 2:
            socket.sethostname(arguments[2])
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.read()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as error:
        sys.stderr.write(f"cannot create the namespaces: {error}\n")
        sys.exit(1)
