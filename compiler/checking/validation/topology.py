"""Check that the TensorFlow cluster described in each pod's `TF_CONFIG` exists in the cluster.

`TF_CONFIG` is fixed text written at compile time, while names, replica counts, Services and
ports can all be changed afterwards by a Kustomize overlay. Every such change silently breaks
training: a host that no pod answers to, a Service without per-pod DNS records, a port nobody
exposes. This module checks every host of the clusters the pods see (read by
`tf_config_members`, from each pod's environment as the kubelet expands it) against the
rendered objects: pods, governing Services, ports, replica counts and task indexes.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tfcompile.compiler.objects.labels import JOB_LABEL, ROLE_LABEL
from tfcompile.compiler.rendering.manifests import KubernetesObject, find_object
from tfcompile.compiler.rendering.pods import Pod
from tfcompile.compiler.rendering.stateful_set_pods import ordinal_start_of, replicas_of

from .report import ObjectProblem
from .tf_config_members import (
    RECOMPILE,
    TF_CONFIG,
    Clusters,
    Host,
    Member,
    Problems,
    agreed_cluster,
    job_words,
    owner_of,
    parse_host,
    parse_member,
    tf_config_container,
)


def topology_problems(
    objects: Sequence[KubernetesObject], pods: Sequence[Pod]
) -> tuple[list[ObjectProblem], list[str]]:
    """Problems with the TensorFlow clusters of the rendered jobs, and notes."""
    problems = Problems()
    notes: list[str] = []
    for job, job_pods in _pods_by_job(pods).items():
        _check_job(job, job_pods, objects, pods, problems, notes)
    return problems.items, notes


def _pods_by_job(pods: Iterable[Pod]) -> dict[str, list[Pod]]:
    """StatefulSet pods by job; pods with neither a job label nor TF_CONFIG are not ours."""
    jobs: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.owner_kind != "StatefulSet":
            continue
        if JOB_LABEL in pod.labels or tf_config_container(pod) is not None:
            jobs.setdefault(pod.labels.get(JOB_LABEL, ""), []).append(pod)
    return jobs


def _check_job(
    job: str,
    job_pods: list[Pod],
    objects: Sequence[KubernetesObject],
    all_pods: Sequence[Pod],
    problems: Problems,
    notes: list[str],
) -> None:
    members: list[Member] = []
    without: list[Pod] = []
    clusters = Clusters()
    for pod in job_pods:
        container = tf_config_container(pod)
        if container is None:
            without.append(pod)
            continue
        member = parse_member(pod, container, problems, clusters)
        if member is not None:
            members.append(member)
    with_tf_config = len(job_pods) - len(without)
    if with_tf_config == 0:
        if len(job_pods) > 1:
            for owner in sorted({owner_of(pod) for pod in job_pods}):
                problems.add(
                    owner,
                    f"{job_words(job)} renders {len(job_pods)} pods but none has {TF_CONFIG}: "
                    "it was compiled as a single-pod job, so each pod would train alone; "
                    + RECOMPILE,
                )
        return
    for owner in sorted({owner_of(pod) for pod in without}):
        problems.add(
            owner,
            f"its pods have no {TF_CONFIG} while other pods of {job_words(job)} do, so they "
            "are not part of the TensorFlow cluster; " + RECOMPILE,
        )
    if not members:
        return
    cluster = agreed_cluster(job, members, problems, clusters)
    _check_replicas(cluster, members, objects, problems)
    _check_hosts(cluster, members, objects, all_pods, problems, notes)
    _check_tasks(cluster, members, {pod.name for pod in all_pods}, problems)


def _role_of(owner_members: list[Member]) -> str:
    return Counter(member.task_type for member in owner_members).most_common(1)[0][0]


def _members_by_owner(members: Iterable[Member]) -> dict[str, list[Member]]:
    owners: dict[str, list[Member]] = {}
    for member in members:
        owners.setdefault(member.pod.owner_name, []).append(member)
    return owners


def _check_replicas(
    cluster: Mapping[str, list[str]],
    members: list[Member],
    objects: Sequence[KubernetesObject],
    problems: Problems,
) -> None:
    for owner_name, owner_members in _members_by_owner(members).items():
        namespace = owner_members[0].pod.namespace
        stateful_set = find_object(objects, "StatefulSet", owner_name, namespace)
        if stateful_set is None:
            continue
        replicas = replicas_of(stateful_set)
        role = _role_of(owner_members)
        listed = len(cluster.get(role, []))
        if replicas != listed:
            problems.add(
                f"StatefulSet/{owner_name}",
                f"it has {replicas} replicas but {TF_CONFIG} lists {listed} {role} tasks, so "
                + (
                    "the extra pods are not part of the TensorFlow cluster"
                    if replicas > listed
                    else "the cluster waits for tasks that no pod runs"
                )
                + "; change the role's replicas in job.yaml and run `tfcompile build` "
                "(a patch to replicas does not update TF_CONFIG)",
            )


def _check_hosts(
    cluster: Mapping[str, list[str]],
    members: list[Member],
    objects: Sequence[KubernetesObject],
    all_pods: Sequence[Pod],
    problems: Problems,
    notes: list[str],
) -> None:
    pods_by_name = {(pod.namespace, pod.name): pod for pod in all_pods}
    members_by_owner = _members_by_owner(members)
    scaled_down = _scaled_down_names(members_by_owner, cluster, objects)
    seen_hosts: Counter[str] = Counter(host for hosts in cluster.values() for host in hosts)
    for role in sorted(cluster):
        carrier = _carrier(role, members)
        for position, host_text in enumerate(cluster[role]):
            where = f"{TF_CONFIG} cluster.{role}[{position}]"
            if seen_hosts[host_text] > 1:
                problems.add(
                    carrier,
                    f"{where} lists {host_text}, which appears {seen_hosts[host_text]} times; "
                    "every task needs its own pod: " + RECOMPILE,
                )
            host = parse_host(host_text)
            if host is None:
                problems.add(
                    carrier,
                    f"{where} is {host_text!r}, not a StatefulSet pod address "
                    "(pod.service:port, optionally pod.service.namespace.svc.cluster.local:port); "
                    + RECOMPILE,
                )
                continue
            own_namespace = _namespace(members)
            if host.namespace is not None and own_namespace is None:
                notes.append(
                    f"{carrier}: {where} names namespace {host.namespace} but the manifests set "
                    "none; it resolves only if they are applied to that namespace"
                )
            elif host.namespace is not None and host.namespace != own_namespace:
                problems.add(
                    carrier,
                    f"{where} lists {host.text} in namespace {host.namespace}, but the job's pods "
                    f"are rendered into namespace {own_namespace} (a `namespace:` overlay moves "
                    "them, not TF_CONFIG); use short host names (pod.service:port) by "
                    "recompiling with `tfcompile build`",
                )
                continue
            pod = pods_by_name.get((own_namespace, host.pod_name))
            if pod is None:
                if host.pod_name not in scaled_down:
                    problems.add(carrier, _missing_pod_message(where, host, all_pods))
                continue
            _check_host_pod(where, host, pod, objects, problems)


def _scaled_down_names(
    members_by_owner: Mapping[str, list[Member]],
    cluster: Mapping[str, list[str]],
    objects: Sequence[KubernetesObject],
) -> set[str]:
    """Pods the cluster lists beyond a StatefulSet's replicas (reported as a replica mismatch)."""
    names: set[str] = set()
    for owner_name, owner_members in members_by_owner.items():
        stateful_set = find_object(
            objects, "StatefulSet", owner_name, owner_members[0].pod.namespace
        )
        if stateful_set is None:
            continue
        start, replicas = ordinal_start_of(stateful_set), replicas_of(stateful_set)
        listed = len(cluster.get(_role_of(owner_members), []))
        names.update(
            f"{owner_name}-{ordinal}" for ordinal in range(start + replicas, start + listed)
        )
    return names


