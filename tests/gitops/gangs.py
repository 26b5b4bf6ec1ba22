"""Gangs under GitOps: Volcano's CRDs, and proof that a job's PodGroup was created
before any of its pods.

Creation times (`metadata.creationTimestamp`) have a resolution of one second, so the order is
also read from watches started before the push: the resourceVersion of each object's ADDED
event is the revision of its creation in the local control plane's etcd, which orders every
write of the cluster.
"""

from __future__ import annotations

import json
import subprocess
import threading
from typing import Any

from tests.cluster.local_node import LocalNode
from tests.cluster.test_gangs import volcano_crd
from tests.cluster.waiting import wait_for
from tests.gitops.repository import NAMESPACE

POD_GROUPS = "podgroups.scheduling.volcano.sh"


def install_volcano_crds(node: LocalNode) -> None:
    """Volcano's PodGroup and Queue kinds (kept until the tier stops: Applications and
    Kustomizations of both tools may hold PodGroups)."""
    definitions = [volcano_crd("PodGroup", "podgroups"), volcano_crd("Queue", "queues")]
    names = [f"customresourcedefinition/{crd['metadata']['name']}" for crd in definitions]
    manifest = node.run_directory.parent / "volcano-crds.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": definitions}))
    node.kubectl("apply", "--server-side", "-f", str(manifest))
    node.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)


class Watch:
    """`kubectl get --watch` of one kind in the jobs' namespace, from now on: the first event
    of each object, as it came."""

    def __init__(self, node: LocalNode, kind: str, selector: str) -> None:
        self.first: dict[str, dict[str, Any]] = {}
        self.process = subprocess.Popen(
            ["kubectl", f"--kubeconfig={node.kubeconfig}", "get", kind, "-n", NAMESPACE,
             "-l", selector, "--watch", "--output-watch-events", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self) -> None:
        assert self.process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self.process.stdout:
            buffer += line
            while buffer.strip():
                try:
                    event, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break
                buffer = buffer.lstrip()[end:]
                item = event.get("object") or {}
                name = (item.get("metadata") or {}).get("name")
                if name and name not in self.first:
                    self.first[name] = {"type": event.get("type"), **item["metadata"]}

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class GangWatch:
    """Watches of a job's PodGroup and pods, started before the push that creates them."""

    def __init__(self, node: LocalNode, job: str, pods: int) -> None:
        selector = f"tfcompile.dev/job={job}"
        self.node, self.job, self.pods = node, job, pods
        self.groups = Watch(node, POD_GROUPS, selector)
        self.members = Watch(node, "pods", selector)

    def assert_group_came_first(self, timeout: float) -> None:
        """Once the group and every pod exist: the group was created before every pod."""
        try:
            wait_for(f"{self.pods} pods and the PodGroup of {self.job}",
                     lambda: len(self.members.first) >= self.pods and self.groups.first,
                     timeout, lambda: f"pods {sorted(self.members.first)}, groups "
                     f"{sorted(self.groups.first)}")
        finally:
            self.groups.stop()
            self.members.stop()
        group = self.groups.first[self.job]
        pods = self.members.first.values()
        assert group["type"] == "ADDED" and all(pod["type"] == "ADDED" for pod in pods)
        created = int(group["resourceVersion"])
        assert all(int(pod["resourceVersion"]) > created for pod in pods), (group, pods)
        assert all(pod["creationTimestamp"] >= group["creationTimestamp"] for pod in pods)
        live = self.node.get(POD_GROUPS, self.job, "-n", NAMESPACE)
        assert live["spec"]["minMember"] == self.pods
        print(f"{self.job}: PodGroup created at revision {created} "
              f"({group['creationTimestamp']}), its pods at "
              f"{sorted(int(pod['resourceVersion']) for pod in pods)} "
              f"({sorted(pod['creationTimestamp'] for pod in pods)})")
