"""The typed job spec (`job.yaml`): pydantic models of every field, with strict parsing.

Unknown fields are errors and scalar types are strict (a number where a string belongs is an error
with a hint), because a silently ignored or coerced field in a training job costs GPU hours.
Cross-field rules live in `rules.py`, so that each can name the exact field it concerns.

The annotations are evaluated as the classes are made (no `from __future__ import annotations`),
and empty containers come from the factories below rather than `dict` and `list`: pydantic reads
a factory's signature, and a builtin's means parsing its text signature with the tokenizer. Both
keep every `build` from paying for what changes nothing in the models.
"""

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    StrictBool,
    StrictInt,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from .discovery import KIND as KIND
from .pod_template import INGRESS_RULE_DEFINITION, ROOT_DEFINITION, reference_schema

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_1035_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
QUALIFIED_NAME_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
ENVIRONMENT_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
CONFIG_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei|e[0-9]+)?$"
ABSOLUTE_PATH_PATTERN = r"^/[^\x00]*$"
OVERLAY_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$"
METRIC_NAME_PATTERN = r"^[A-Za-z_][-A-Za-z0-9_.]{0,62}$"


def _no_entries() -> dict[Any, Any]:
    """The default of a mapping field: empty."""
    return {}


def _no_items() -> list[Any]:
    """The default of a list field: empty."""
    return []


JobName = Annotated[
    str, StringConstraints(strict=True, pattern=DNS_1035_LABEL_PATTERN, max_length=63)
]
NamespaceName = Annotated[
    str, StringConstraints(strict=True, pattern=DNS_LABEL_PATTERN, max_length=63)
]
ObjectName = Annotated[
    str, StringConstraints(strict=True, pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)
]
LabelKey = Annotated[
    str, StringConstraints(strict=True, pattern=QUALIFIED_NAME_PATTERN, max_length=316)
]
LabelValue = Annotated[
    str, StringConstraints(strict=True, pattern=LABEL_VALUE_PATTERN, max_length=63)
]
EnvironmentName = Annotated[
    str, StringConstraints(strict=True, pattern=ENVIRONMENT_NAME_PATTERN, max_length=1024)
]
ConfigKey = Annotated[
    str, StringConstraints(strict=True, pattern=CONFIG_KEY_PATTERN, max_length=253)
]
Quantity = Annotated[str, StringConstraints(strict=True, pattern=QUANTITY_PATTERN)]
AbsolutePath = Annotated[str, StringConstraints(strict=True, pattern=ABSOLUTE_PATH_PATTERN)]
ResourceName = Annotated[
    str, StringConstraints(strict=True, pattern=QUALIFIED_NAME_PATTERN, max_length=316)
]
OverlayName = Annotated[
    str, StringConstraints(strict=True, pattern=OVERLAY_NAME_PATTERN, max_length=63)
]
Text = Annotated[str, StringConstraints(strict=True)]
NotSecretName = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=253)]
NonEmptyText = Annotated[str, StringConstraints(strict=True, min_length=1)]


