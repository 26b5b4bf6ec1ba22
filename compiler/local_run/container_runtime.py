"""The container runtime a local run drives: podman, as this machine has it configured.

run-local runs every pod in the image it names, with a real runtime rather than a model of one:
a network of the run's own (`--internal`: no route beyond it, no DNS server), one podman pod per
Kubernetes pod (its address on that network, its hostname, and an /etc/hosts answering every
pod's cluster DNS names, shared by its containers as a Kubernetes pod shares its network and
UTS namespaces), and one `podman run` per container start, removed when it exits (a restarted
container starts from its image again, as the kubelet makes a new container).

Everything the run creates carries the label `RUN_LABEL=<run identifier>`, so that it can all be
removed together (`remove_run`): at the end of the run, by the guard when the runner is killed
(`guard`), or by the next run. podman reads its own configuration (`containers.conf`,
`storage.conf`, and the environment variables naming them): the run uses the machine's images,
storage and runtime as `podman run` would.

This module only builds argument lists and runs podman's short commands; the runner starts the
long-running `podman run` processes itself.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RUN_LABEL = "io.tfcompile.run-local"
NAME_PREFIX = "tfcompile-"
INSTALL_HINT = "install podman (Debian/Ubuntu: apt-get install podman; Fedora: dnf install podman)"
SHORT_COMMAND_SECONDS = 120.0
REGISTRY_DEFAULT = "docker.io"
OFFICIAL_REPOSITORY = "library"


class PodmanError(Exception):
    """podman refused a command; the message holds what it said."""


def find_podman() -> str | None:
    """Where podman is, or None."""
    return shutil.which("podman")


def qualified_image(image: str) -> str:
    """The image reference as the kubelet's runtime reads it: a name without a registry is
    Docker Hub's (`tensorflow/tensorflow:2.15.0` → `docker.io/tensorflow/tensorflow:2.15.0`),
    an official image's name gains `library/`, and no tag means `latest`. podman would
    otherwise look a short name up in the registries its configuration lists."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        qualified = image
    elif rest:
        qualified = f"{REGISTRY_DEFAULT}/{image}"
    else:
        qualified = f"{REGISTRY_DEFAULT}/{OFFICIAL_REPOSITORY}/{image}"
    last = qualified.rsplit("/", 1)[1]
    if ":" not in last and "@" not in last:
        qualified += ":latest"
    return qualified


def pull_option(pull_policy: str | None, image: str) -> str:
    """podman's `--pull` for a container's imagePullPolicy, defaulted as the API server
    defaults it (Always for `latest` or no tag, IfNotPresent otherwise)."""
    if pull_policy is None:
        last = image.rsplit("/", 1)[-1]
        untagged = ":" not in last and "@" not in last
        pull_policy = "Always" if untagged or last.endswith(":latest") else "IfNotPresent"
    return {"Always": "always", "Never": "never"}.get(pull_policy, "missing")


