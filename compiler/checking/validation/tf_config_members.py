"""What each pod's `TF_CONFIG` says, read as the kubelet expands it: the task and the cluster.

`topology` checks the clusters against the rendered objects; this module only reads them, once
per distinct cluster (the pods of a StatefulSet see the same one, and a job of thousands of
tasks must not cost the square of its size), and words what cannot be read: a value too large
for an environment string, a `$(VAR)` the kubelet left unexpanded, text that is not JSON or not
a cluster and a task.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from tfcompile.compiler.rendering.pods import Container, Pod

from .limits import ENVIRONMENT_STRING_LIMIT, environment_string_size
from .report import ObjectProblem

TF_CONFIG = "TF_CONFIG"


RECOMPILE = "change job.yaml and run `tfcompile build` instead of patching the compiled output"


_LEFTOVER_REFERENCE = re.compile(r"\$\(([^)$]*)\)")


@dataclass(frozen=True)
class Host:
    """One `TF_CONFIG` address, `pod.service[.namespace[.svc[.domain]]]:port`."""

    text: str
    pod_name: str
    service: str
    namespace: str | None
    port: int


@dataclass(frozen=True)
class Member:
    """A pod that has a `TF_CONFIG`, parsed."""

    pod: Pod
    container: Container
    cluster: dict[str, list[str]]
    task_type: str
    task_index: int


class Clusters:
    """The clusters a job's pods see, each distinct one parsed, checked and printed once.

    The pods of a StatefulSet see the same cluster; for a job of thousands of tasks, keeping one
    copy per pod would cost memory and time in the square of the number of tasks.
    """

    _DISTINCT_MAXIMUM = 16  # beyond this many different clusters, compare no more

    def __init__(self) -> None:
        self._distinct: list[dict[str, list[str]]] = []
        self._texts: dict[int, tuple[Mapping[str, list[str]], str]] = {}

    def find(self, cluster: Any) -> dict[str, list[str]] | None:
        """A cluster already checked that equals `cluster`, or None."""
        for known in self._distinct:
            if known == cluster:
                return known
        return None

    def add(self, cluster: dict[str, list[str]]) -> None:
        if len(self._distinct) < self._DISTINCT_MAXIMUM:
            self._distinct.append(cluster)

    def text(self, cluster: Mapping[str, list[str]]) -> str:
        """The cluster as compact JSON with sorted keys, to compare and to print."""
        known = self._texts.get(id(cluster))
        if known is None or known[0] is not cluster:
            known = self._texts[id(cluster)] = (cluster, _canonical(cluster))
        return known[1]


class Problems:
    """Problems in the order found, each reported once."""

    def __init__(self) -> None:
        self.items: list[ObjectProblem] = []
        self._seen: set[object] = set()

    def add(self, object_reference: str, message: str, kind: str | None = None) -> None:
        """Record a problem; with `kind`, only the first of that kind for the object counts."""
        identity: object = ((object_reference, kind) if kind
                            else ObjectProblem(object_reference, message))
        if identity not in self._seen:
            self._seen.add(identity)
            self.items.append(ObjectProblem(object_reference, message))


def parse_host(text: str) -> Host | None:
    """The parts of a `TF_CONFIG` host, or None when it is not a StatefulSet pod's DNS name."""
    address, separator, port_text = text.rpartition(":")
    if not separator or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    labels = address.split(".")
    if len(labels) < 2 or any(not label for label in labels):
        return None
    if len(labels) >= 4 and labels[3] != "svc":
        return None
    namespace = labels[2] if len(labels) >= 3 else None
    return Host(text, labels[0], labels[1], namespace, int(port_text))


def owner_of(pod: Pod) -> str:
    return f"{pod.owner_kind}/{pod.owner_name}"


def job_words(job: str) -> str:
    return f"job {job}" if job else "the job"


