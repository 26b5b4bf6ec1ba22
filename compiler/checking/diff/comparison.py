"""Two output trees compared job by job: what merging the change does in the cluster.

Pure: trees in, `JobChange`s out, no files, no git (the fast tests compare trees in process).
Per job that differs: created or deleted; for each role (a StatefulSet) whether its pods
restart and why (`pod_template`), its replicas before and after, the GPUs the job requests
before and after (replicas times the `*/gpu` limits of each pod's containers, whole numbers of
any length: see `EXACT`), the StatefulSets
Kubernetes cannot update in place (`IMMUTABLE_FIELDS`, which `build` refuses without
`--allow-recreate`), the claims that pruning deletes with their data, the components added or
removed, and which other objects change. A sweep's trial is named by its values as well as its
directory (its state ConfigMap's, as `status` reads them), and the sweep's TensorBoard as that.

A role whose template differs only in its revision annotation restarts all the same (the pod
template changed): because the data of a ConfigMap its pods mount changed under the same name;
else with the job, when another role's template changed or a role was added or removed (one
TensorFlow cluster runs one revision; `roles_changed` names them); else for the revision
alone. A role scaled from or to zero starts or stops; it does not restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, Inexact, Rounded
from typing import Any

from tfcompile.compiler.objects.builders.launcher_config_map import without_revision_setting
from tfcompile.compiler.objects.builders.storage import (
    ARGO_CD_SYNC_OPTIONS,
    FLUX_PRUNE,
    KEEP_OPTIONS,
)
from tfcompile.compiler.objects.labels import (
    COMPONENT_LABEL,
    ROLE_LABEL,
    SWEEP_LABEL,
    TENSORBOARD_COMPONENT,
)
from tfcompile.compiler.objects.names import state_config_map_name
from tfcompile.compiler.output.immutable_fields import IMMUTABLE_FIELDS
from tfcompile.compiler.printable import printable

from ..sweep_status import trial_info
from .pod_template import mounted_config_maps, restart_reasons, revision_of
from .trees import DiffInputError, JobOutput, OutputTree

STATEFUL_SET = "StatefulSet"
CLAIM = "PersistentVolumeClaim"
_WORKLOADS = ("StatefulSet", "Deployment")
WITH_THE_JOB = "with the job"
REVISION_ONLY = "revision"
RECREATED = "StatefulSet recreated"
EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[Inexact, Rounded])
"""GPU counts are added and multiplied as decimals in this context: whole numbers of any length,
never rounded. A limit is text in the files (`nvidia.com/gpu: "1000…0"` is a valid quantity
string), and Python's `int` refuses text of more than 4,300 digits (a traceback) and would take
minutes over millions; a decimal reads and prints any length in time linear in it."""


@dataclass(frozen=True)
class RoleChange:
    """One role (StatefulSet) of a job: replicas before and after (None: no such role), and
    why its pods restart (empty: they do not)."""

    role: str
    replicas_before: int | None
    replicas_after: int | None
    restart_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Recreation:
    statefulset: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class JobChange:
    """What merging does to one job; `state` is created, deleted or changed."""

    job: str
    state: str
    roles: tuple[RoleChange, ...]
    gpus_before: Decimal
    gpus_after: Decimal
    recreations: tuple[Recreation, ...] = ()
    deleted_claims: tuple[str, ...] = ()
    kept_claims: tuple[str, ...] = ()
    """Claims that leave git but stay in the cluster with their data (`whenDeleted: Retain`)."""
    components_added: tuple[str, ...] = ()
    components_removed: tuple[str, ...] = ()
    roles_changed: tuple[str, ...] = ()
    """The roles whose own pod templates changed, which the others restart with."""
    roles_added_or_removed: bool = False
    other_objects: tuple[tuple[str, str, str], ...] = field(default=())
    """(kind, name, added | removed | changed) of the objects other than StatefulSets."""
    trial_values: tuple[tuple[str, str], ...] = ()
    """A sweep's trial: its values, by parameter name (empty for any other job)."""
    board_of: str | None = None
    """A sweep's one TensorBoard: the sweep's name."""

    @property
    def restarting(self) -> tuple[RoleChange, ...]:
        return tuple(role for role in self.roles if role.restart_reasons)

    @property
    def rescaled(self) -> tuple[RoleChange, ...]:
        return tuple(role for role in self.roles if role.replicas_before != role.replicas_after)


def _where(job: str, item: dict[str, Any]) -> str:
    return f"job {printable(job)}: {item['kind']} {printable(str(item['metadata']['name']))}"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _replicas(job: str, item: dict[str, Any]) -> int:
    value = _mapping(item.get("spec")).get("replicas", 1)  # Kubernetes' default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DiffInputError(f"{_where(job, item)}: spec.replicas is not a whole number")
    return value


