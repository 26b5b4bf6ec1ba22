"""How a TFJob ended and was scheduled (`runPolicy`, `successPolicy`, the replicas'
`restartPolicy`), as tfcompile's lifecycle and scheduling fields where one says the same.

The operator counted `backoffLimit` over the job's pods of OnFailure and Always replicas
(`pastBackoffLimit`), and let a Never replica fail the job at once; tfcompile's launcher counts
each task's restarts in its pod (`failurePolicy`), one policy for the job. These fields need the
launcher: in a job without it (`launcher: none`, a TFJob that ran its image's entrypoint) each
one is a note instead.
"""

from __future__ import annotations

from typing import Any

from tfcompile.spec.models.lifecycle import LONGEST_DEADLINE_SECONDS
from tfcompile.spec.problems import FieldPath

from .notes import Findings
from .replicas import GANG_SCHEDULERS, RoleParts

RUN_POLICY = ("spec", "runPolicy")
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WITHOUT_LAUNCHER = "needs tfcompile's launcher, which this job runs without (launcher: none)"


def duration(seconds: int) -> str:
    """Seconds as a job spec's duration: hours, minutes, seconds (`5400` is `1h30m`)."""
    hours, rest = divmod(seconds, 3600)
    minutes, remainder = divmod(rest, 60)
    return "".join(f"{amount}{unit}" for amount, unit in ((hours, "h"), (minutes, "m"),
                                                          (remainder, "s")) if amount)


def lifecycle(tfjob_spec: dict[str, Any], roles: list[RoleParts], with_launcher: bool,
              findings: Findings) -> dict[str, Any]:
    """The job's onSuccess, onFailure, failurePolicy, deadline and suspend."""
    policy = tfjob_spec.get("runPolicy") or {}
    fields: dict[str, Any] = {}
    if not isinstance(policy, dict):
        findings.problem(RUN_POLICY, "runPolicy must be a mapping")
        return fields
    for key in policy:
        if key not in ("cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
                       "backoffLimit", "schedulingPolicy", "suspend", "managedBy"):
            findings.note((*RUN_POLICY, key), "not a field of a TFJob v1 runPolicy (the "
                          "operator ignores it); not converted")
    _cleaning(policy, with_launcher, fields, findings)
    if "ttlSecondsAfterFinished" in policy:
        findings.note((*RUN_POLICY, "ttlSecondsAfterFinished"), "no equivalent: the job's "
                      "objects live as long as the job is in git (remove it, and Argo CD or "
                      "Flux prunes them)")
    _deadline(policy, with_launcher, fields, findings)
    _failures(policy, roles, with_launcher, fields, findings)
    if policy.get("suspend") is True:
        fields["suspend"] = True
        findings.came_from(("spec", "suspend"), (*RUN_POLICY, "suspend"))
    if "managedBy" in policy:
        findings.note((*RUN_POLICY, "managedBy"), "no equivalent: the output is StatefulSets "
                      "and Services, which Kubernetes' own controllers manage")
    return fields


def _cleaning(policy: dict[str, Any], with_launcher: bool, fields: dict[str, Any],
              findings: Findings) -> None:
    clean = policy.get("cleanPodPolicy")
    where = (*RUN_POLICY, "cleanPodPolicy")
    if clean == "All" and with_launcher:
        fields["onSuccess"] = "release"
        fields["onFailure"] = "release"
        findings.came_from(("spec", "onSuccess"), where)
        findings.came_from(("spec", "onFailure"), where)
    elif clean == "All":
        findings.note(where, f"All (onSuccess and onFailure: release) {WITHOUT_LAUNCHER}")
    elif clean == "Running":
        findings.note(where, "no equivalent: Running deleted the pods still running when the "
                      "job ended; tfcompile's pods stay and idle (onSuccess: idle), or all go "
                      "(release)")


def _deadline(policy: dict[str, Any], with_launcher: bool, fields: dict[str, Any],
              findings: Findings) -> None:
    seconds = policy.get("activeDeadlineSeconds")
    where = (*RUN_POLICY, "activeDeadlineSeconds")
    if seconds is None:
        return
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not (
            1 <= seconds <= LONGEST_DEADLINE_SECONDS):
        findings.note(where, "not converted: spec.deadline is from 1s to "
                      f"{LONGEST_DEADLINE_SECONDS // 3600}h")
    elif not with_launcher:
        findings.note(where, f"spec.deadline {WITHOUT_LAUNCHER}")
    else:
        fields["deadline"] = duration(seconds)
        findings.came_from(("spec", "deadline"), where)