class SpecModel(BaseModel):
    """Base of every spec model: camelCase keys in YAML, unknown keys refused, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )


class Strategy(StrEnum):
    """The `tf.distribute` strategy the job is laid out for."""

    MULTI_WORKER_MIRRORED = "MultiWorkerMirrored"
    PARAMETER_SERVER = "ParameterServer"


class RoleName(StrEnum):
    """TensorFlow task types, in the order they are listed everywhere."""

    CHIEF = "chief"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"


class ServiceType(StrEnum):
    """How the TensorBoard Service is exposed."""

    CLUSTER_IP = "ClusterIP"
    NODE_PORT = "NodePort"
    LOAD_BALANCER = "LoadBalancer"


class KeyReference(SpecModel):
    """A key of an existing Secret or ConfigMap."""

    name: ObjectName
    key: ConfigKey
    optional: StrictBool = False


class EnvironmentValue(SpecModel):
    """An env value: a plain string, or a reference to a key of an existing Secret or ConfigMap."""

    value: Text | None = None
    secret_key_ref: KeyReference | None = None
    config_map_key_ref: KeyReference | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_plain_string(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"value": data}
        if isinstance(data, bool | int | float):
            raise ValueError(
                "environment values are strings: quote it (a number or boolean is not allowed)"
            )
        return data

    @model_validator(mode="after")
    def _exactly_one_source(self) -> "EnvironmentValue":
        sources = [self.value, self.secret_key_ref, self.config_map_key_ref]
        if sum(source is not None for source in sources) != 1:
            raise ValueError(
                "give a string, or exactly one of secretKeyRef or configMapKeyRef"
            )
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        reference = KeyReference.model_json_schema(by_alias=True)
        reference.pop("title", None)
        return {
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["secretKeyRef"],
                    "properties": {"secretKeyRef": reference},
                },
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["configMapKeyRef"],
                    "properties": {"configMapKeyRef": reference},
                },
            ],
            "description": "A string, or a reference to a key of an existing Secret/ConfigMap.",
        }


class NamedReference(SpecModel):
    """An existing Secret or ConfigMap, by name."""

    name: ObjectName
    optional: StrictBool = False


class EnvironmentSource(SpecModel):
    """One `envFrom` entry: all keys of an existing Secret or ConfigMap."""

    secret_ref: NamedReference | None = None
    config_map_ref: NamedReference | None = None
    prefix: Annotated[str, StringConstraints(strict=True, pattern=r"^[-._a-zA-Z0-9]*$")] = ""

    @model_validator(mode="after")
    def _exactly_one_source(self) -> "EnvironmentSource":
        if (self.secret_ref is None) == (self.config_map_ref is None):
            raise ValueError("give exactly one of secretRef or configMapRef")
        return self


QuantityValue = Annotated[
    Quantity | Annotated[StrictInt, Field(ge=0)], Field(union_mode="left_to_right")
]


class Resources(SpecModel):
    """Container resources; GPUs are not set here but with `gpus`."""

    requests: dict[ResourceName, QuantityValue] = Field(default_factory=_no_entries)
    limits: dict[ResourceName, QuantityValue] = Field(default_factory=_no_entries)


PodTemplate = Annotated[
    dict[str, Any],
    WithJsonSchema(reference_schema(
        ROOT_DEFINITION,
        "A fragment of a Kubernetes pod template (metadata.labels, metadata.annotations, "
        "spec.*), merged into the generated one like a strategic-merge patch; lists Kubernetes "
        "would replace (tolerations, …) are appended. The container named `tensorflow` is "
        "tfcompile's; other containers are sidecars.")),
]
"""A `PodTemplateSpec` fragment; its content is checked against Kubernetes' schema by the
rules (`pod_template.schema_problems`), which can point at the exact field."""

NetworkPolicyIngressRule = Annotated[
    dict[str, Any],
    WithJsonSchema(reference_schema(
        INGRESS_RULE_DEFINITION,
        "A Kubernetes NetworkPolicy ingress rule (from, ports) admitting more than the job's "
        "own pods.")),
]


class GangScheduler(StrEnum):
    """Who schedules a job's pods all at once (a gang), so a partly placed job holds nothing."""

    VOLCANO = "volcano"
    COSCHEDULING = "coscheduling"
    KUEUE = "kueue"


NodeLabelKey = Annotated[
    str, StringConstraints(strict=True, pattern=QUALIFIED_NAME_PATTERN, max_length=63)
]
"""A node label's key that names a topology level (Kueue's Workload keeps at most 63
characters of it)."""


