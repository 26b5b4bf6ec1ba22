"""The published JSON Schema and the command's behaviour at its edges."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from ruamel.yaml import YAML

from tests.conftest import EXAMPLES, REPOSITORY, Result
from tfcompile.spec.schema import SCHEMA_FILE, committed_schema_text, schema_text


def test_committed_schema_is_fresh() -> None:
    assert (REPOSITORY / "spec" / SCHEMA_FILE).read_text() == schema_text(), (
        "spec/trainingjob.schema.json is stale: run `tfcompile schema > "
        "spec/trainingjob.schema.json`"
    )
    assert committed_schema_text() == schema_text()


def test_schema_command_prints_the_schema(run_cli: Callable[..., Result]) -> None:
    result = run_cli("schema")
    assert result.status == 0
    assert json.loads(result.stdout)["title"] == "TrainingJob"


def test_examples_declare_and_satisfy_the_schema() -> None:
    schema = json.loads(schema_text())
    validator = jsonschema.validators.validator_for(schema)
    validator.check_schema(schema)  # once: `jsonschema.validate` checks it for every instance
    for job in sorted(EXAMPLES.glob("*/job.yaml")):
        first_line = job.read_text().splitlines()[0]
        assert first_line == "# yaml-language-server: $schema=../../spec/trainingjob.schema.json"
        validator(schema).validate(YAML(typ="safe").load(job.read_text()))


def test_schema_refuses_what_the_compiler_refuses() -> None:
    schema = json.loads(schema_text())
    document = YAML(typ="safe").load((EXAMPLES / "mnist" / "job.yaml").read_text())
    document["spec"]["roles"]["worker"]["gpu"] = 1
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(document))
    assert errors, "an unknown field must be a schema error too"


@pytest.mark.slow
def test_console_script_runs_without_traceback_on_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "job.yaml"
    bad.write_text("apiVersion: tfcompile.dev/v1alpha1\nkind: TrainingJob\nmetadata: {}\n")
    process = subprocess.run(
        [sys.executable, "-m", "tfcompile.compiler.cli", "build", str(bad), "-o",
         str(tmp_path / "out")], capture_output=True, text=True, check=False)
    assert process.returncode == 2
    assert "metadata.name: required field is missing" in process.stderr
    assert "spec: required field is missing" in process.stderr
    assert "Traceback" not in process.stderr


def test_unknown_command_is_a_usage_error(run_cli: Callable[..., Result]) -> None:
    try:
        status = run_cli("compile").status
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    assert status == 2


def test_no_job_found_is_said_and_is_not_an_error_when_nothing_is_to_prune(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """A repository whose last job was removed (and pruned) still passes CI; a mistyped input
    is still an error (no such file or directory)."""
    (tmp_path / "empty").mkdir()
    result = run_cli("build", str(tmp_path / "empty"), "-o", str(tmp_path / "out"))
    assert result.status == 0
    assert "no job spec (kind: TrainingJob) found" in result.stderr
    assert "nothing to build and nothing to prune" in result.stderr
    # The output directory holds its README alone: the path Flux reads stays in git.
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["README.md"]
    result = run_cli("build", str(tmp_path / "mistyped"), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "no such file or directory" in result.stderr


def test_validate_command_fails_on_a_hostile_overlay_and_names_the_object(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    output = tmp_path / "output"
    assert run_cli("build", str(EXAMPLES / "mnist"), "-o", str(output)).status == 0
    assert run_cli("validate", "-o", str(output)).status == 0
    user = tmp_path / "user"
    user.mkdir()
    (user / "kustomization.yaml").write_text("resources: [../output/mnist]\nnamePrefix: team-\n")
    result = run_cli("validate", str(user))
    assert result.status == 1
    assert "StatefulSet/team-mnist-worker" in result.stdout
    assert "mnist-worker-0.mnist-worker:2222" in result.stdout
    assert "Traceback" not in result.stderr


def test_validate_refuses_a_kubernetes_version_without_the_pod_index_label(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    output = tmp_path / "output"
    assert run_cli("build", str(EXAMPLES / "mnist"), "-o", str(output)).status == 0
    result = run_cli("validate", "-o", str(output), "--kubernetes-version", "1.27")
    assert result.status == 2
    assert "1.28" in result.stderr


def test_render_prints_the_manifests_a_controller_applies(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    output = tmp_path / "output"
    assert run_cli("build", str(EXAMPLES / "parameter-server"), "-o", str(output)).status == 0
    result = run_cli("render", str(output / "parameter-server"))
    assert result.status == 0
    documents = [d for d in YAML(typ="safe").load_all(result.stdout) if d]
    assert len(documents) == 18
    claim = next(d for d in documents if d["kind"] == "PersistentVolumeClaim")
    assert claim["spec"]["storageClassName"] == "tfcompile-azurefile-nfs"
    missing = run_cli("render", str(tmp_path / "nowhere"))
    assert missing.status == 1 and "Traceback" not in missing.stderr