def _failures(policy: dict[str, Any], roles: list[RoleParts], with_launcher: bool,
              fields: dict[str, Any], findings: Findings) -> None:
    """backoffLimit and the replicas' restartPolicy as one failurePolicy."""
    limit = policy.get("backoffLimit")
    limit_source = (*RUN_POLICY, "backoffLimit")
    never = [role for role in roles if role.restart_policy == "Never"]
    for role in roles:
        if role.restart_policy == "ExitCode":
            findings.note(role.sources["restartPolicy"], "ExitCode: list the exit codes that "
                          "retrying will not fix in spec.failurePolicy.doNotRetryExitCodes (the "
                          "operator took 1-127 as permanent, 128-255 as retryable)")
    if not with_launcher:
        for role in never:
            findings.note(role.sources["restartPolicy"], "Never (a failed task failed the "
                          f"job): spec.failurePolicy {WITHOUT_LAUNCHER}; a failing command "
                          "restarts")
        if limit is not None:
            findings.note(limit_source, f"spec.failurePolicy.maxRestarts {WITHOUT_LAUNCHER}")
        return
    if never and len(never) == len(roles):
        fields["failurePolicy"] = {"maxRestarts": 0}
        findings.came_from(("spec", "failurePolicy"), never[0].sources["restartPolicy"])
        if limit is not None:
            findings.note(limit_source, "no effect, as under the operator: every replica is "
                          "restartPolicy Never (spec.failurePolicy.maxRestarts: 0)")
        return
    if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0:
        fields["failurePolicy"] = {"maxRestarts": min(limit, 100000)}
        findings.came_from(("spec", "failurePolicy"), limit_source)
    elif limit is not None:
        findings.problem(limit_source, "backoffLimit must be a whole number, 0 or more")
    for role in never:
        findings.note(role.sources["restartPolicy"], "Never: spec.failurePolicy is the job's, "
                      "one for every role; this role's failing task restarts as the others' "
                      "do")


def scheduling(tfjob: dict[str, Any], roles: list[RoleParts],
               findings: Findings) -> tuple[dict[str, Any], str | None]:
    """spec.scheduling (from schedulingPolicy, the pods' scheduler or Kueue's queue label), and
    the priority class every pod gets."""
    policy = (tfjob.get("spec") or {}).get("runPolicy") or {}
    gang_policy = policy.get("schedulingPolicy") if isinstance(policy, dict) else None
    where: FieldPath = (*RUN_POLICY, "schedulingPolicy")
    labels = (tfjob.get("metadata") or {}).get("labels") or {}
    queue_label = labels.get(KUEUE_QUEUE_LABEL) if isinstance(labels, dict) else None
    schedulers = {role.scheduler for role in roles if role.scheduler is not None}
    result: dict[str, Any] = {}
    if queue_label is not None:
        result = {"gang": "kueue", "queue": queue_label}
        findings.came_from(("spec", "scheduling"), ("metadata", "labels", KUEUE_QUEUE_LABEL))
    elif len(schedulers) == 1 and next(iter(schedulers)) in GANG_SCHEDULERS:
        result = {"gang": GANG_SCHEDULERS[next(iter(schedulers))]}
        findings.came_from(("spec", "scheduling"), roles[0].sources.get("schedulerName", ()))
    for role in roles:
        if role.scheduler is not None and role.scheduler not in (*GANG_SCHEDULERS,
                                                                 "default-scheduler"):
            findings.note(role.sources["schedulerName"], "no equivalent: tfcompile's pods use "
                          "the default scheduler, or a gang scheduler's (spec.scheduling)")
    priority: str | None = None
    if not isinstance(gang_policy, dict):
        return result, priority
    if not result:
        findings.note(where, "not converted: the operator's --gang-scheduler-name chose the "
                      "gang scheduler, which the TFJob does not name; set spec.scheduling.gang "
                      "(volcano, coscheduling or kueue)")
    queue = gang_policy.get("queue")
    if queue is not None and result.get("gang") == "volcano":
        result["queue"] = queue
        findings.came_from(("spec", "scheduling", "queue"), (*where, "queue"))
    elif queue is not None and "queue" not in result:
        findings.note((*where, "queue"), "not converted: a queue needs spec.scheduling.gang "
                      "volcano or kueue")
    if "minAvailable" in gang_policy:
        findings.note((*where, "minAvailable"), "a gang is every pod of the job in tfcompile")
    for key in ("minResources", "scheduleTimeoutSeconds"):
        if key in gang_policy:
            findings.note((*where, key), "no equivalent: the gang scheduler's own settings "
                          "decide")
    if isinstance(gang_policy.get("priorityClass"), str):
        priority = gang_policy["priorityClass"]
    return result, priority