class Topology(SpecModel):
    """Kueue's topology-aware scheduling: the node label of a level of the data centre (a rack,
    a block) within one of whose domains the job's pods are placed."""

    required: NodeLabelKey | None = Field(
        default=None,
        description="Place the pods within one domain of this level, or not at all "
        "(Kueue's kueue.x-k8s.io/podset-required-topology).",
    )
    preferred: NodeLabelKey | None = Field(
        default=None,
        description="Place the pods within one domain of this level if they fit, else of the "
        "levels above it (Kueue's kueue.x-k8s.io/podset-preferred-topology).",
    )

    @model_validator(mode="after")
    def _exactly_one_level(self) -> "Topology":
        if (self.required is None) == (self.preferred is None):
            raise ValueError("give exactly one of required or preferred (a node label naming "
                             "a topology level, such as cloud.provider.com/topology-rack)")
        return self

    def annotation(self) -> tuple[str, str]:
        """(Kueue's annotation, the level's node label)."""
        if self.required is not None:
            return "kueue.x-k8s.io/podset-required-topology", self.required
        assert self.preferred is not None
        return "kueue.x-k8s.io/podset-preferred-topology", self.preferred


class Scheduling(SpecModel):
    """Gang scheduling: every pod of the job is placed together, or none is."""

    gang: GangScheduler | None = Field(
        default=None,
        description="volcano (a PodGroup), coscheduling (scheduler-plugins' PodGroup) or kueue "
        "(one pod group across all roles).",
    )
    queue: ObjectName | None = Field(
        default=None,
        description="Volcano: the Queue; Kueue: the LocalQueue of the job's namespace.",
    )
    topology: Topology | None = Field(
        default=None,
        description="With gang: kueue, Kueue's topology-aware scheduling: every pod of the "
        "job within one domain of a node-label level (required or preferred).",
    )


class NetworkPolicySettings(SpecModel):
    """The job's NetworkPolicy: its own pods reach each other on every port; `ingress` adds
    more sources (for example a metrics port from a monitoring namespace). `true` and `false`
    stand for `{}` and no NetworkPolicy."""

    enabled: StrictBool = True
    ingress: list[NetworkPolicyIngressRule] = Field(default_factory=_no_items)

    @model_validator(mode="before")
    @classmethod
    def _from_boolean(cls, data: Any) -> Any:
        if isinstance(data, bool):
            return {"enabled": data}
        if not isinstance(data, dict):
            raise ValueError("give true, false, or {ingress: [<NetworkPolicy ingress rule>...]}")
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"anyOf": [{"type": "boolean"}, handler(core_schema)]}


class Role(SpecModel):
    """One TensorFlow task type: how many pods, and what each runs with."""

    replicas: Annotated[StrictInt, Field(ge=0, le=10000)] = 1
    gpus: Annotated[StrictInt, Field(ge=0, le=64)] = 0
    image: NonEmptyText | None = None
    command: list[NonEmptyText] | None = None
    args: list[Text] | None = None
    env: dict[EnvironmentName, EnvironmentValue] = Field(default_factory=_no_entries)
    resources: Resources | None = None
    pod_template: PodTemplate | None = None


class Roles(SpecModel):
    """The roles of the job; a role left out has no pods."""

    chief: Role | None = None
    worker: Role | None = None
    ps: Role | None = None
    evaluator: Role | None = None

    def defined(self) -> list[tuple[RoleName, Role]]:
        """The roles given, in TensorFlow's order (chief, worker, ps, evaluator)."""
        found = [(name, getattr(self, name.value)) for name in RoleName]
        return [(name, role) for name, role in found if role is not None]

    def replicas(self, name: RoleName) -> int:
        role: Role | None = getattr(self, name.value)
        return 0 if role is None else role.replicas


class SharedStorage(SpecModel):
    """One ReadWriteMany volume mounted by every role (checkpoints, logs)."""

    mount_path: AbsolutePath
    size: Quantity | None = None
    storage_class_name: ObjectName | None = None
    existing_claim: ObjectName | None = None


class ScratchStorage(SpecModel):
    """A node-local emptyDir per pod."""

    mount_path: AbsolutePath
    size_limit: Quantity | None = None


