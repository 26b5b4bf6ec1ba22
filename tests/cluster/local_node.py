"""The real node for the cluster and GitOps tests: `scripts/control-plane.sh up --node`, and jobs
on it.

A `LocalNode` is a real control plane with a real node (a kubelet, containerd and runc, CNI,
kube-proxy, CoreDNS; scripts/node.sh), in a run directory of its own; the pods run in their images.
The helpers compile a copy of an example job with the `tfcompile` command (under a name unique to
the test) and apply it with `kubectl apply --server-side -k`, as a GitOps tool would.

What the pods print is read from the kubelet's container logs (its `podLogsDir`, in the CRI
log format) by a follower that keeps every line it has seen, so a pod's lines outlive the pod,
as a log collector's do in a cluster.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster.launcher_policy import apply_launcher_policy
from tests.cluster.waiting import wait_for
from tests.conftest import EXAMPLES, OVERLAYS, REPOSITORY

CONTROL_PLANE = REPOSITORY / "scripts" / "control-plane.sh"
UP_TIMEOUT_SECONDS = 3 * 60 * 60  # the first run builds Kubernetes from source
NODE_NAME = "tfcompile-node"
BRIDGE = "tfcompile0"
# A line of a CRI container log: time, stream, F(ull) or P(artial), text.
_CRI_LINE = re.compile(r"^(\S+) (stdout|stderr) ([FP]) (.*)$")


@dataclass
class _PodLogs:
    """Follows the kubelet's container log files and keeps each line: (time, namespace, pod,
    text), in the order each file holds them."""

    directory: Path
    lines: list[tuple[str, str, str, str]] = field(default_factory=list)
    _offsets: dict[Path, int] = field(default_factory=dict)
    _partial: dict[Path, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)

    def follow(self) -> None:
        while not self._stop.wait(0.25):
            self.read()

    def stop(self) -> None:
        self._stop.set()

    def read(self) -> None:
        with self._lock:
            for path in self._files():
                self._read_file(path)

    def _files(self) -> list[Path]:
        """The log files there now; a pod's directory the kubelet removes while it is listed
        is skipped (its lines read so far are kept)."""
        found: list[Path] = []
        for directory in _listing(self.directory):
            for container in _listing(directory):
                found.extend(path for path in _listing(container) if ".log" in path.name)
        return sorted(found)

    def _read_file(self, path: Path) -> None:
        # Directories are NAMESPACE_POD_UID; files CONTAINER/RESTARTS.log.
        namespace, pod = path.parent.parent.name.split("_")[:2]
        try:
            with path.open("rb") as stream:
                stream.seek(self._offsets.get(path, 0))
                data = stream.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        self._offsets[path] = self._offsets.get(path, 0) + end
        for raw in data[:end].decode(errors="replace").splitlines():
            match = _CRI_LINE.match(raw)
            if not match:
                continue
            moment, _, tag, text = match.groups()
            text = self._partial.pop(path, "") + text
            if tag == "P":
                self._partial[path] = text
                continue
            self.lines.append((moment, namespace, pod, text))

    def of_pod(self, namespace: str, pod: str) -> list[str]:
        self.read()
        return [text for _, where, name, text in self.lines if (where, name) == (namespace, pod)]

    def timeline(self) -> list[tuple[str, str, str, str]]:
        self.read()
        return sorted(self.lines)


def _listing(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except OSError:  # gone, or not a directory
        return []


@dataclass(frozen=True)
class LocalNode:
    """A running control plane with the real node."""

    run_directory: Path
    kubeconfig: Path
    logs: _PodLogs

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
        """Where the local volume bound to a claim keeps its files on this machine."""
        volume = wait_for(f"claim {namespace}/{claim} to be bound", lambda: self.get(
            "pvc", claim, "-n", namespace)["spec"].get("volumeName"), 120)
        return Path(self.get("pv", volume)["spec"]["local"]["path"])

    def log(self) -> str:
        """Every pod's lines in time order, each as `NAMESPACE/POD | text`, then the end of
        the kubelet's log: what a failing wait shows."""
        kubelet = (self.run_directory / "logs" / "kubelet.log").read_text(errors="replace")
        return "\n".join([f"{namespace}/{pod} | {text}" for _, namespace, pod, text
                          in self.logs.timeline()] + ["--- kubelet:"]
                         + kubelet.splitlines()[-15:])

    def _ctr(self, *arguments: str) -> str:
        return subprocess.run(
            ["ctr", "-a", str(self.run_directory / "containerd" / "containerd.sock"), "-n",
             "k8s.io", *arguments], capture_output=True, text=True, check=True,
            timeout=60).stdout

    def running_containers(self, namespace: str) -> list[str]:
        """The container runtime's running tasks (sandboxes included) of a namespace's pods.
        The kubelet keeps a stopped pod sandbox a while before it removes it; a stopped one
        runs nothing."""
        ours = set(self._ctr("containers", "list", "--quiet",
                             f'labels."io.kubernetes.pod.namespace"=={namespace}').split())
        running = []
        for line in self._ctr("tasks", "list").splitlines()[1:]:
            fields = line.split()
            if fields and fields[0] in ours and fields[-1] == "RUNNING":
                running.append(fields[0])
        return running

    def pod_lines(self, namespace: str, pod: str) -> list[str]:
        """What the pod of that name printed, every incarnation and restart, in order."""
        return self.logs.of_pod(namespace, pod)


