"""Gang scheduling: every pod of a job is placed at once, or none is.

A distributed job whose pods are partly scheduled holds GPUs it cannot use and may deadlock with
another half-placed job. Each role is its own StatefulSet, so the gang must span them; each gang
scheduler names the group its own way:

- Volcano: a `PodGroup` (`scheduling.volcano.sh/v1beta1`) with `minMember` = every pod of the
  job, in the job's `queue`; each pod template names it in the `scheduling.k8s.io/group-name`
  annotation and asks for `schedulerName: volcano` (an auto-created group would get 1 member).
- coscheduling (scheduler-plugins): a `PodGroup` (`scheduling.x-k8s.io/v1alpha1`) with
  `minMember`, named by the pod label `scheduling.x-k8s.io/pod-group`; the plugin runs as the
  second scheduler `scheduler-plugins-scheduler`, as its install charts deploy it.
- Kueue: no object; each pod template carries the LocalQueue (`kueue.x-k8s.io/queue-name`), one
  group name for the whole job (`kueue.x-k8s.io/pod-group-name`), its size
  (`kueue.x-k8s.io/pod-group-total-count`) and `kueue.x-k8s.io/pod-group-serving: "true"` (the
  pods of a StatefulSet restart rather than finish). The labels go on the pod templates only:
  a queue label on a StatefulSet would make Kueue admit each role as a gang of its own.
  With `scheduling.topology`, every pod also carries Kueue's topology-aware scheduling
  annotation (`kueue.x-k8s.io/podset-required-topology` or `…-preferred-topology`) naming the
  node label of the level (rack, block) within one of whose domains the pods are placed. Kueue
  makes one pod set of each role (the pods of a role share one template) and fits each pod set
  into a domain of its own choosing; it groups at most two pod sets into one domain.

A `PodGroup` must exist before the first pod of its gang (a pod without its group is scheduled
alone, or never). Argo CD applies kinds it does not know after the kinds it knows within one sync
wave, so the `PodGroup` carries a sync wave one before the job's other objects
(`argocd.argoproj.io/sync-wave`); Argo CD applies it, and waits for it, before the StatefulSets.
Flux applies unknown kinds last too; its kustomize-controller applies the kinds named by
`--custom-apply-stage-kinds` in a stage of their own first (docs/gitops.md).
"""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models import GangScheduler, TrainingJob

from ..labels import JOB_LABEL, object_labels
from .metadata import object_metadata

GANG_COMPONENT = "gang"
VOLCANO_SCHEDULER = "volcano"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
COSCHEDULING_SCHEDULER = "scheduler-plugins-scheduler"
COSCHEDULING_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
SYNC_WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"


def gang_size(job: TrainingJob) -> int:
    """Every pod of the job, across its roles."""
    return sum(role.replicas for _, role in job.spec.roles.defined())


def gang_name(job: TrainingJob) -> str:
    return job.metadata.name


def pod_group(job: TrainingJob) -> dict[str, Any] | None:
    """The `PodGroup` the job's gang scheduler needs, if it needs one."""
    gang = job.spec.scheduling.gang
    if gang not in (GangScheduler.VOLCANO, GangScheduler.COSCHEDULING):
        return None
    labels = object_labels(job, GANG_COMPONENT, {JOB_LABEL: job.metadata.name})
    spec: dict[str, Any] = {"minMember": gang_size(job)}
    if gang is GangScheduler.VOLCANO:
        api_version = "scheduling.volcano.sh/v1beta1"
        if job.spec.scheduling.queue is not None:
            spec["queue"] = job.spec.scheduling.queue
    else:
        api_version = "scheduling.x-k8s.io/v1alpha1"
    metadata = object_metadata(job, gang_name(job), labels)
    metadata.setdefault("annotations", {})[SYNC_WAVE_ANNOTATION] = _earlier_sync_wave(job)
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": metadata, "spec": spec}


def _earlier_sync_wave(job: TrainingJob) -> str:
    """One wave before the job's other objects (wave 0, or the one its annotations give)."""
    wave = job.metadata.annotations.get(SYNC_WAVE_ANNOTATION, "0")
    try:
        return str(int(wave) - 1)
    except ValueError:
        return "-1"


def gang_template(job: TrainingJob) -> dict[str, Any] | None:
    """What every pod template of the job carries to join the gang, as a template fragment."""
    gang, name = job.spec.scheduling.gang, gang_name(job)
    if gang is GangScheduler.VOLCANO:
        return {"metadata": {"annotations": {VOLCANO_GROUP_ANNOTATION: name}},
                "spec": {"schedulerName": VOLCANO_SCHEDULER}}
    if gang is GangScheduler.COSCHEDULING:
        return {"metadata": {"labels": {COSCHEDULING_GROUP_LABEL: name}},
                "spec": {"schedulerName": COSCHEDULING_SCHEDULER}}
    if gang is GangScheduler.KUEUE:
        queue = job.spec.scheduling.queue
        assert queue is not None
        annotations = {KUEUE_TOTAL_ANNOTATION: str(gang_size(job)),
                       KUEUE_SERVING_ANNOTATION: "true"}
        topology = job.spec.scheduling.topology
        if topology is not None:
            key, level = topology.annotation()
            annotations[key] = level
        return {"metadata": {
            "labels": {KUEUE_QUEUE_LABEL: queue, KUEUE_GROUP_LABEL: name},
            "annotations": annotations,
        }}
    return None