class ClaimMount(SpecModel):
    """An existing PersistentVolumeClaim (a dataset, a model store) mounted into the pods of
    every role or of some. tfcompile never creates, changes or deletes it."""

    name: Annotated[
        str, StringConstraints(strict=True, pattern=DNS_LABEL_PATTERN, max_length=63)
    ] = Field(description="The pod volume's name (a DNS label), unique in the job.")
    claim_name: ObjectName = Field(description="The existing claim, in the job's namespace.")
    mount_path: AbsolutePath
    read_only: StrictBool = Field(
        description="true: the pods only read it (a dataset); false: they may write. Required: "
        "a claim tfcompile does not own is never written by surprise.")
    sub_path: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=4096)] | \
        None = Field(default=None, description="A folder of the claim to mount instead of its "
                     "root (relative, no `..`).")
    roles: list[RoleName] | None = Field(
        default=None, description="The roles that mount it (omitted: every role).")


class Storage(SpecModel):
    shared: SharedStorage | None = None
    scratch: ScratchStorage | None = None
    volumes: list[ClaimMount] = Field(
        default_factory=_no_items,
        description="Existing claims mounted read-only or read-write, per role or in every "
        "role; never created or deleted by tfcompile.",
    )


class TensorBoard(SpecModel):
    """A TensorBoard Deployment and Service reading logs from the shared volume."""

    log_dir: AbsolutePath
    service_type: ServiceType = ServiceType.CLUSTER_IP
    image: NonEmptyText | None = None
    load_balancer_source_ranges: list[NonEmptyText] = Field(
        default_factory=_no_items,
        description="With serviceType LoadBalancer: the client CIDRs allowed (the Service's "
        "loadBalancerSourceRanges).",
    )
    pod_template: PodTemplate | None = Field(
        default=None,
        description="A pod template fragment for the TensorBoard pod (resources, nodeSelector, "
        "tolerations, volumes, sidecars, …), merged as a role's podTemplate is. The container "
        "named `tensorboard` is tfcompile's.",
    )


class Compatibility(StrEnum):
    """An earlier tool whose scripts read variables of their own (set only for jobs that ask)."""

    TF_SPAWNER = "tf-spawner"
    ELASTICDL = "elasticdl"
    TF1_FLAGS = "tf1-flags"


class OnSuccess(StrEnum):
    """What the job's pods do once the job has succeeded."""

    IDLE = "idle"
    RELEASE = "release"


ExitCode = Annotated[StrictInt, Field(ge=1, le=255)]


class FailurePolicy(SpecModel):
    """When a failing task stops retrying: it records the failure and stops training."""

    max_restarts: Annotated[StrictInt, Field(ge=0, le=100000)] = Field(
        default=10,
        description="Restarts of a task's training command, in one pod, before it stops.",
    )
    do_not_retry_exit_codes: list[ExitCode] = Field(
        default_factory=_no_items,
        description="Exit codes that mean a permanent failure: the task stops at once.",
    )


class Goal(StrEnum):
    """Which end of a sweep's objective metric is best."""

    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


SweepValue = Annotated[str, StringConstraints(strict=True, max_length=256)]
MetricName = Annotated[str, StringConstraints(strict=True, pattern=METRIC_NAME_PATTERN)]


class Objective(SpecModel):
    """How `tfcompile status` ranks a sweep's trials: by one metric of their results."""

    metric: MetricName
    goal: Goal = Goal.MAXIMIZE


class Sweep(SpecModel):
    """A grid of values: the job compiles to one trial (a job of its own) per point."""

    parameters: dict[EnvironmentName, list[SweepValue]] = Field(
        description="Environment variable -> its values (strings); every combination is a "
        "trial, whose training sees one value of each as that variable ($(NAME) in args).",
    )
    objective: Objective | None = Field(
        default=None,
        description="The metric of the trials' results (the JSON object a training writes at "
        "$TFCOMPILE_RESULT_FILE) by which `tfcompile status` puts the best trial first.",
    )