def _pod_gpus(job: str, item: dict[str, Any]) -> Decimal:
    spec = _mapping(_mapping(_mapping(item.get("spec")).get("template")).get("spec"))
    containers = spec.get("containers")
    total = Decimal(0)
    for container in containers if isinstance(containers, list) else []:
        limits = _mapping(_mapping(_mapping(container).get("resources")).get("limits"))
        for resource, quantity in limits.items():
            if not str(resource).endswith("/gpu"):
                continue
            digits = isinstance(quantity, str) and quantity.isdecimal() and quantity.isascii()
            if not digits and (isinstance(quantity, bool) or not isinstance(quantity, int)):
                raise DiffInputError(f"{_where(job, item)}: the {printable(str(resource))} "
                                     "limit is not a whole number of devices")
            total = EXACT.add(total, Decimal(quantity))
    return total


def requested_gpus(job: str, output: JobOutput | None) -> Decimal:
    """GPUs the job's pods request: replicas times each pod's GPU limits."""
    total = Decimal(0)
    for item in output.objects if output is not None else ():
        if item["kind"] in _WORKLOADS:
            total = EXACT.add(total, EXACT.multiply(Decimal(_replicas(job, item)),
                                                    _pod_gpus(job, item)))
    return total


def _role_name(name: str, item: dict[str, Any]) -> str:
    role = _mapping(_mapping(item.get("metadata")).get("labels")).get(ROLE_LABEL)
    return role if isinstance(role, str) else name


def _template(item: dict[str, Any]) -> Any:
    return _mapping(item.get("spec")).get("template")


def _changed_mount(base: JobOutput, head: JobOutput, before: Any, after: Any) -> list[str]:
    """Mounted ConfigMaps (script, launcher) whose data changed under the same name."""
    maps_before, maps_after = base.of_kind("ConfigMap"), head.of_kind("ConfigMap")
    mounted_before, mounted_after = mounted_config_maps(before), mounted_config_maps(after)
    return [reason for reason, name in sorted(mounted_after.items())
            if mounted_before.get(reason) == name
            and _compared_data(reason, maps_before.get(name))
            != _compared_data(reason, maps_after.get(name))]


def _compared_data(reason: str, config_map: Any) -> Any:
    """A mounted ConfigMap's files as a restart reason: its `data` and `binaryData` (where the
    launcher's program is); the launcher's settings name the revision they belong to, which
    changes with the job, not with how the launcher runs."""
    data = _mapping(config_map).get("data")
    if reason == "launcher" and isinstance(data, dict):
        data = without_revision_setting(data)
    return data, _mapping(config_map).get("binaryData")


def _roles(job: str, base: JobOutput | None, head: JobOutput | None,
           recreated: set[str]) -> tuple[RoleChange, ...]:
    sets_before = base.of_kind(STATEFUL_SET) if base is not None else {}
    sets_after = head.of_kind(STATEFUL_SET) if head is not None else {}
    own: dict[str, list[str]] = {}
    for name in set(sets_before) & set(sets_after):
        own[name] = restart_reasons(_template(sets_before[name]), _template(sets_after[name]))
    job_changed = set(sets_before) != set(sets_after) or any(own.values())
    changes = []
    for name in sorted(set(sets_before) | set(sets_after)):
        before, after = sets_before.get(name), sets_after.get(name)
        replicas_before = _replicas(job, before) if before is not None else None
        replicas_after = _replicas(job, after) if after is not None else None
        reasons: list[str] = []
        if before is not None and after is not None and replicas_before and replicas_after:
            reasons = own[name]
            template_changed = (reasons or revision_of(_template(before))
                                != revision_of(_template(after)))
            if template_changed and not reasons:
                assert base is not None and head is not None
                reasons = (_changed_mount(base, head, _template(before), _template(after))
                           or [WITH_THE_JOB if job_changed else REVISION_ONLY])
            if name in recreated and not reasons:
                reasons = [RECREATED]
        role = _role_name(name, after if after is not None else before or {})
        changes.append(RoleChange(role, replicas_before, replicas_after, tuple(reasons)))
    return tuple(changes)


def _recreations(base: JobOutput, head: JobOutput) -> tuple[Recreation, ...]:
    sets_before, sets_after = base.of_kind(STATEFUL_SET), head.of_kind(STATEFUL_SET)
    found = []
    for name in sorted(set(sets_before) & set(sets_after)):
        spec_before = _mapping(sets_before[name].get("spec"))
        spec_after = _mapping(sets_after[name].get("spec"))
        fields = tuple(f"spec.{f}" for f in IMMUTABLE_FIELDS
                       if spec_before.get(f) != spec_after.get(f))
        if fields:
            found.append(Recreation(name, fields))
    return tuple(found)


