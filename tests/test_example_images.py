"""The examples and `tfcompile init`'s first job run in the public images they name, as they are:
every image they name is one whose content is known, and every script imports only what that
image holds. (`run-local` and the node's tests run the examples in images built on this machine
from the public images' recipes; this test reads every script, including the ones they do not
run.)"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPOSITORY
from tfcompile.spec.loaded_job import LoadedJob
from tfcompile.spec.loading import load_jobs


@dataclass(frozen=True)
class Image:
    """What a public image holds, as far as a script shipped with `script:` can tell."""

    modules: frozenset[str]
    """Top-level modules a script may import beside the standard library."""
    tf_keras: bool
    """Whether the tf-keras package is installed: with TF_USE_LEGACY_KERAS=1 set and no tf-keras,
    TensorFlow (2.15 as much as later ones) fails to load `tf.keras`."""


TENSORFLOW_2_15 = Image(modules=frozenset({"numpy", "tensorflow"}), tf_keras=False)
"""Ubuntu 22.04, Python 3.11 and `pip install tensorflow==2.15.0` (TensorFlow's
tensorflow/tools/dockerfiles): TensorFlow with Keras 2.15 as `tf.keras`, numpy, tensorboard."""

KNOWN_IMAGES = {
    "tensorflow/tensorflow:2.15.0": TENSORFLOW_2_15,
    "tensorflow/tensorflow:2.15.0-gpu": TENSORFLOW_2_15,
}
IMAGE_PYTHON = (3, 11)
"""The Python of every known image: its standard library is the one a script may import."""

JOB_FILES = [*sorted(EXAMPLES.glob("*/job.yaml")),
             REPOSITORY / "compiler" / "scaffold" / "files" / "job.yaml.template"]


def job_id(path: Path) -> str:
    return path.parent.name if path.name == "job.yaml" else "init"


def loaded(path: Path) -> LoadedJob:
    (job,) = load_jobs(path)
    return job


def images(job: LoadedJob) -> dict[str, str]:
    """Each role's image (and TensorBoard's), by role."""
    spec = job.job.spec
    named = {str(role): settings.image or spec.image for role, settings in spec.roles.defined()}
    if spec.tensorboard is not None:
        named["tensorboard"] = spec.tensorboard.image or spec.image
    return named


def imported_modules(source: str) -> set[str]:
    """The top-level modules a script imports, wherever in the script it imports them."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, "a shipped script has no package to import from"
            modules.add(node.module.split(".")[0])
    return modules


def test_the_examples_and_init_are_all_checked() -> None:
    assert [job_id(path) for path in JOB_FILES] == [
        "mnist", "parameter-server", "sweep", "tensorflow1", "tf-spawner", "init"]


@pytest.mark.parametrize("path", JOB_FILES, ids=job_id)
def test_every_image_is_a_known_public_one(path: Path) -> None:
    unknown = {role: image for role, image in images(loaded(path)).items()
               if image not in KNOWN_IMAGES}
    assert not unknown, f"images whose content this test does not know: {unknown}"


@pytest.mark.skipif(sys.version_info[:2] != IMAGE_PYTHON,
                    reason="the standard library differs from the images' Python 3.11")
@pytest.mark.parametrize("path", JOB_FILES, ids=job_id)
def test_the_script_imports_only_what_every_image_holds(path: Path) -> None:
    job = loaded(path)
    assert job.script is not None
    for role, image in images(job).items():
        if role == "tensorboard":
            continue  # runs TensorBoard, not the script
        allowed = set(sys.stdlib_module_names) | KNOWN_IMAGES[image].modules
        for file in job.script.files:
            missing = sorted(imported_modules(file.text) - allowed)
            assert not missing, f"{file.key} imports {missing}, which {image} ({role}) lacks"


@pytest.mark.parametrize("path", JOB_FILES, ids=job_id)
def test_no_role_asks_for_tf_keras_its_image_lacks(path: Path) -> None:
    spec = loaded(path).job.spec
    for role, settings in spec.roles.defined():
        setting = {**spec.env, **settings.env}.get("TF_USE_LEGACY_KERAS")
        image = KNOWN_IMAGES.get(settings.image or spec.image)
        if image is not None and setting is not None and setting.value in ("1", "true", "True"):
            assert image.tf_keras, f"{role}: TF_USE_LEGACY_KERAS=1 breaks tf.keras without tf-keras"


def test_imports_are_found_wherever_they_are() -> None:
    source = ("import os.path, numpy as np\nfrom sklearn.datasets import load_digits\n"
              "def data():\n    import tf_keras\n")
    assert imported_modules(source) == {"os", "numpy", "sklearn", "tf_keras"}
