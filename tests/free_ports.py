"""Free loopback ports for the servers the tests start: one way of picking them, for the tests
(`free_ports`, imported) and for the scripts that start the control plane, the node and the
GitOps controllers (`python3 tests/free_ports.py N` prints N of them).

A port the kernel hands out for `bind(0)` is one it also hands out to any outgoing connection
once the socket closes: between picking it and a server binding it, a connection of the API
server, a controller or podman beside it could take it. So the ports are picked at random below
the kernel's ephemeral range (`ip_local_port_range`), where only a program that names its port
binds one. Standard library only: the scripts run it with the system's Python.
"""

from __future__ import annotations

import random
import socket
import sys
from pathlib import Path

_LOWEST = 10_000


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that are free right now, below the ephemeral range.

    Raises RuntimeError when there are not that many."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    candidates = random.Random().sample(range(_LOWEST, low),
                                        k=min(low - _LOWEST, 4 * count + 64))
    sockets: list[socket.socket] = []
    try:
        for port in candidates:
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            sockets.append(sock)
            if len(sockets) == count:
                return [sock.getsockname()[1] for sock in sockets]
        raise RuntimeError(f"no {count} free loopback ports below {low}")
    finally:
        for sock in sockets:
            sock.close()


if __name__ == "__main__":
    try:
        print(" ".join(str(port) for port in free_ports(int(sys.argv[1]))))
    except RuntimeError as failure:
        sys.exit(str(failure))
