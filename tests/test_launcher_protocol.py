"""Upgrading tfcompile restarts no training unless the launcher's protocol changes.

The launcher's ConfigMap is named by its protocol version and its text is left out of the
revision: a new launcher text of the same protocol must leave every StatefulSet of every example
byte for byte as it was (Argo CD and Flux then update the ConfigMap in place and restart no pod),
while a new protocol must roll every role of a job together. Both are compiled from the examples
with the real compiler, given two launcher texts.
"""

from __future__ import annotations

import base64
import io
import json
import zipfile
from typing import Any

import pytest

from tests.conftest import EXAMPLES
from tfcompile.compiler.launcher import protocol, start
from tfcompile.compiler.objects.compile import build_objects, file_name
from tfcompile.compiler.objects.labels import LAUNCHER_DIGEST_ANNOTATION
from tfcompile.compiler.objects.launcher_interface import (
    PROGRAM_FILE,
    SETTINGS_FILE,
    LauncherProgram,
)
from tfcompile.compiler.output.launcher_zip import (
    launcher_modules,
    launcher_program,
    shipped_launcher,
)
from tfcompile.compiler.yaml_output import dump
from tfcompile.spec.loading import load_jobs

EXAMPLE_NAMES = sorted(path.parent.name for path in EXAMPLES.glob("*/job.yaml"))
REVISION_ANNOTATION = "tfcompile.dev/revision"


def compiled(example: str, launcher: LauncherProgram) -> dict[str, str]:
    """The files of one example's output directory, as text, compiled with `launcher`."""
    files: dict[str, str] = {}
    for loaded in load_jobs(EXAMPLES / example / "job.yaml"):
        for document in build_objects(loaded, launcher):
            files[file_name(document)] = dump(document)
    return files


def documents(example: str, launcher: LauncherProgram, kind: str) -> list[dict[str, Any]]:
    return [document for loaded in load_jobs(EXAMPLES / example / "job.yaml")
            for document in build_objects(loaded, launcher) if document["kind"] == kind]


def launcher_maps(example: str, launcher: LauncherProgram) -> list[dict[str, Any]]:
    return [item for item in documents(example, launcher, "ConfigMap")
            if PROGRAM_FILE in item.get("binaryData", {})]


FIXED_MODULE = f"{start.PACKAGE}/program.py"


def another_text() -> LauncherProgram:
    """The shipped launcher with a fix that keeps its protocol (here: one more comment line in
    its main module)."""
    return launcher_program(tuple(
        (name, text + "# a fix that keeps the protocol\n" if name == FIXED_MODULE else text)
        for name, text in launcher_modules()))


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_a_new_launcher_text_of_one_protocol_changes_only_the_program_it_ships(
        example: str) -> None:
    before = compiled(example, shipped_launcher())
    after = compiled(example, another_text())
    assert sorted(before) == sorted(after)  # the same files: the ConfigMap keeps its name
    changed = sorted(name for name in before if before[name] != after[name])
    (launcher_file,) = (name for name in before if name.endswith(f"-launcher-v{protocol.PROTOCOL}"
                                                                 ".yaml"))
    assert changed == [launcher_file]
    statefulsets = [name for name in before if name.startswith("statefulset-")]
    assert statefulsets and all(before[name] == after[name] for name in statefulsets)
    (old,), (new,) = launcher_maps(example, shipped_launcher()), launcher_maps(
        example, another_text())
    assert old["data"] == new["data"]  # the settings
    assert new["binaryData"] == another_text().binary_data() != old["binaryData"]
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(new["binaryData"][PROGRAM_FILE]))) as zipped:
        assert zipped.read(FIXED_MODULE).decode() == dict(launcher_modules())[FIXED_MODULE] + (
            "# a fix that keeps the protocol\n")
    digests = [item["metadata"]["annotations"][LAUNCHER_DIGEST_ANNOTATION] for item in (old, new)]
    assert digests == [shipped_launcher().digest(), another_text().digest()]  # what a reviewer sees


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_a_new_protocol_rolls_every_role_of_the_job_together(example: str) -> None:
    shipped = shipped_launcher()
    bumped = LauncherProgram(shipped.archive, shipped.protocol + 1)
    before = documents(example, shipped, "StatefulSet")
    after = documents(example, bumped, "StatefulSet")
    old = {item["spec"]["template"]["metadata"]["annotations"][REVISION_ANNOTATION]
           for item in before}
    new = {item["spec"]["template"]["metadata"]["annotations"][REVISION_ANNOTATION]
           for item in after}
    assert len(old) == len(new) == 1 and old != new
    (new_map,) = launcher_maps(example, bumped)
    assert new_map["metadata"]["name"].endswith(f"-launcher-v{shipped.protocol + 1}")
    for item in after:
        volumes = {volume["name"]: volume for volume in item["spec"]["template"]["spec"]["volumes"]}
        assert volumes["tfcompile-launcher"]["configMap"]["name"] == new_map["metadata"]["name"]


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_the_settings_name_the_revision_every_pod_template_carries(example: str) -> None:
    (launcher_map,) = launcher_maps(example, shipped_launcher())
    settings = json.loads(launcher_map["data"][SETTINGS_FILE])
    revisions = {item["spec"]["template"]["metadata"]["annotations"][REVISION_ANNOTATION]
                 for item in documents(example, shipped_launcher(), "StatefulSet")}
    assert revisions == {settings[protocol.REVISION_SETTING]}
