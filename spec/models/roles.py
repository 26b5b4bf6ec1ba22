"""The roles of a job and what each pod runs with: the strategy, the role names, environment
values, resources, the pod template and the job's NetworkPolicy, kept apart from the job itself
so that a role's fields read on one screen.
"""

from enum import StrEnum
from typing import Annotated, Any

from pydantic import (
    Field,
    GetJsonSchemaHandler,
    StrictBool,
    StrictInt,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from ..pod_template import INGRESS_RULE_DEFINITION, ROOT_DEFINITION, reference_schema
from .base import (
    ConfigKey,
    EnvironmentName,
    NonEmptyText,
    ObjectName,
    Quantity,
    ResourceName,
    SpecModel,
    Text,
    _no_entries,
    _no_items,
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
