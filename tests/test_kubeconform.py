"""kubeconform, the validator the scaffold's CI runs, accepts every example strictly, offline.

kubeconform reads the schemas `validate` uses, prepared once into its layout, and nothing else:
the prepared files refer only to themselves, so there is nothing to download. It is checked for
the oldest supported and the default Kubernetes version, and it must be able to fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import OUTPUT
from tfcompile.compiler.checking.validation.kubeconform_schemas import (
    prepare,
    standalone_schemas,
)
from tfcompile.compiler.kubernetes_versions import (
    DEFAULT_KUBERNETES_VERSION,
    OLDEST_KUBERNETES_VERSION,
    kubeconform_version,
    schema_directory,
)
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests

VERSIONS = [OLDEST_KUBERNETES_VERSION, DEFAULT_KUBERNETES_VERSION]
EXAMPLES = sorted(path.name for path in OUTPUT.iterdir() if path.is_dir())


def kubeconform_check(kubeconform: str, location: str, version: str,
                      manifests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubeconform, "-strict", "-summary", "-kubernetes-version", kubeconform_version(version),
         "-schema-location", location, "-"],
        input=manifests, capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("example", EXAMPLES)
def test_kubeconform_accepts_every_example_strictly(
    kubeconform: str, kubeconform_schema_location: str, example: str, version: str
) -> None:
    rendered = render(OUTPUT / example)  # `kubectl kustomize` (or `kustomize build`)
    objects = len(parse_manifests(rendered))
    result = kubeconform_check(kubeconform, kubeconform_schema_location, version, rendered)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (f"Summary: {objects} resources found parsing stdin - Valid: {objects}, Invalid: 0, "
            "Errors: 0, Skipped: 0") in result.stdout


@pytest.mark.slow
def test_kubeconform_refuses_an_unknown_field(
    kubeconform: str, kubeconform_schema_location: str
) -> None:
    rendered = render(OUTPUT / "mnist").replace("  serviceName: ", "  serviceNam: ", 1)
    result = kubeconform_check(kubeconform, kubeconform_schema_location,
                               DEFAULT_KUBERNETES_VERSION, rendered)
    assert result.returncode == 1
    assert "StatefulSet mnist-worker is invalid" in result.stdout
    assert "additional properties 'serviceNam' not allowed" in result.stdout


@pytest.mark.slow
def test_the_kubernetes_version_chooses_the_schemas(
    kubeconform: str, kubeconform_schema_location: str
) -> None:
    """Pod-level resources exist from Kubernetes 1.32 on: 1.33 accepts them, 1.28 does not."""
    pod = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
           "  resources: {limits: {cpu: '1'}}\n  containers: [{name: c, image: busybox}]\n")
    newest = kubeconform_check(kubeconform, kubeconform_schema_location,
                               DEFAULT_KUBERNETES_VERSION, pod)
    assert newest.returncode == 0, newest.stdout
    oldest = kubeconform_check(kubeconform, kubeconform_schema_location,
                               OLDEST_KUBERNETES_VERSION, pod)
    assert oldest.returncode == 1
    assert "additional properties 'resources' not allowed" in oldest.stdout


def test_prepared_schemas_refer_to_nothing_outside_themselves() -> None:
    """No `$id` to resolve against and every `$ref` inside the file: kubeconform, pointed at
    these files alone, has nothing to download."""
    for version in VERSIONS:
        schemas = standalone_schemas(schema_directory(version))
        assert "statefulset-apps-v1.json" in schemas and "service-v1.json" in schemas
        assert "container-v1.json" not in schemas  # fragments are not kinds
        for name, schema in schemas.items():
            text = json.dumps(schema)
            assert '"$id"' not in text, name
            references = set(text.split('"$ref": "')[1:])
            for reference in references:
                target = reference.split('"', 1)[0]
                assert target.startswith("#/$defs/"), (name, target)
                assert target.removeprefix("#/$defs/") in schema["$defs"], (name, target)


def test_prepared_schemas_are_written_once_per_schema_release(tmp_path: Path) -> None:
    root = prepare(tmp_path, [DEFAULT_KUBERNETES_VERSION])
    written = root / f"v{kubeconform_version(DEFAULT_KUBERNETES_VERSION)}-standalone-strict"
    marker = written / "statefulset-apps-v1.json"
    before = marker.stat().st_mtime_ns
    assert prepare(tmp_path, [DEFAULT_KUBERNETES_VERSION, DEFAULT_KUBERNETES_VERSION]) == root
    assert marker.stat().st_mtime_ns == before
    assert [p.name for p in tmp_path.rglob(".*")] == []  # no temporary directory left
    assert root.name.startswith("kubernetes-validate-")


SCHEMAS_COMMAND = "tfcompile.compiler.checking.validation.kubeconform_schemas"


@pytest.mark.slow
def test_the_command_prints_the_schema_location(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", SCHEMAS_COMMAND, str(tmp_path),
         "--kubernetes-version", OLDEST_KUBERNETES_VERSION],
        capture_output=True, text=True, check=True)
    [location] = result.stdout.splitlines()
    assert location.startswith(f"{tmp_path}/kubernetes-validate-")
    assert location.endswith("/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}"
                             "/{{ .ResourceKind }}{{ .KindSuffix }}.json")
    [prepared] = [p.name for p in Path(location.split("/{{")[0]).iterdir()]
    assert prepared == "v1.28.0-standalone-strict"
    refused = subprocess.run(
        [sys.executable, "-m", SCHEMAS_COMMAND, str(tmp_path),
         "--kubernetes-version", "1.27"], capture_output=True, text=True, check=False)
    assert refused.returncode == 2
    assert "Kubernetes 1.27 is too old" in refused.stderr
    assert "Traceback" not in refused.stderr
