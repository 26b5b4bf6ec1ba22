"""Every object of every example, rendered with its overlays, is valid Kubernetes: strictly
(unknown fields are errors) against the schemas of 1.28, the oldest with the pod-index label, and
of the newest version the kubernetes-validate package ships."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
from kubernetes_validate import utils as schema_utilities

from tests.conftest import OUTPUT, rendered_output
from tfcompile.compiler.yaml_input import read_manifests

EXAMPLES = sorted(p.name for p in OUTPUT.iterdir() if p.is_dir())
VERSIONS = ["1.28.0", schema_utilities.latest_version()]


@pytest.fixture(autouse=True, scope="module")
def _schemas_read_once() -> Iterator[None]:
    """kubernetes-validate reads a kind's schema and every definition (megabytes of JSON) for
    each object it validates; these tests read each file once (validation reads, never
    changes, them)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(schema_utilities, "schema_contents",
                      functools.cache(schema_utilities.schema_contents))
        yield


def rendered(example: str) -> list[dict[str, Any]]:
    """Kustomize's output read as Kubernetes reads it (a revision such as `80524764e848`,
    which kustomize writes unquoted, is a string there, not an overflowing float)."""
    return [d for d in read_manifests(rendered_output(example)) if d]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_every_rendered_object_validates_strictly(example: str, version: str) -> None:
    objects = rendered(example)
    assert len(objects) >= (2 if example == "sweep-tensorboard" else 4)  # its Deployment, Service
    errors = []
    for item in objects:
        try:
            kubernetes_validate.validate(item, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            errors.append(f"{item['kind']}/{item['metadata']['name']}: {error.message} at "
                          f"{'.'.join(str(p) for p in error.path)}")
    assert not errors, "\n".join(errors)


def test_strict_validation_would_catch_an_unknown_field() -> None:
    statefulset = next(o for o in rendered("mnist") if o["kind"] == "StatefulSet")
    statefulset["spec"]["template"]["spec"]["containers"][0]["gpus"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(statefulset, VERSIONS[-1], strict=True)
