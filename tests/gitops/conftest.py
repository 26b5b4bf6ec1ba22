"""The GitOps tier: one control plane with the local node, a git server, Argo CD and Flux.

`scripts/control-plane.sh up --node --gitops both` starts them once for the whole tier (the
controllers are built from source with Go the first time); each tool's tests push to a
repository of their own, made by `tfcompile init`, and the jobs run in the namespace the deploy
files name; the launcher policy `init` writes is applied once, as docs/gitops.md says. After the
last test `down` must leave no process, port, mount or file behind.
Needs root (the node runs pods in namespaces of their own), Go, git and redis-server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster.launcher_policy import apply_launcher_policy
from tests.cluster.local_node import NODE_ARGUMENTS, LocalNode
from tests.conftest import REPOSITORY

CONTROL_PLANE = REPOSITORY / "scripts" / "control-plane.sh"
UP_TIMEOUT_SECONDS = 3 * 60 * 60  # the first run builds Kubernetes, Argo CD and Flux


@dataclass(frozen=True)
class GitOps:
    """The running tier: the node (control plane, agent, kubectl) and the git server."""

    node: LocalNode
    git_root: Path  # a bare repository created here as NAME.git is served...
    git_url: str  # ...at GIT_URL/NAME.git


def _exported(lines: list[str], name: str) -> str:
    values = [line.split("=", 1)[1] for line in lines if line.startswith(f"export {name}=")]
    assert values, f"`up` printed no {name}: {lines}"
    return values[-1]


def _ports_of(node: LocalNode) -> list[int]:
    """Every port the tier's processes listen on, from /proc/net/tcp (loopback, LISTEN)."""
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


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="package")
def gitops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitOps]:
    if os.geteuid() != 0:
        pytest.fail("the GitOps tests run pods on the local node, which needs root",
                    pytrace=False)
    run_directory = tmp_path_factory.mktemp("gitops") / "run"
    environment = {**os.environ, "TFCOMPILE_CONTROL_PLANE_DIR": str(run_directory),
                   "TFCOMPILE_NODE_PYTHON": sys.executable,
                   "TFCOMPILE_NODE_ARGUMENTS": NODE_ARGUMENTS,
                   "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    ports: list[int] = []
    try:
        up = subprocess.run(["bash", str(CONTROL_PLANE), "up", "--node", "--gitops", "both"],
                            capture_output=True, text=True, check=False, env=environment,
                            timeout=UP_TIMEOUT_SECONDS)
        if up.returncode != 0:
            pytest.fail(
                f"`scripts/control-plane.sh up --node --gitops both` failed (exit "
                f"{up.returncode}):\n{up.stderr}\nThe GitOps tests build Kubernetes, Argo CD "
                "and Flux from source with Go, and need git and redis-server (Debian/Ubuntu: "
                "apt-get install git redis-server; scripts/setup.sh installs Redis when run "
                "as root).", pytrace=False)
        lines = up.stdout.splitlines()
        node = LocalNode(run_directory, Path(_exported(lines, "KUBECONFIG")))
        apply_launcher_policy(node.kubeconfig, run_directory.parent / "launcher-policy")
        ports = _ports_of(node)
        yield GitOps(node, Path(_exported(lines, "TFCOMPILE_GIT_ROOT")),
                     _exported(lines, "TFCOMPILE_GIT_URL"))
    finally:
        down = subprocess.run(["bash", str(CONTROL_PLANE), "down"], capture_output=True,
                              text=True, check=False, env=environment, timeout=180)
        assert down.returncode == 0, down.stderr
    # `down` leaves nothing behind: no process, no port, no mount, no file. A process it has
    # stopped may still be leaving the process table for a moment.
    deadline = time.monotonic() + 10
    while (leftovers := _processes_naming(run_directory)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers == [], f"processes of the tier outlived `down`: {leftovers}"
    assert ports, "no listening port was found while the tier ran"
    assert [port for port in ports if _listening(port)] == []
    assert str(run_directory) not in Path("/proc/mounts").read_text()
    assert not run_directory.exists(), "`down` left the run directory"


def _processes_naming(run_directory: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(run_directory).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
