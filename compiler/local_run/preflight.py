"""Every reason a local run cannot start, found before anything is created.

A refused run reports all its problems at once, each saying what to do: run as root, install
podman, supply a missing Secret value, fix a volume. Nothing on the host changes before these
checks pass.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

from tfcompile.compiler.rendering.pods import Container, EnvironmentReference, Pod

from . import addressing, volumes
from .container_runtime import INSTALL_HINT, find_podman
from .options import LocalRunOptions

RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SECRETS_FILE_HINT = "the secrets file (--secrets FILE)"


def podman_problems() -> list[str]:
    """What to install when podman is missing."""
    if find_podman() is None:
        return [f"run-local runs each pod in its image with podman, which is not installed: "
                f"{INSTALL_HINT}"]
    return []


def _machine_problems() -> list[str]:
    if not sys.platform.startswith("linux"):
        return ["run-local needs Linux (podman's containers)"]
    if os.geteuid() != 0:
        return ["run-local needs root: it runs podman as root, which gives each pod its "
                "address on a network of the run's own and a claim's files to the pod's fsGroup; "
                "run it as root (for example with sudo)"]
    return []


def _reference_problem(reference: EnvironmentReference, users: list[str]) -> str:
    where = ", ".join(users)
    if reference.kind == "Secret":
        if reference.key is None:
            return (f"Secret {reference.name} (all keys, by envFrom) is needed by {where} and is "
                    f"not supplied: add one `{reference.name}/KEY=VALUE` line per key to "
                    f"{SECRETS_FILE_HINT}")
        return (f"Secret {reference.name} key {reference.key} is needed by {where} and is not "
                f"supplied: add a line `{reference.name}/{reference.key}=VALUE` to "
                f"{SECRETS_FILE_HINT}")
    what = f"{reference.kind} {reference.name}"
    if reference.key is not None:
        what += f" key {reference.key}"
    return (f"{what} is needed by {where} and is not among the rendered manifests: add it to the "
            "job's manifests, or mark the reference optional")


def unresolved_reference_problems(pods: Sequence[Pod]) -> list[str]:
    """One problem per missing, non-optional Secret or ConfigMap reference, naming its users."""
    users: dict[tuple[str, str, str | None], list[str]] = {}
    references: dict[tuple[str, str, str | None], EnvironmentReference] = {}
    for pod in pods:
        for container in [*pod.init_containers, *pod.containers]:
            for reference in container.unresolved:
                if reference.optional:
                    continue
                identity = (reference.kind, reference.name, reference.key)
                references.setdefault(identity, reference)
                user = f"{pod.name}/{container.name}"
                if user not in users.setdefault(identity, []):
                    users[identity].append(user)
    return [_reference_problem(references[identity], users[identity]) for identity in references]


def _container_problems(pod: Pod, container: Container) -> list[str]:
    problems: list[str] = []
    where = f"pod {pod.name}, container {container.name}"
    if not _DNS_LABEL.fullmatch(container.name):
        problems.append(f"{where}: the container name is not a DNS label")
    if not container.image:
        problems.append(f"{where}: has no image")
    for name in container.environment:
        if not name or "=" in name:
            problems.append(f"{where}: environment variable name {name!r} is not allowed (the "
                            "API server refuses an empty name or one with '=')")
    if container.working_dir is not None and not container.working_dir.startswith("/"):
        problems.append(f"{where}: workingDir must be an absolute path")
    return problems


def _pod_problems(pod: Pod, options: LocalRunOptions) -> list[str]:
    problems: list[str] = []
    if not _DNS_SUBDOMAIN.fullmatch(pod.name) or len(pod.name) > 253:
        problems.append(f"pod {pod.name!r}: the name is not a DNS subdomain")
    hostname = addressing.pod_hostname(pod)
    if not _DNS_LABEL.fullmatch(hostname) or len(hostname) > 63:
        problems.append(f"pod {pod.name}: hostname {hostname!r} is not a DNS label")
    if pod.restart_policy not in RESTART_POLICIES:
        problems.append(f"pod {pod.name}: restartPolicy {pod.restart_policy!r} is not one of "
                        f"{', '.join(RESTART_POLICIES)}")
    if not pod.containers:
        problems.append(f"pod {pod.name}: has no containers")
    names = [container.name for container in [*pod.init_containers, *pod.containers]]
    for name in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"pod {pod.name}: more than one container is named {name}")
    volume_names = [volume.name for volume in pod.volumes]
    for name in sorted({name for name in volume_names if volume_names.count(name) > 1}):
        problems.append(f"pod {pod.name}: more than one volume is named {name}")
    for name in volume_names:
        if not _DNS_LABEL.fullmatch(name):
            problems.append(f"pod {pod.name}: volume name {name!r} is not a DNS label")
    for container in [*pod.init_containers, *pod.containers]:
        problems += _container_problems(pod, container)
    problems += volumes.volume_problems(pod, options.config_maps, options.secrets)
    problems += volumes.claim_directory_problems(pod, options.claims_directory)
    return problems


def _success_problems(pods: Sequence[Pod], options: LocalRunOptions) -> list[str]:
    by_name = {pod.name: pod for pod in pods}
    problems: list[str] = []
    for name in options.success_pods:
        pod = by_name.get(name)
        if pod is None:
            problems.append(f"pod {name}, whose success should end the run, is not among the pods")
            continue
        kinds = {volume.name: volume.kind for volume in pod.volumes}
        if kinds.get(options.success_marker_volume) != volumes.EMPTY_DIRECTORY:
            problems.append(f"pod {name}: its success cannot be seen: it has no emptyDir volume "
                            f"named {options.success_marker_volume} for the success marker")
    return problems


def find_problems(pods: Sequence[Pod], options: LocalRunOptions) -> list[str]:
    """Everything that keeps these pods from running locally; empty when the run may start."""
    problems = _machine_problems()
    problems += podman_problems()
    if not pods:
        problems.append("there are no pods to run (is every role scaled to 0, or suspended?)")
    for name, directory in (("--claims-directory", options.claims_directory),
                            ("the temporary directory", options.temporary_directory)):
        if directory is not None and "," in str(directory):
            problems.append(f"{name} {directory}: a path with a comma cannot be mounted "
                            "(podman's --mount separates its options with commas)")
    names = [pod.name for pod in pods]
    for name in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"more than one pod is named {name}")
    for pod in pods:
        problems += _pod_problems(pod, options)
    problems += unresolved_reference_problems(pods)
    problems += _success_problems(pods, options)
    return problems
