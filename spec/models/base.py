"""Field types and the base model every part of the spec shares: the patterns of Kubernetes
names and quantities, the empty-container factories, and `SpecModel` (strict, camelCase, closed).

The annotations are evaluated as the classes are made (no `from __future__ import annotations`),
and empty containers come from the factories below rather than `dict` and `list`: pydantic reads
a factory's signature, and a builtin's means parsing its text signature with the tokenizer. Both
keep every `build` from paying for what changes nothing in the models.
"""

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    StringConstraints,
)
from pydantic.alias_generators import to_camel

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
    """Base of every spec model: camelCase keys in YAML, unknown keys refused, immutable.

    Only the camelCase name is read: `mount_path` is an unknown field (with "did you mean
    'mountPath'?"), as the JSON Schema says, so one spelling of a field is in every job and
    every editor agrees with the build."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        frozen=True,
    )
