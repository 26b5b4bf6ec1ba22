"""The GitOps tier: the session's real node with a git server, Argo CD and Flux.

`scripts/control-plane.sh up --node --gitops both` starts them once for the session
(tests/node_fixture.py; the controllers are built from source with Go the first time); each
tool's tests push to a repository of their own, made by `tfcompile init`, and the jobs run in the
namespace the deploy files name; the launcher policy `init` writes is applied once, as
docs/gitops.md says. After the last test `down` must leave no process, port, mount or file
behind. Needs root (a kubelet and a container runtime), Go, git and redis-server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.local_node import LocalNode
from tests.node_fixture import RealNode


@dataclass(frozen=True)
class GitOps:
    """The running tier: the node (control plane, node, kubectl) and the git server."""

    node: LocalNode
    git_root: Path  # a bare repository created here as NAME.git is served...
    git_url: str  # ...at GIT_URL/NAME.git


def _ports_of(node: LocalNode) -> list[int]:
    """Every port the tier's processes listen on, from /proc/net/tcp (LISTEN)."""
    pids = [int(path.read_text()) for path in (node.run_directory / "pids").iterdir()]
    inodes: set[str] = set()
    for pid in pids:
        try:
            for descriptor in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(descriptor)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    ports = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
            ports.append(int(fields[1].split(":")[1], 16))
    return ports


@pytest.fixture(scope="package")
def gitops(real_node: RealNode) -> Iterator[GitOps]:
    ports = _ports_of(real_node.node)
    assert ports, "no listening port was found while the tier ran"
    yield GitOps(real_node.node, Path(real_node.exported("TFCOMPILE_GIT_ROOT")),
                 real_node.exported("TFCOMPILE_GIT_URL"))