def _processes() -> Iterator[tuple[int, bytes]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                yield int(entry.name), (entry / "cmdline").read_bytes()
            except OSError:
                continue


def processes_of_pod(pod: str) -> list[int]:
    """PIDs of the pod's processes, found by HOSTNAME (the runtime sets it to the pod's host
    name, as `kubectl exec` would see it) among the kubelet's pods (their cgroups lie under
    `kubepods`): a pod of the same name that run-local's tests run with podman beside these
    tests is not the node's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
            groups = (entry / "cgroup").read_bytes()
        except OSError:
            continue
        if f"HOSTNAME={pod}".encode() in environment and b"/kubepods" in groups:
            found.append(int(entry.name))
    return found


def _iptables_chains() -> set[str]:
    chains: set[str] = set()
    for table in ("nat", "filter", "mangle"):
        listed = subprocess.run(["iptables", "-t", table, "-S"], capture_output=True, text=True,
                                check=False)
        chains.update(f"{table} {line}" for line in listed.stdout.splitlines()
                      if "KUBE-" in line or "CNI-" in line)
    return chains


def _kubepods_cgroups() -> list[str]:
    return [str(path) for path in Path("/sys/fs/cgroup").glob("*/kubepods")]


# Where the kubelet and containerd write outside the run directory whatever they are told (the
# device-plugin socket, the CNI result cache, the shims' sockets).
OUTSIDE_PATHS = (Path("/var/lib/kubelet"), Path("/var/lib/cni"), Path("/run/containerd"))


def node_leftovers(run_directory: Path, outside_before: set[Path] | None = None) -> list[str]:
    """What a node left on this machine: processes naming its run directory, pods' processes,
    mounts under it, its bridge, kube-proxy's and CNI's iptables rules, the pods' cgroups, the
    run directory itself, and the outside paths that were not there before it started."""
    names = {str(run_directory), str(run_directory.resolve())}
    found = [f"process {pid}" for pid, command in _processes()
             if any(name.encode() in command for name in names)]
    found += [f"mount {line.split()[4]}" for line in
              Path("/proc/self/mountinfo").read_text().splitlines()
              if any(line.split()[4].startswith(name) for name in names)]
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True,
                      check=False).returncode == 0:
        found.append(f"network device {BRIDGE}")
    found += sorted(_iptables_chains())
    found += [f"cgroup {path}" for path in _kubepods_cgroups()]
    if run_directory.exists():
        found.append(f"directory {run_directory}")
    if outside_before is not None:
        found += [f"path {path}" for path in OUTSIDE_PATHS
                  if path.exists() and path not in outside_before]
    return found


def up_environment(run_directory: Path) -> dict[str, str]:
    return {**os.environ, "TFCOMPILE_CONTROL_PLANE_DIR": str(run_directory),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}


@contextmanager
def start_local_node(run_directory: Path,
                     *options: str) -> Iterator[tuple[LocalNode, list[str]]]:
    """`up --node [options]` and apply the launcher policy (as a user does once per cluster),
    yield the node and what `up` printed, then `down`; afterwards nothing of the node may be
    left on this machine."""
    environment = up_environment(run_directory)
    outside_before = {path for path in OUTSIDE_PATHS if path.exists()}
    follower: threading.Thread | None = None
    logs = _PodLogs(run_directory / "pod-logs")
    try:
        up = subprocess.run(["bash", str(CONTROL_PLANE), "up", "--node", *options],
                            capture_output=True, text=True, check=False, env=environment,
                            timeout=UP_TIMEOUT_SECONDS)
        assert up.returncode == 0, (
            f"`scripts/control-plane.sh up --node {' '.join(options)}` failed (exit "
            f"{up.returncode}):\n{up.stderr}\nThe node's tests build Kubernetes and CoreDNS "
            "from source with Go and its images with debootstrap and pip, and need root and "
            "Debian's containerd, runc, containernetworking-plugins, iptables and conntrack "
            "(scripts/setup.sh installs them when run as root; see docs/development.md).")
        exports = [line for line in up.stdout.splitlines() if line.startswith("export KUBECONFIG=")]
        kubeconfig = Path(exports[-1].removeprefix("export KUBECONFIG="))
        apply_launcher_policy(kubeconfig, run_directory.parent / "launcher-policy")
        follower = threading.Thread(target=logs.follow, daemon=True)
        follower.start()
        yield LocalNode(run_directory, kubeconfig, logs), up.stdout.splitlines()
    finally:
        logs.stop()
        if follower:
            follower.join()
        down = subprocess.run(["bash", str(CONTROL_PLANE), "down"], capture_output=True,
                              text=True, check=False, env=environment, timeout=180)
        assert down.returncode == 0, down.stderr
    # A process `down` stopped may still be leaving the process table for a moment.
    deadline = time.monotonic() + 10
    while ((leftovers := node_leftovers(run_directory, outside_before))
           and time.monotonic() < deadline):
        time.sleep(0.2)
    assert leftovers == [], f"`down` left these behind: {leftovers}"


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
    (source / "job.yaml").write_text(small_requests(text))
    return Job(name, source, tmp_path / "output")


def small_requests(text: str) -> str:
    """A job's CPU requests cut to a quarter core each: the test node has two cores, and the
    scheduler places a pod only where its requests fit (a roll to three workers of one core
    each would leave one Pending)."""
    return re.sub(r'cpu: "\d+"', "cpu: 250m", text)


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
