"""The JSON Schema of `job.yaml`, for editors (yaml-language-server) and other tools.

It is generated from the models, committed as `trainingjob.schema.json`, and a test fails when the
committed copy is stale, so editor completion never disagrees with the compiler.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from .models import TrainingJob
from .pod_template import with_kubernetes_definitions

SCHEMA_FILE = "trainingjob.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict[str, Any]:
    schema = TrainingJob.model_json_schema(by_alias=True, mode="validation")
    # `podTemplate` and `networkPolicy.ingress` refer to Kubernetes' own definitions.
    return {"$schema": DIALECT, **with_kubernetes_definitions(schema)}


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=False) + "\n"


def committed_schema_text() -> str:
    """The schema file shipped with the package."""
    return resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