def _carrier(role: str, members: list[Member]) -> str:
    """The StatefulSet to blame for a host of `role`: the one whose pods run that role."""
    for member in members:
        if member.task_type == role:
            return owner_of(member.pod)
    return owner_of(members[0].pod)


def _namespace(members: list[Member]) -> str | None:
    return members[0].pod.namespace


def _missing_pod_message(where: str, host: Host, all_pods: Sequence[Pod]) -> str:
    rendered = sorted(pod.name for pod in all_pods if pod.owner_kind == "StatefulSet")
    shown = ", ".join(rendered[:6]) + (", ..." if len(rendered) > 6 else "")
    return (
        f"{where} lists {host.text} but no rendered StatefulSet creates a pod named "
        f"{host.pod_name} (rendered pods: {shown or 'none'}); a namePrefix, nameSuffix or "
        "rename in an overlay changes pod names but not TF_CONFIG: set the name in job.yaml "
        "and run `tfcompile build` instead"
    )


def _check_host_pod(
    where: str,
    host: Host,
    pod: Pod,
    objects: Sequence[KubernetesObject],
    problems: Problems,
) -> None:
    owner = owner_of(pod)
    if pod.subdomain != host.service:
        problems.add(
            owner,
            f"{where} lists {host.text}, but pod {pod.name} is published under its "
            f"StatefulSet's spec.serviceName {pod.subdomain!r}, so {host.pod_name}."
            f"{host.service} does not resolve; " + RECOMPILE,
        )
        return
    if not any(port.container_port == host.port for port in _all_ports(pod)):
        declared = ", ".join(
            f"{port.name or '(unnamed)'}={port.container_port}" for port in _all_ports(pod)
        )
        problems.add(
            owner,
            f"{TF_CONFIG} gives its pods port {host.port} but no container declares "
            f"containerPort {host.port} (ports: {declared or 'none'}); the Service and "
            "NetworkPolicy rules follow the declared port: keep tfjob-port at the job's port",
        )
    service = find_object(objects, "Service", host.service, pod.namespace)
    if service is None:
        problems.add(
            owner,
            f"spec.serviceName is {host.service} but no Service/{host.service} is rendered, so "
            f"its pods' names (<pod>.{host.service}) do not resolve; keep the compiled headless "
            "Service",
        )
        return
    _check_governing_service(where, host, pod, service, problems)


