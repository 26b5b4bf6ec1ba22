"""The local node for the cluster tests: `scripts/control-plane.sh up --node`, and jobs on it.

A `LocalNode` is a real control plane plus the node agent, in a run directory of its own; the
helpers compile a copy of an example job with the `tfcompile` command (under a name unique to
the test, so that its pods' processes can be told apart by `HOSTNAME`) and apply it with
`kubectl apply --server-side -k`, as a GitOps tool would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.launcher_policy import apply_launcher_policy
from tests.cluster.waiting import wait_for
from tests.conftest import EXAMPLES, OVERLAYS, REPOSITORY

CONTROL_PLANE = REPOSITORY / "scripts" / "control-plane.sh"
UP_TIMEOUT_SECONDS = 3 * 60 * 60  # the first run builds Kubernetes from source
# Restarts after 2 s instead of the kubelet's 10 s: the cases resume sooner on a slow machine.
NODE_ARGUMENTS = "--backoff-seconds 2"


@dataclass(frozen=True)
class LocalNode:
    """A running control plane with the local node."""

    run_directory: Path
    kubeconfig: Path

    def kubectl(self, *arguments: str, check: bool = True) -> str:
        completed = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *arguments], capture_output=True,
            text=True, check=False, timeout=120)
        if check and completed.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(arguments)} failed:\n"
                                 f"{completed.stderr}{completed.stdout}")
        return completed.stdout

    def get(self, *arguments: str) -> Any:
        return json.loads(self.kubectl("get", *arguments, "--output=json"))

    def claim_directory(self, namespace: str, claim: str) -> Path:
        return self.run_directory / "node" / "claims" / namespace / claim

    def log(self) -> str:
        return (self.run_directory / "logs" / "node-agent.log").read_text(errors="replace")

    def pod_lines(self, namespace: str, pod: str) -> list[str]:
        prefix = f"{namespace}/{pod} | "
        return [line[len(prefix):] for line in self.log().splitlines()
                if line.startswith(prefix)]

    def container_helpers(self) -> list[int]:
        """Processes of the node's containers (each container's helper names its start file)."""
        marker = str(self.run_directory / "node" / "pods").encode()
        return [pid for pid, command in _processes() if marker in command
                and b"container_entry" in command]


def _processes() -> Iterator[tuple[int, bytes]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "cmdline").read_bytes()
            except OSError:
                continue


def processes_of_pod(pod: str) -> list[int]:
    """PIDs of the pod's processes, found by HOSTNAME (as `kubectl exec` would reach them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"HOSTNAME={pod}".encode() in environment:
            found.append(int(entry.name))
    return found


def start_local_node(run_directory: Path) -> Iterator[LocalNode]:
    """`up --node` and apply the launcher policy (as a user does once per cluster), yield, then
    `down`; afterwards nothing of the node may be left running."""
    environment = {**os.environ, "TFCOMPILE_CONTROL_PLANE_DIR": str(run_directory),
                   "TFCOMPILE_NODE_PYTHON": sys.executable,
                   "TFCOMPILE_NODE_ARGUMENTS": NODE_ARGUMENTS}
    try:
        up = subprocess.run(["bash", str(CONTROL_PLANE), "up", "--node"], capture_output=True,
                            text=True, check=False, env=environment, timeout=UP_TIMEOUT_SECONDS)
        assert up.returncode == 0, (
            f"`scripts/control-plane.sh up --node` failed (exit {up.returncode}):\n{up.stderr}\n"
            "The cluster tests build Kubernetes from source with Go, or take prebuilt binaries "
            "from TFCOMPILE_CONTROL_PLANE_BINARIES (see README.md, \"A local node\").")
        exports = [line for line in up.stdout.splitlines() if line.startswith("export KUBECONFIG=")]
        kubeconfig = Path(exports[-1].removeprefix("export KUBECONFIG="))
        apply_launcher_policy(kubeconfig, run_directory.parent / "repository")
        yield LocalNode(run_directory, kubeconfig)
    finally:
        down = subprocess.run(["bash", str(CONTROL_PLANE), "down"], capture_output=True,
                              text=True, check=False, env=environment, timeout=120)
        assert down.returncode == 0, down.stderr
    leftovers = [pid for pid, command in _processes() if str(run_directory).encode() in command]
    assert leftovers == [], f"processes of the node outlived `down`: {leftovers}"
    assert not run_directory.exists(), "`down` left the run directory"


@dataclass(frozen=True)
class Job:
    """A copy of an example job, compiled under a name of its own."""

    name: str
    source: Path  # the job's directory (job.yaml, the script)
    output: Path  # where `tfcompile build` writes

    @property
    def compiled(self) -> Path:
        return self.output / self.name

    def pod(self, role: str, index: int) -> str:
        return f"{self.name}-{role}-{index}"


def copy_example(tmp_path: Path, example: str, replacements: dict[str, str]) -> Job:
    """Copy `examples/<example>` under a unique job name, with text replacements in job.yaml."""
    name = f"{example}-{uuid.uuid4().hex[:6]}"
    source = tmp_path / "job"
    shutil.copytree(EXAMPLES / example, source)
    text = (source / "job.yaml").read_text().replace(f"name: {example}\n", f"name: {name}\n", 1)
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    (source / "job.yaml").write_text(text)
    return Job(name, source, tmp_path / "output")


def build(job: Job, replacements: dict[str, str] | None = None) -> None:
    """Edit job.yaml (as a commit would) and run `tfcompile build`."""
    path = job.source / "job.yaml"
    text = path.read_text()
    for old, new in (replacements or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    completed = subprocess.run(
        [sys.executable, "-m", "tfcompile.compiler.cli", "build", str(path), "-o",
         str(job.output), "--overlays", str(OVERLAYS)],
        capture_output=True, text=True, check=False, timeout=120)
    assert completed.returncode == 0, completed.stderr


def fresh_namespace(node: LocalNode) -> str:
    name = f"test-{uuid.uuid4().hex[:8]}"
    node.kubectl("create", "namespace", name)
    # Pods are created only once the namespace's default ServiceAccount exists.
    wait_for("the default ServiceAccount", lambda: "default" in node.kubectl(
        "get", "serviceaccounts", "-n", name, "-o", "name", check=False), 60)
    return name


def job_pod_names(job: Job) -> list[str]:
    """Names the job's pods may have (every role, up to four tasks each)."""
    return [job.pod(role, index) for role in ("chief", "worker", "ps", "evaluator")
            for index in range(4)]


def remove_namespace(node: LocalNode, namespace: str, *jobs: Job) -> None:
    """Delete the namespace and wait until its pods' processes are gone."""
    node.kubectl("delete", "namespace", namespace, "--wait=false")
    wait_for("the namespace's pods to stop", lambda: not any(
        processes_of_pod(name) for job in jobs for name in job_pod_names(job)), 180)


def applied_revision(node: LocalNode, namespace: str, stateful_set: str) -> str | None:
    """The revision of a StatefulSet's pod template in the cluster; None while it is absent."""
    items = node.get("statefulsets", "-n", namespace, "--field-selector",
                     f"metadata.name={stateful_set}")["items"]
    return str(items[0]["spec"]["template"]["metadata"]["annotations"][
        "tfcompile.dev/revision"]) if items else None