def _keyed(output: JobOutput | None) -> dict[tuple[str, str], dict[str, Any]]:
    if output is None:
        return {}
    return {(item["kind"], item["metadata"]["name"]): item for item in output.objects}


def _other_objects(base: JobOutput | None, head: JobOutput | None
                   ) -> tuple[tuple[str, str, str], ...]:
    before, after = _keyed(base), _keyed(head)
    described = []
    for key in sorted(set(before) | set(after)):
        kind, name = key
        if kind == STATEFUL_SET or before.get(key) == after.get(key):
            continue
        what = "added" if key not in before else "removed" if key not in after else "changed"
        described.append((kind, name, what))
    return tuple(described)


def _trial_values(job: str, output: JobOutput) -> tuple[tuple[str, str], ...]:
    """The point of a trial, from its state ConfigMap, by parameter name; empty when the job
    is no trial or its state does not say."""
    info = trial_info(output.of_kind("ConfigMap").get(state_config_map_name(job), {}))
    return tuple(sorted(info.values.items())) if info is not None else ()


def _board_of(output: JobOutput) -> str | None:
    """The sweep whose one TensorBoard the job directory is (a Deployment selecting the
    sweep's TensorBoard, and no StatefulSet), or None."""
    if output.of_kind(STATEFUL_SET):
        return None
    for item in output.of_kind("Deployment").values():
        selector = _mapping(_mapping(item.get("spec")).get("selector")).get("matchLabels")
        selector = _mapping(selector)
        sweep = selector.get(SWEEP_LABEL)
        if selector.get(COMPONENT_LABEL) == TENSORBOARD_COMPONENT and isinstance(sweep, str):
            return sweep
    return None


def compare_job(job: str, base: JobOutput | None, head: JobOutput | None) -> JobChange | None:
    """What merging does to one job; None when its objects and components are the same."""
    if base == head:
        return None
    state = "created" if base is None else "deleted" if head is None else "changed"
    recreations = _recreations(base, head) if base is not None and head is not None else ()
    claims_before = base.of_kind(CLAIM) if base is not None else {}
    claims_after = head.of_kind(CLAIM) if head is not None else {}
    components_before = set(base.components) if base is not None else set()
    components_after = set(head.components) if head is not None else set()
    roles = _roles(job, base, head, {item.statefulset for item in recreations})
    described = head if head is not None else base
    assert described is not None
    before_roles = {role.role for role in roles if role.replicas_before is not None}
    after_roles = {role.role for role in roles if role.replicas_after is not None}
    return JobChange(
        job=job,
        state=state,
        roles=roles,
        roles_changed=tuple(role.role for role in roles if role.restart_reasons
                            and WITH_THE_JOB not in role.restart_reasons
                            and REVISION_ONLY not in role.restart_reasons),
        roles_added_or_removed=state == "changed" and before_roles != after_roles,
        gpus_before=requested_gpus(job, base),
        gpus_after=requested_gpus(job, head),
        recreations=recreations,
        deleted_claims=tuple(sorted(name for name in set(claims_before) - set(claims_after)
                                    if not _retained(claims_before[name]))),
        kept_claims=tuple(sorted(name for name in set(claims_before) - set(claims_after)
                                 if _retained(claims_before[name]))),
        components_added=tuple(sorted(components_after - components_before))
        if base is not None else (),
        components_removed=tuple(sorted(components_before - components_after))
        if head is not None else (),
        other_objects=_other_objects(base, head) if state == "changed" else (),
        trial_values=_trial_values(job, described),
        board_of=_board_of(described),
    )


def _retained(claim: dict[str, Any]) -> bool:
    """Whether Argo CD and Flux both leave `claim` when it leaves git (its annotations)."""
    metadata = claim.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict):
        return False
    options = annotations.get(ARGO_CD_SYNC_OPTIONS)
    given = ({option.strip() for option in options.split(",")} if isinstance(options, str)
             else set())
    return set(KEEP_OPTIONS) <= given and annotations.get(FLUX_PRUNE) == "disabled"


def compare(base: OutputTree, head: OutputTree) -> list[JobChange]:
    """Every job whose output differs between the trees, by job name."""
    changes = []
    for job in sorted(set(base) | set(head)):
        change = compare_job(job, base.get(job), head.get(job))
        if change is not None:
            changes.append(change)
    return changes