def _all_ports(pod: Pod) -> list[Any]:
    return [port for container in pod.containers for port in container.ports]


def _check_governing_service(
    where: str, host: Host, pod: Pod, service: KubernetesObject, problems: Problems
) -> None:
    reference = f"Service/{host.service}"
    spec = service.get("spec") or {}
    if spec.get("clusterIP") != "None":
        problems.add(
            reference,
            f"it is not headless (clusterIP is {spec.get('clusterIP', 'unset')!r}, type "
            f"{spec.get('type', 'ClusterIP')}), so the pods of StatefulSet/{pod.owner_name} get "
            "no DNS record of their own and TF_CONFIG hosts do not resolve; keep "
            "`clusterIP: None` (remove the patch that changes it)",
        )
    if spec.get("publishNotReadyAddresses") is not True:
        problems.add(
            reference,
            "publishNotReadyAddresses is not true, so a pod's DNS record appears only once it is "
            "Ready, while TensorFlow servers must reach each other before that; set "
            "`publishNotReadyAddresses: true`",
        )
    selector = spec.get("selector") or {}
    mismatched = {
        str(key): str(value)
        for key, value in selector.items()
        if pod.labels.get(str(key)) != str(value)
    }
    if not selector or mismatched:
        detail = (
            "has no selector"
            if not selector
            else "selects "
            + ", ".join(f"{key}={value}" for key, value in sorted(mismatched.items()))
        )
        problems.add(
            reference,
            f"it {detail}, which the pods of StatefulSet/{pod.owner_name} do not match, so their "
            "DNS records are not published; the selector must be a subset of the pod template's "
            "labels",
        )
    if not _service_targets_port(spec, pod, host.port):
        problems.add(
            reference,
            f"no port of it reaches port {host.port} of the pods of StatefulSet/{pod.owner_name} "
            f"(the port TF_CONFIG gives them); expose port {host.port} with targetPort "
            "tfjob-port",
        )


def _service_targets_port(spec: Mapping[str, Any], pod: Pod, port: int) -> bool:
    for service_port in spec.get("ports") or []:
        target = service_port.get("targetPort", service_port.get("port"))
        if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
            if int(target) == port:
                return True
            continue
        for container_port in _all_ports(pod):
            if container_port.name == target and container_port.container_port == port:
                return True
    return False


def _check_tasks(
    cluster: Mapping[str, list[str]],
    members: list[Member],
    pod_names: set[str],
    problems: Problems,
) -> None:
    for member in members:
        pod = member.pod
        owner = owner_of(pod)
        task = json.dumps({"type": member.task_type, "index": member.task_index})
        role_label = pod.labels.get(ROLE_LABEL)
        if role_label is not None and role_label != member.task_type:
            problems.add(
                owner,
                f"pod {pod.name} has role {role_label} but {TF_CONFIG} gives it task {task}; "
                + RECOMPILE,
            )
            continue
        hosts = cluster.get(member.task_type)
        if hosts is None:
            problems.add(
                owner,
                f"pod {pod.name} gets task {task} but the cluster has no role "
                f"{member.task_type!r}; " + RECOMPILE,
            )
            continue
        if not 0 <= member.task_index < len(hosts):
            if member.task_index >= len(hosts) and member.task_index == pod.index:
                continue  # a replica beyond TF_CONFIG: reported as a replica mismatch
            problems.add(
                owner,
                f"pod {pod.name} gets task {task} but the cluster lists {len(hosts)} "
                f"{member.task_type} tasks; " + RECOMPILE,
            )
            continue
        host = parse_host(hosts[member.task_index])
        if host is None or host.pod_name not in pod_names:
            continue  # reported with the hosts
        if host.pod_name != pod.name:
            problems.add(
                owner,
                f"pod {pod.name} gets task {task}, but cluster.{member.task_type}"
                f"[{member.task_index}] is {hosts[member.task_index]}, another pod: each pod's "
                "task must be its own role and index; " + RECOMPILE,
            )