@dataclass(frozen=True)
class Podman:
    """podman at `program`, for the run `run_identifier`."""

    program: str
    run_identifier: str

    @property
    def network_name(self) -> str:
        return f"{NAME_PREFIX}{self.run_identifier}"

    def pod_name(self, pod: str) -> str:
        return f"{NAME_PREFIX}{self.run_identifier}-{pod}"

    def _label(self) -> list[str]:
        return ["--label", f"{RUN_LABEL}={self.run_identifier}"]

    def _short(self, *arguments: str) -> str:
        try:
            done = _podman(self.program, *arguments)
        except subprocess.TimeoutExpired as error:
            raise PodmanError(f"`podman {arguments[0]}` did not finish in "
                                f"{SHORT_COMMAND_SECONDS:g} s") from error
        except OSError as error:
            raise PodmanError(f"cannot run podman: {error.strerror}") from error
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise PodmanError(f"`podman {' '.join(arguments[:2])}` failed: "
                                + (said[-1] if said else f"exit status {done.returncode}"))
        return done.stdout

    def check(self) -> None:
        """podman answers (its configuration and storage are usable), or PodmanError."""
        self._short("info", "--format", "{{.Host.OCIRuntime.Name}}")

    def create_network(self) -> ipaddress.IPv4Network:
        """The run's network: internal (no route beyond it) and without a DNS server (the pods'
        hosts files answer their names); returns the subnet podman chose for it."""
        self._short("network", "create", "--internal", "--disable-dns", *self._label(),
                    self.network_name)
        shown = json.loads(self._short("network", "inspect", self.network_name))
        for subnet in shown[0].get("subnets") or []:
            network = ipaddress.ip_network(subnet["subnet"])
            if isinstance(network, ipaddress.IPv4Network):
                return network
        raise PodmanError(f"podman gave network {self.network_name} no IPv4 subnet")

    def create_pod(self, pod: str, address: ipaddress.IPv4Address, hostname: str,
                   hosts: Sequence[tuple[str, ipaddress.IPv4Address]]) -> None:
        """One podman pod: its address, hostname and the names its hosts file answers."""
        host_options = [option for name, where in hosts
                        for option in ("--add-host", f"{name}:{where}")]
        self._short("pod", "create", "--name", self.pod_name(pod), *self._label(),
                    "--network", self.network_name, "--ip", str(address),
                    "--hostname", hostname, *host_options)

    def run_command(self, container: ContainerStart) -> tuple[list[str], dict[str, str]]:
        """The `podman run` command of one container start, and its environment: the
        container's variables pass through podman's own environment (`--env NAME`), never on
        its command line, where every user of the machine could read a Secret's value."""
        options = [
            "run", "--rm", "--name", container.name, *self._label(),
            "--pod", self.pod_name(container.pod), "--pull", container.pull,
            "--stop-timeout", str(container.grace_seconds),
        ]
        if container.user is not None:
            options += ["--user", str(container.user) if container.group is None
                        else f"{container.user}:{container.group}"]
        for group in container.supplementary_groups:
            options += ["--group-add", str(group)]
        for capability in container.dropped_capabilities:
            options += ["--cap-drop", capability]
        for capability in container.added_capabilities:
            options += ["--cap-add", capability]
        if container.no_new_privileges:
            options += ["--security-opt", "no-new-privileges"]
        if container.read_only_root:
            options.append("--read-only")
        options += container.limits
        if container.working_directory:
            options += ["--workdir", container.working_directory]
        for source, target, read_only in container.mounts:
            options += ["--mount", f"type=bind,source={source},destination={target}"
                        + (",ro=true" if read_only else "")]
        environment = dict(os.environ)
        for name, value in container.environment.items():
            options += ["--env", name]
            environment[name] = value
        if container.command:
            options += ["--entrypoint", json.dumps(list(container.command))]
        return [self.program, *options, container.image, *container.arguments], environment

    def remove_run(self) -> list[str]:
        """Remove every container, pod and the network of the run; what could not be removed."""
        return remove_labelled(self.program, self.run_identifier)


@dataclass(frozen=True)
class ContainerStart:
    """Everything `podman run` needs for one start of one container of one pod."""

    name: str
    pod: str
    image: str
    pull: str
    command: Sequence[str]
    arguments: Sequence[str]
    environment: Mapping[str, str]
    working_directory: str | None
    user: int | None
    group: int | None
    """None: the image's user (its USER, or root), and that user's group."""
    supplementary_groups: Sequence[int]
    no_new_privileges: bool
    read_only_root: bool
    dropped_capabilities: Sequence[str]
    added_capabilities: Sequence[str]
    mounts: Sequence[tuple[str, str, bool]]
    grace_seconds: int
    limits: Sequence[str] = ()
    """podman's options for the CPU and memory limits."""


def _podman(program: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([program, *arguments], capture_output=True, text=True,
                          errors="replace", timeout=SHORT_COMMAND_SECONDS, check=False,
                          stdin=subprocess.DEVNULL)


def remove_labelled(program: str, run_identifier: str) -> list[str]:
    """Remove the pods (with their containers, stopped at once) and the network labelled with
    the run; podman's complaints, if any are left."""
    label = f"label={RUN_LABEL}={run_identifier}"
    complaints: list[str] = []
    try:
        listed = _podman(program, "pod", "ps", "--quiet", "--filter", label)
        pods = listed.stdout.split()
        steps = [["network", "prune", "--force", "--filter", label]]
        if pods:
            steps.insert(0, ["pod", "rm", "--force", "--time", "0", *pods])
        for step in steps:
            done = _podman(program, *step)
            if done.returncode != 0 and done.stderr.strip():
                complaints.append(done.stderr.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired) as error:
        complaints.append(f"podman: {error}")
    return complaints
