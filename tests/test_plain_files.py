"""The in-process render of a kustomization that only lists files gives what Kustomize gives.

`validate` reads a job's objects without starting Kustomize when its kustomization is the one
`tfcompile build` writes (a list of files beside it). These tests run the real `kubectl
kustomize` (or `kustomize build`) on every compiled example and on generated jobs and compare
the two renders object by object and in order; and they show that every other shape (a hostile
or hand-edited directory) is left to Kustomize, so that `validate` renders it or fails with
Kustomize's own message.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import OUTPUT, job_text
from tfcompile.compiler.checking.validation import validate
from tfcompile.compiler.cli import main
from tfcompile.compiler.rendering.kustomize import RenderError, render
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.compiler.rendering.plain_files import render_plain_files

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_NAMES = sorted(path.parent.name for path in EXAMPLES.glob("*/job.yaml"))

GENERATED = {
    "many-roles": job_text("many-roles", metadata_lines="namespace: ml\nlabels: {team: a}",
                           roles="chief: {replicas: 1}\nworker: {replicas: 7}\n"
                                 "ps: {replicas: 3}\nevaluator: {replicas: 1}\n"),
    "suspended": job_text("suspended", spec_lines="suspend: true\n"
                          "storage:\n  shared: {mountPath: /mnt/shared, size: 10Gi}\n"),
    "tensorboard": job_text("tensorboard", spec_lines=(
        "storage:\n  shared: {mountPath: /mnt/shared, size: 5Gi}\n"
        "tensorboard: {logDir: /mnt/shared/logs, serviceType: LoadBalancer,\n"
        "  loadBalancerSourceRanges: [10.0.0.0/8]}\n")),
    "sweep": job_text("sweep", spec_lines=(
        "sweep:\n  parameters:\n    learning-rate: ['0.1', '0.01']\n    batch: ['32', '64']\n")),
}


def same_as_kustomize(directory: Path) -> None:
    plain = render_plain_files(directory)
    assert plain is not None, directory
    rendered = parse_manifests(render(directory))
    assert [(item["kind"], item["metadata"]["name"]) for item in plain.objects] == [
        (item["kind"], item["metadata"]["name"]) for item in rendered]
    assert plain.objects == rendered
    assert parse_manifests(plain.text) == rendered


def build(job: Path, output: Path) -> list[Path]:
    assert main(["build", str(job), "-o", str(output)]) == 0
    return sorted(path for path in output.iterdir() if path.is_dir())


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_every_example_renders_in_process_as_kustomize_renders_it(example: str,
                                                                   tmp_path: Path) -> None:
    spec = (EXAMPLES / example / "job.yaml").read_text()
    # Components are left to Kustomize; the same job without them is rendered in process.
    # (an internet-facing TensorBoard needs the azure component's internal load balancer).
    without_components = "\n".join(
        line.replace("serviceType: LoadBalancer", "serviceType: ClusterIP")
        for line in spec.splitlines() if not line.lstrip().startswith("overlays:"))
    (tmp_path / "job.yaml").write_text(without_components + "\n")
    for source in sorted((EXAMPLES / example).iterdir()):
        if source.name != "job.yaml" and source.is_file():
            shutil.copy(source, tmp_path / source.name)
    jobs = build(tmp_path / "job.yaml", tmp_path / "output")
    assert jobs
    for directory in jobs:
        same_as_kustomize(directory)


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_jobs_render_in_process_as_kustomize_renders_them(name: str,
                                                                    tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(GENERATED[name])
    jobs = build(tmp_path / "job.yaml", tmp_path / "output")
    assert len(jobs) == (4 if name == "sweep" else 1)
    for directory in jobs:
        same_as_kustomize(directory)


def test_the_committed_output_renders_in_process_unless_it_has_components() -> None:
    for directory in sorted(path for path in OUTPUT.iterdir() if path.is_dir()):
        if "components:" in (directory / "kustomization.yaml").read_text():
            assert render_plain_files(directory) is None
        else:
            same_as_kustomize(directory)


@pytest.fixture
def job(tmp_path: Path) -> Path:
    directory = tmp_path / "job"
    shutil.copytree(OUTPUT / "mnist", directory)
    return directory


def resources(directory: Path) -> list[str]:
    return [line[2:] for line in (directory / "kustomization.yaml").read_text().splitlines()
            if line.startswith("- ")]


def set_resources(directory: Path, names: list[str], extra: str = "") -> None:
    (directory / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" + extra
        + "resources:\n" + "".join(f"- {name}\n" for name in names))


def refused_then_kustomize_decides(directory: Path) -> str | None:
    """The in-process render refuses the directory; Kustomize's verdict: its error message,
    or None when it renders it (and `validate` then reports on Kustomize's render)."""
    assert render_plain_files(directory) is None
    try:
        rendered = render(directory)
    except RenderError as error:
        with pytest.raises(RenderError) as raised:
            validate(directory)
        assert str(raised.value) == str(error)
        return str(error)
    assert validate(directory).rendered == rendered
    return None


def test_an_object_id_twice_is_kustomizes_error(job: Path) -> None:
    service = next(job.glob("service-*.yaml"))
    shutil.copy(service, job / "copy.yaml")
    set_resources(job, [*resources(job), "copy.yaml"])
    message = refused_then_kustomize_decides(job)
    assert message is not None and "already registered id" in message


def test_the_same_id_in_the_default_namespace_and_none_is_kustomizes_error(job: Path) -> None:
    service = next(job.glob("service-*.yaml"))
    text = service.read_text()
    (job / "copy.yaml").write_text(text.replace("metadata:\n", "metadata:\n  namespace: default\n",
                                                1))
    set_resources(job, [*resources(job), "copy.yaml"])
    assert refused_then_kustomize_decides(job) is not None


def test_a_file_listed_twice_is_left_to_kustomize(job: Path) -> None:
    names = resources(job)
    set_resources(job, [*names, names[0]])
    assert refused_then_kustomize_decides(job) is not None


def test_a_file_that_is_not_yaml_is_left_to_kustomize(job: Path) -> None:
    (job / "broken.yaml").write_text("kind: [unclosed\n")
    set_resources(job, [*resources(job), "broken.yaml"])
    assert refused_then_kustomize_decides(job) is not None


def test_a_file_of_several_documents_is_rendered_by_kustomize(job: Path) -> None:
    names = resources(job)
    first, second = (job / names[0]).read_text(), (job / names[1]).read_text()
    (job / "both.yaml").write_text(first + "---\n" + second)
    set_resources(job, ["both.yaml", *names[2:]])
    assert refused_then_kustomize_decides(job) is None


def test_a_document_list_is_rendered_by_kustomize(job: Path) -> None:
    names = resources(job)
    items = "".join("- " + (job / name).read_text().replace("\n", "\n  ").rstrip() + "\n"
                    for name in names[:2])
    (job / "list.yaml").write_text(f"apiVersion: v1\nkind: List\nitems:\n{items}")
    set_resources(job, ["list.yaml", *names[2:]])
    assert refused_then_kustomize_decides(job) is None


@pytest.mark.parametrize("name", ["../mnist/service.yaml", "sub/service.yaml", "service.yml",
                                  "https://example.com/service.yaml", "."])
def test_a_name_that_is_not_a_plain_file_beside_it_is_left_to_kustomize(job: Path,
                                                                         name: str) -> None:
    set_resources(job, [*resources(job), name])
    refused_then_kustomize_decides(job)


def test_a_linked_file_is_left_to_kustomize(job: Path) -> None:
    names = resources(job)
    (job / names[0]).rename(job.parent / names[0])
    os.symlink(job.parent / names[0], job / names[0])
    message = refused_then_kustomize_decides(job)  # Kustomize refuses a link out of its root
    assert message is not None and names[0] in message


def test_a_linked_directory_is_left_to_kustomize(job: Path) -> None:
    os.symlink(job, job.parent / "link")
    assert render_plain_files(job.parent / "link") is None


def test_any_other_field_is_left_to_kustomize(job: Path) -> None:
    set_resources(job, resources(job), extra="namePrefix: team-\n")
    assert refused_then_kustomize_decides(job) is None
    assert all(item["metadata"]["name"].startswith("team-") for item in validate(job).objects)


def test_a_second_kustomization_file_is_left_to_kustomize(job: Path) -> None:
    (job / "kustomization.yml").write_text("resources: []\n")
    assert render_plain_files(job) is None
    with pytest.raises(RenderError, match="multiple kustomization files"):
        validate(job)


def test_values_kustomize_may_write_back_differently_are_left_to_it(job: Path) -> None:
    service = next(job.glob("service-*.yaml"))
    service.write_text(service.read_text().replace(
        "metadata:\n", "metadata:\n  annotations: {when: 2024-01-01, empty: null}\n", 1))
    assert refused_then_kustomize_decides(job) is None
