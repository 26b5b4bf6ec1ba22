"""`validate` reads a plain kustomization's objects itself, exactly as Kustomize renders them.

The in-process rendering (compiler/rendering/plain_kustomization.py) is used only for a
kustomization that lists files of one object each; these tests hold it to Kustomize's own output
(`kubectl kustomize`, parsed the same way), object by object and in order, over every example
and jobs of every shape tfcompile writes, and show that anything else goes to Kustomize.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import OUTPUT, REPOSITORY, job_text, rendered_output
from tfcompile.compiler.checking.validation.validator import validate
from tfcompile.compiler.cli import main
from tfcompile.compiler.rendering.kustomize import RenderError
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.compiler.rendering.plain_kustomization import render_plain

ROLES = "chief: {replicas: 1}\nworker: {replicas: 3}\nps: {replicas: 2}\nevaluator: {replicas: 1}"
SHAPES = {
    "every-role": ("", ROLES),
    "namespaced": ("", ROLES),
    "suspended": ("suspend: true\nonSuccess: release\nonFailure: release\ndeadline: 2h\n",
                  ROLES),
    "tensorboard": ("tensorboard: {logDir: /mnt/shared/logs}\n"
                    "storage: {shared: {mountPath: /mnt/shared, size: 1Gi}}\n", ROLES),
    "volcano": ("scheduling: {gang: volcano, queue: research}\n", ROLES),
    "coscheduling": ("scheduling: {gang: coscheduling}\n", "worker: {replicas: 2}"),
    "kueue": ("scheduling: {gang: kueue, queue: research}\n", ROLES),
    "one-pod": ("", "worker: {replicas: 1}"),
}


def kustomize_objects(directory: Path) -> list[dict[str, object]]:
    rendered = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True,
                              text=True, check=True, timeout=120).stdout
    return parse_manifests(rendered)


def compiled_shapes(tmp_path: Path) -> list[Path]:
    jobs = tmp_path / "jobs"
    for name, (spec_lines, roles) in SHAPES.items():
        folder = jobs / name
        folder.mkdir(parents=True)
        metadata = "namespace: research\n" if name == "namespaced" else ""
        (folder / "job.yaml").write_text(job_text(name, metadata_lines=metadata,
                                                  spec_lines=spec_lines, roles=roles))
    assert main(["build", str(jobs), "-o", str(tmp_path / "output")]) == 0
    return sorted(path for path in (tmp_path / "output").iterdir() if path.is_dir())


def test_every_example_and_shape_renders_as_kustomize_renders_it(tmp_path: Path) -> None:
    examples = sorted(path for path in (REPOSITORY / "output").iterdir()
                      if (path / "kustomization.yaml").is_file())
    with_components = [path for path in examples
                       if "components:" in (path / "kustomization.yaml").read_text()]
    assert with_components and all(render_plain(path) is None for path in with_components)
    directories = [*(path for path in examples if path not in with_components),
                   *compiled_shapes(tmp_path)]
    assert len(directories) >= len(SHAPES) + 4
    for directory in directories:
        kustomized = (parse_manifests(rendered_output(directory.name))
                      if directory.parent == OUTPUT else kustomize_objects(directory))
        assert render_plain(directory) == kustomized, directory


def plain_job(tmp_path: Path) -> Path:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.yaml").write_text(job_text("demo"))
    assert main(["build", str(jobs / "job.yaml"), "-o", str(tmp_path / "output")]) == 0
    directory = tmp_path / "output" / "demo"
    assert render_plain(directory) is not None
    return directory


def add_to_kustomization(directory: Path, lines: str) -> None:
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + lines)


def _service(name: str, namespace: str = "") -> str:
    namespaced = f"  namespace: {namespace}\n" if namespace else ""
    return f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n{namespaced}"


def _edit_components(directory: Path) -> None:
    add_to_kustomization(directory, "components:\n- ../../overlays/gpu\n")


def _edit_prefix(directory: Path) -> None:
    add_to_kustomization(directory, "namePrefix: team-\n")


def _edit_subdirectory(directory: Path) -> None:
    (directory / "more").mkdir()
    (directory / "more" / "extra.yaml").write_text(_service("extra"))
    add_to_kustomization(directory, "- more/extra.yaml\n")


def _edit_link(directory: Path) -> None:
    (directory.parent / "outside.yaml").write_text(_service("outside"))
    os.symlink(directory.parent / "outside.yaml", directory / "linked.yaml")
    add_to_kustomization(directory, "- linked.yaml\n")


def _edit_two_documents(directory: Path) -> None:
    (directory / "two.yaml").write_text(_service("one") + "---\n" + _service("two"))
    add_to_kustomization(directory, "- two.yaml\n")


def _edit_two_documents_and_none(directory: Path) -> None:
    """As many documents as files, but not one in each (the file of none listed first)."""
    _edit_two_documents(directory)
    (directory / "empty.yaml").write_text("# nothing\n")
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("resources:\n",
                                                               "resources:\n- empty.yaml\n"))


def _edit_empty(directory: Path) -> None:
    (directory / "empty.yaml").write_text("# nothing\n")
    add_to_kustomization(directory, "- empty.yaml\n")


def _edit_list(directory: Path) -> None:
    (directory / "list.yaml").write_text(
        "apiVersion: v1\nkind: List\nmetadata:\n  name: several\nitems: []\n")
    add_to_kustomization(directory, "- list.yaml\n")


def _edit_namespaces(directory: Path) -> None:
    (directory / "elsewhere.yaml").write_text(_service("elsewhere", "other"))
    add_to_kustomization(directory, "- elsewhere.yaml\n")


def _edit_listed_twice(directory: Path) -> None:
    add_to_kustomization(directory, "- service-demo-worker.yaml\n")


def _edit_second_file_name(directory: Path) -> None:
    shutil.copyfile(directory / "kustomization.yaml", directory / "kustomization.yml")


def _edit_api_version(directory: Path) -> None:
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("v1beta1", "v1alpha1"))


def _edit_two_versions(directory: Path) -> None:
    (directory / "autoscaling.yaml").write_text(
        "apiVersion: autoscaling/v1\nkind: StatefulSet\nmetadata:\n  name: other\n")
    add_to_kustomization(directory, "- autoscaling.yaml\n")


def _edit_not_utf8(directory: Path) -> None:
    (directory / "latin.yaml").write_bytes(b"apiVersion: v1\nkind: Service\nmetadata:\n"
                                           b"  name: caf\xe9\n")
    add_to_kustomization(directory, "- latin.yaml\n")


def _edit_values(directory: Path) -> None:
    (directory / "annotated.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: annotated\n"
        "  annotations: {mode: 0755, empty: null}\n")
    add_to_kustomization(directory, "- annotated.yaml\n")


EDITS = {
    "components": _edit_components, "a field Kustomize acts on": _edit_prefix,
    "a file in a subdirectory": _edit_subdirectory, "a link": _edit_link,
    "two documents in a file": _edit_two_documents, "no document": _edit_empty,
    "two documents in one file and none in another": _edit_two_documents_and_none,
    "a List": _edit_list, "two namespaces": _edit_namespaces,
    "a file listed twice": _edit_listed_twice, "a second kustomization file":
    _edit_second_file_name, "another kustomization version": _edit_api_version,
    "one kind under two versions": _edit_two_versions, "not UTF-8": _edit_not_utf8,
    "values Kustomize writes back as other text": _edit_values,
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_anything_but_a_plain_list_of_files_is_left_to_kustomize(
        tmp_path: Path, edit: Callable[[Path], None]) -> None:
    directory = plain_job(tmp_path)
    edit(directory)
    assert render_plain(directory) is None


def test_two_objects_of_one_kind_and_name_get_kustomizes_own_error(tmp_path: Path) -> None:
    directory = plain_job(tmp_path)
    (directory / "again.yaml").write_text(_service("demo-worker"))
    add_to_kustomization(directory, "- again.yaml\n")
    assert render_plain(directory) is None
    with pytest.raises(RenderError, match="may not add resource with an already registered id"):
        validate(directory)


def test_annotations_that_are_not_strings_are_what_kustomize_makes_of_them(
        tmp_path: Path) -> None:
    """Kustomize writes `0755` and `null` annotations back as the strings "0755" and "null";
    read as they stand they would be a number and a null, and the schema check would differ."""
    directory = plain_job(tmp_path)
    _edit_values(directory)
    annotated = [item for item in validate(directory).objects
                 if item["metadata"]["name"] == "annotated"]
    assert annotated[0]["metadata"]["annotations"] == {"mode": "0755", "empty": "null"}
    assert annotated == [item for item in kustomize_objects(directory)
                         if item["metadata"] == annotated[0]["metadata"]]


KEPT_TRAILING_LINES = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n"
                       "data:\n  script: |+\n    run\n\n")
ODD_FILES = {
    "an explicit document start": "---\n" + _service("started"),
    "an explicit document end": _service("ended") + "...\n",
    "no line break at the end": _service("unended").rstrip("\n"),
    "a block scalar keeping its trailing lines": KEPT_TRAILING_LINES,
}


@pytest.mark.parametrize("text", ODD_FILES.values(), ids=ODD_FILES.keys())
def test_a_file_of_one_document_in_any_form_reads_as_kustomize_reads_it(
        tmp_path: Path, text: str) -> None:
    """Most files are read in one pass joined by document markers; one that a join would
    change (a marker of its own, no line break at its end; listed first, so that another
    follows it) is read alone, and each gives what Kustomize renders."""
    directory = plain_job(tmp_path)
    (directory / "odd.yaml").write_text(text)
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("resources:\n",
                                                               "resources:\n- odd.yaml\n"))
    rendered = render_plain(directory)
    assert rendered is not None
    assert rendered == kustomize_objects(directory)
