"""What a reviewer reads: a one-role job and a 3x3 sweep stay short, each directory complete.

The launcher, the same program in every job directory, is shipped as one line of base64
(`objects/builders/launcher_config_map.py` says why and what was measured), so the lines a
pull request
shows are the job's own. The budgets are the committed output's (which `test_golden` holds
equal to what the examples compile to): examples/mnist at most 700 lines, the nine trials of
examples/sweep at most 4,000 together; each directory still holds every ConfigMap its pods
mount, so it applies on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.conftest import EXAMPLES, OUTPUT, job_directories
from tfcompile.compiler.objects.labels import SWEEP_LABEL
from tfcompile.spec.loading import load_jobs

ONE_ROLE_JOB_LINES = 700
SWEEP_LINES = 4_000


def lines(directory: Path) -> int:
    return sum(len(path.read_text().splitlines()) for path in directory.iterdir())


def documents(directory: Path) -> list[dict[str, Any]]:
    reader = YAML(typ="safe")
    return [reader.load(path.read_text()) for path in sorted(directory.glob("*.yaml"))
            if path.name != "kustomization.yaml"]


def sweep_directories() -> list[Path]:
    """The directories of examples/sweep's trials and its TensorBoard: their objects carry the
    sweep's job name."""
    (loaded,) = load_jobs(EXAMPLES / "sweep" / "job.yaml")
    return [directory for directory in job_directories(OUTPUT)
            if documents(directory)[0]["metadata"]["labels"].get(SWEEP_LABEL)
            == loaded.job.metadata.name]


def test_a_one_role_job_compiles_to_at_most_700_lines() -> None:
    assert lines(OUTPUT / "mnist") <= ONE_ROLE_JOB_LINES


def test_the_3x3_sweep_compiles_to_at_most_4000_lines() -> None:
    """Its nine trials and its one TensorBoard together."""
    directories = sweep_directories()
    assert sorted(directory.name.endswith("-tensorboard") for directory in directories) == [
        False] * 9 + [True]
    assert sum(lines(directory) for directory in directories) <= SWEEP_LINES


def test_each_job_directory_holds_the_config_maps_its_pods_mount() -> None:
    for directory in [OUTPUT / "mnist", *sweep_directories()]:
        objects = documents(directory)
        kustomization = YAML(typ="safe").load((directory / "kustomization.yaml").read_text())
        assert all((directory / resource).is_file() for resource in kustomization["resources"])
        config_maps = {item["metadata"]["name"] for item in objects if item["kind"] == "ConfigMap"}
        for item in objects:
            if item["kind"] == "StatefulSet":
                mounted = {volume["configMap"]["name"]
                           for volume in item["spec"]["template"]["spec"]["volumes"]
                           if "configMap" in volume}
                assert mounted and mounted <= config_maps, directory.name