class Metadata(SpecModel):
    name: JobName
    namespace: NamespaceName | None = None
    labels: dict[LabelKey, LabelValue] = Field(default_factory=_no_entries)
    annotations: dict[LabelKey, Text] = Field(default_factory=_no_entries)


class JobSpec(SpecModel):
    image: NonEmptyText
    command: list[NonEmptyText] | None = None
    args: list[Text] = Field(default_factory=_no_items)
    script: NonEmptyText | None = Field(
        default=None,
        description="A file, or a folder (a training package: every file, nested folders kept), "
        "relative to the job file and inside its repository, shipped in a ConfigMap mounted at "
        "/opt/tfcompile/script/. Without command a file runs as `python "
        "/opt/tfcompile/script/<file>`; a folder needs command to name its entrypoint.",
    )
    env: dict[EnvironmentName, EnvironmentValue] = Field(default_factory=_no_entries)
    env_from: list[EnvironmentSource] = Field(default_factory=_no_items)
    port: Annotated[StrictInt, Field(ge=1, le=65535)] = 2222
    strategy: Strategy | None = None
    roles: Roles
    storage: Storage = Field(default_factory=Storage)
    tensorboard: TensorBoard | None = None
    overlays: list[OverlayName] = Field(default_factory=_no_items)
    network_policy: NetworkPolicySettings = Field(
        default_factory=NetworkPolicySettings,
        description="Emit a NetworkPolicy admitting this job's own pods on every port (false: "
        "none); `{ingress: [...]}` admits more sources.",
    )
    suspend: StrictBool = False
    compatibility: list[Compatibility] = Field(
        default_factory=_no_items,
        description="Earlier tools whose scripts run unchanged: tf-spawner sets WORKER_NUMBER "
        "and TOT_WORKERS, elasticdl NUM_WORKERS, tf1-flags JOB_NAME, PS_HOSTS and WORKER_HOSTS.",
    )
    not_secret: list[NotSecretName] = Field(
        default_factory=_no_items,
        description=(
            "Names that only look secret (an env variable, label or annotation key, or option "
            "such as a tokenizer's PAD_TOKEN) whose literal values are allowed. Names match by "
            "their words (DB_TOKEN = db-token = dbToken). Values shaped like credentials are "
            "refused all the same."
        ),
    )
    pod_template: PodTemplate | None = None
    scheduling: Scheduling = Field(default_factory=Scheduling)

    def network_policy_settings(self) -> NetworkPolicySettings | None:
        """The NetworkPolicy's settings, or None when the job asks for none."""
        return self.network_policy if self.network_policy.enabled else None
    on_success: OnSuccess = Field(
        default=OnSuccess.IDLE,
        description="idle: succeeded pods stay and idle; release: the job's own pods scale "
        "its StatefulSets to 0 once it has succeeded (or failed for good).",
    )
    failure_policy: FailurePolicy | None = Field(
        default=None,
        description="Stop retrying a failing task (omitted: the kubelet restarts it forever).",
    )
    sweep: Sweep | None = Field(
        default=None,
        description="A hyper-parameter grid: one job (trial) per point, named <name>-<digest "
        "of the point's values>, each with its own output directory.",
    )

    def resolved_strategy(self) -> Strategy:
        """The strategy given, or the one inferred: ParameterServer when the job has ps."""
        if self.strategy is not None:
            return self.strategy
        if self.roles.ps is not None:
            return Strategy.PARAMETER_SERVER
        return Strategy.MULTI_WORKER_MIRRORED


class TrainingJob(SpecModel):
    """A distributed TensorFlow training job, compiled by tfcompile into Kubernetes YAML."""

    model_config = ConfigDict(title="TrainingJob")

    api_version: Literal["tfcompile.dev/v1alpha1"]
    kind: Literal["TrainingJob"]
    metadata: Metadata
    spec: JobSpec