def tf_config_container(pod: Pod) -> Container | None:
    candidates = [container for container in pod.containers if TF_CONFIG in container.environment]
    for container in candidates:
        if container.name == "tensorflow":
            return container
    return candidates[0] if candidates else None


def parse_member(
    pod: Pod, container: Container, problems: Problems, clusters: Clusters
) -> Member | None:
    value = container.environment[TF_CONFIG]
    owner = owner_of(pod)
    size = environment_string_size(TF_CONFIG, value)
    if size > ENVIRONMENT_STRING_LIMIT:
        problems.add(
            owner,
            f"{TF_CONFIG} of pod {pod.name} is {size} bytes as an environment string, more than "
            f"the kernel's limit of {ENVIRONMENT_STRING_LIMIT} (MAX_ARG_STRLEN): the container "
            "cannot start; use fewer tasks or shorter job and role names",
            kind="size",
        )
    leftovers = sorted(set(_LEFTOVER_REFERENCE.findall(value)))
    if leftovers:
        names = ", ".join(leftovers)
        problems.add(
            owner,
            f"{TF_CONFIG} of pod {pod.name} still contains $({leftovers[0]}) after the kubelet's "
            f"expansion: {names} must be defined in env before {TF_CONFIG} (and resolve); "
            "a patch that reorders or removes env entries breaks this",
            kind="expansion",
        )
        return None
    try:
        document = json.loads(value)
    except json.JSONDecodeError as failure:
        problems.add(
            owner,
            f"{TF_CONFIG} of pod {pod.name} is not valid JSON after expansion ({failure.msg} at "
            f"character {failure.pos}); " + RECOMPILE,
            kind="json",
        )
        return None
    cluster = document.get("cluster") if isinstance(document, dict) else None
    task = document.get("task") if isinstance(document, dict) else None
    known = clusters.find(cluster)
    if known is not None:
        cluster = known
    elif _is_cluster(cluster):
        clusters.add(cast(dict[str, list[str]], cluster))
    if (known is None and not _is_cluster(cluster)) or not isinstance(task, dict):
        problems.add(
            owner,
            f'{TF_CONFIG} of pod {pod.name} needs a "cluster" mapping each role to a list of '
            'host:port strings and a "task" with "type" and "index"; ' + RECOMPILE,
            kind="structure",
        )
        return None
    task_type, task_index = task.get("type"), task.get("index")
    if not isinstance(task_type, str) or not isinstance(task_index, int):
        problems.add(
            owner,
            f'{TF_CONFIG} of pod {pod.name} has task {json.dumps(task)}: "type" must be a role '
            'name and "index" a number; ' + RECOMPILE,
            kind="structure",
        )
        return None
    return Member(pod, container, cast(dict[str, list[str]], cluster), task_type, task_index)


def _is_cluster(cluster: Any) -> bool:
    return isinstance(cluster, dict) and all(
        isinstance(hosts, list) and all(isinstance(host, str) for host in hosts)
        for hosts in cluster.values()
    )


def _canonical(cluster: Mapping[str, list[str]]) -> str:
    return json.dumps(cluster, sort_keys=True, separators=(",", ":"))


def agreed_cluster(
    job: str, members: list[Member], problems: Problems, clusters: Clusters
) -> dict[str, list[str]]:
    """The cluster most pods see; every StatefulSet whose pods see another one is a problem."""
    texts = [clusters.text(member.cluster) for member in members]
    counts = Counter(texts)
    first_positions: dict[str, int] = {}
    for position, text in enumerate(texts):
        first_positions.setdefault(text, position)
    agreed_text = max(counts, key=lambda text: (counts[text], -first_positions[text]))
    agreed = json.loads(agreed_text)
    for member, text in zip(members, texts, strict=True):
        if text != agreed_text:
            problems.add(
                owner_of(member.pod),
                f"pod {member.pod.name} sees the cluster {text} but other "
                f"pods of {job_words(job)} see {agreed_text}; every pod must see the same "
                "cluster: " + RECOMPILE,
            )
    return dict(agreed)
