"""Which Pod Security Standards level each rendered workload's pods meet.

A namespace may enforce a Pod Security level (`pod-security.kubernetes.io/enforce`); a pod that
breaks it is refused at creation, long after Argo CD reported the sync as healthy, and a
StatefulSet then simply has no pods. This evaluates the rules of the Pod Security Standards as
the API server's admission (`k8s.io/pod-security-admission`, policy version "latest") does, on
the pod templates Kustomize rendered, so `validate` can say which level they meet and why not
"restricted". Windows-only fields are not evaluated (these are Linux pods).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tfcompile.compiler.rendering.manifests import KubernetesObject, object_reference

RESTRICTED = "restricted"
BASELINE = "baseline"
PRIVILEGED = "privileged"

_WORKLOAD_TEMPLATE = {
    "StatefulSet": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}

_BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
})
_SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
})
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t",
                            "container_engine_t"})
_RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                 "persistentVolumeClaim", "projected", "secret"})
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _template(kubernetes_object: KubernetesObject) -> Mapping[str, Any] | None:
    path = _WORKLOAD_TEMPLATE.get(str(kubernetes_object.get("kind")))
    if kubernetes_object.get("kind") == "Pod":
        return kubernetes_object
    if path is None:
        return None
    node: Any = kubernetes_object
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else None


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [container for kind in ("initContainers", "containers", "ephemeralContainers")
            for container in spec.get(kind) or [] if isinstance(container, Mapping)]


def _context(node: Mapping[str, Any]) -> Mapping[str, Any]:
    context = node.get("securityContext")
    return context if isinstance(context, Mapping) else {}


def baseline_violations(template: Mapping[str, Any]) -> Iterator[str]:
    """What keeps a pod template from the "baseline" level."""
    metadata = template.get("metadata") or {}
    spec = template.get("spec") or {}
    pod = _context(spec)
    containers = _containers(spec)
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            yield f"{field}: true"
    for node in [pod, *(_context(c) for c in containers)]:
        if (node.get("windowsOptions") or {}).get("hostProcess"):
            yield "windowsOptions.hostProcess: true"
    for container in containers:
        context, name = _context(container), container.get("name")
        if context.get("privileged"):
            yield f"container {name} is privileged"
        added = set((context.get("capabilities") or {}).get("add") or [])
        if added - _BASELINE_CAPABILITIES:
            yield (f"container {name} adds capabilities "
                   f"{', '.join(sorted(added - _BASELINE_CAPABILITIES))}")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                yield f"container {name} uses a hostPort"
        if context.get("procMount") not in (None, "Default"):
            yield f"container {name} sets procMount"
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            yield f"volume {volume.get('name')} is a hostPath"
    for key, value in (metadata.get("annotations") or {}).items():
        if key.startswith(_APPARMOR_ANNOTATION) and not (
                value == "runtime/default" or str(value).startswith("localhost/")):
            yield f"AppArmor annotation {key} is not runtime/default or localhost/*"
    for node in [pod, *(_context(c) for c in containers)]:
        if (node.get("appArmorProfile") or {}).get("type") == "Unconfined":
            yield "appArmorProfile Unconfined"
        selinux = node.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in _SELINUX_TYPES or selinux.get("user") or \
                selinux.get("role"):
            yield "seLinuxOptions beyond a container type"
        if (node.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield "seccompProfile Unconfined"
    for sysctl in pod.get("sysctls") or []:
        if sysctl.get("name") not in _SAFE_SYSCTLS:
            yield f"sysctl {sysctl.get('name')} is not a safe sysctl"


def restricted_violations(template: Mapping[str, Any]) -> Iterator[str]:
    """What keeps a pod template from the "restricted" level, beyond baseline."""
    spec = template.get("spec") or {}
    pod = _context(spec)
    containers = _containers(spec)
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if kinds - _RESTRICTED_VOLUMES:
            yield f"volume {volume.get('name')} is of type {', '.join(sorted(kinds))}"
    pod_seccomp = (pod.get("seccompProfile") or {}).get("type")
    for container in containers:
        context, name = _context(container), container.get("name")
        if context.get("allowPrivilegeEscalation") is not False:
            yield f"container {name} does not set allowPrivilegeEscalation: false"
        non_root = context.get("runAsNonRoot", pod.get("runAsNonRoot"))
        if non_root is not True:
            yield f"container {name} does not run with runAsNonRoot: true"
        if context.get("runAsUser", pod.get("runAsUser")) == 0:
            yield f"container {name} runs as user 0"
        seccomp = (context.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ("RuntimeDefault", "Localhost"):
            yield f"container {name} has no RuntimeDefault or Localhost seccompProfile"
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"container {name} does not drop ALL capabilities"
        added = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            yield f"container {name} adds capabilities {', '.join(sorted(added))}"
    if pod.get("runAsUser") == 0:
        yield "the pod runs as user 0"


def level_of(template: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The highest level a pod template meets, and what keeps it from the next one."""
    baseline = list(dict.fromkeys(baseline_violations(template)))
    if baseline:
        return PRIVILEGED, baseline
    restricted = list(dict.fromkeys(restricted_violations(template)))
    if restricted:
        return BASELINE, restricted
    return RESTRICTED, []


def pod_security_notes(objects: list[KubernetesObject]) -> list[str]:
    """One note for the workloads that meet "restricted", one per workload that does not."""
    meeting: list[str] = []
    notes: list[str] = []
    for kubernetes_object in objects:
        template = _template(kubernetes_object)
        if template is None:
            continue
        level, reasons = level_of(template)
        reference = object_reference(kubernetes_object)
        if level == RESTRICTED:
            meeting.append(reference)
        else:
            notes.append(f"{reference}: its pods meet Pod Security \"{level}\", not "
                         f"\"restricted\" ({'; '.join(reasons)}); a namespace enforcing "
                         "\"restricted\" refuses them")
    if meeting:
        notes.insert(0, f"Pod Security \"restricted\" is met by the pods of {', '.join(meeting)}")
    return notes
