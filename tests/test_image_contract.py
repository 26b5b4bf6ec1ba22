"""`validate` on stock TensorFlow images known to fall outside the image contract: a Python
older than the launcher needs, or `TF_USE_LEGACY_KERAS=1` where no tf-keras is installed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Result, job_text
from tests.test_without_launcher import build
from tfcompile.compiler.checking.validation import validate
from tfcompile.compiler.checking.validation.images import (
    keras_3,
    python_too_old,
    reads_legacy_keras,
    stock_tag,
)


@pytest.mark.parametrize(("image", "tag"), [
    ("tensorflow/tensorflow:1.15.5", "1.15.5"),
    ("tensorflow/tensorflow", "latest"),
    ("docker.io/tensorflow/tensorflow:2.1.0-gpu-py3", "2.1.0-gpu-py3"),
    ("index.docker.io/tensorflow/tensorflow-gpu:1.4.0", "1.4.0"),
    ("docker.io/library/tensorflow/tensorflow:2.16.1", None),
    ("tensorflow/tensorflow:1.15.5@sha256:" + "0" * 64, "1.15.5"),
    ("registry.example.com/tensorflow/tensorflow:1.15.5", None),
    ("localhost:5000/tensorflow/tensorflow:1.15.5", None),
    ("tensorflow/serving:1.15.0", None),
    ("mycorp/tensorflow:1.15.5", None),
])
def test_stock_images_are_recognised_by_name(image: str, tag: str | None) -> None:
    assert stock_tag(image) == tag


@pytest.mark.parametrize(("tag", "old", "keras", "legacy"), [
    ("1.15.5", True, False, False),
    ("1.15.5-gpu-py3", True, False, False),
    ("2.1.0", True, False, False),
    ("latest-py3", True, False, False),
    ("2.2.0", False, False, False),  # Python 3.6 or 3.8 by its build date: not judged
    ("2.7.0", False, False, False),
    ("2.14.0", False, False, False),
    ("2.15.0", False, False, True),
    ("2.15.0-gpu", False, False, True),
    ("2.16.1", False, True, True),
    ("2.21.0-gpu-jupyter", False, True, True),
    ("latest", False, True, True),
    ("nightly-gpu", False, True, True),
    ("devel", False, False, False),
])
def test_what_a_stock_tag_is_known_to_hold(tag: str, old: bool, keras: bool,
                                           legacy: bool) -> None:
    assert (python_too_old(tag), keras_3(tag), reads_legacy_keras(tag)) == (old, keras, legacy)


def warnings_of(tmp_path: Path, run_cli: Callable[..., Result], text: str) -> list[str]:
    report = validate(build(tmp_path, run_cli, text))
    assert report.ok, report.to_text()
    return report.warnings


def test_a_tensorflow_1_image_with_the_launcher_is_warned_of_per_role(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    warnings = warnings_of(tmp_path, run_cli, job_text(
        image="tensorflow/tensorflow:1.15.5",
        roles="ps: {replicas: 1}\nworker: {replicas: 2, image: tensorflow/tensorflow:2.15.0}"))
    (warning,) = warnings
    assert warning.startswith(
        "StatefulSet/demo-ps: role ps runs tensorflow/tensorflow:1.15.5, whose Python (2.7, "
        "3.5 or 3.6, as in every TensorFlow image up to 2.1) is older than tfcompile's "
        "launcher needs (3.8): its containers stop with SyntaxError before training")
    assert "set `launcher: none` in job.yaml" in warning
    assert 'docs/job-spec.md, "What the image must provide"' in warning


def test_a_suspended_role_is_judged_by_its_template(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    warnings = warnings_of(tmp_path, run_cli, job_text(
        image="tensorflow/tensorflow:2.16.1", spec_lines="suspend: true\n"
        "env: {TF_USE_LEGACY_KERAS: 'true'}"))
    assert [warning.split(":")[0] for warning in warnings] == ["StatefulSet/demo-worker"]


def test_no_warning_without_the_launcher_or_for_images_it_cannot_judge(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    assert warnings_of(tmp_path / "a", run_cli, job_text(
        image="tensorflow/tensorflow:1.15.5", spec_lines="launcher: none")) == []
    assert warnings_of(tmp_path / "b", run_cli, job_text(image="kubeflow/tf-dist:1.0")) == []
    assert warnings_of(tmp_path / "c", run_cli, job_text(
        image="tensorflow/tensorflow:2.14.0", spec_lines="env: {TF_USE_LEGACY_KERAS: '1'}")) == []


def test_legacy_keras_on_keras_3_images_is_warned_of_launcher_or_not(
        tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    for launcher in ("python", "none"):
        (warning,) = warnings_of(tmp_path / launcher, run_cli, job_text(
            image="tensorflow/tensorflow:2.16.1-gpu",
            spec_lines=f"launcher: {launcher}\nenv: {{TF_USE_LEGACY_KERAS: '1'}}"))
        assert warning.startswith(
            "StatefulSet/demo-worker: role worker runs tensorflow/tensorflow:2.16.1-gpu with "
            "TF_USE_LEGACY_KERAS=1: this image has Keras 3 and no tf-keras, so `tf.keras` "
            "fails at import.")
        assert "tensorflow/tensorflow:2.15.0 without the variable" in warning


def test_legacy_keras_on_2_15_is_warned_of_too(tmp_path: Path,
                                               run_cli: Callable[..., Result]) -> None:
    """TensorFlow 2.15 reads the variable as well, and its image has no tf-keras either."""
    (warning,) = warnings_of(tmp_path, run_cli, job_text(
        image="tensorflow/tensorflow:2.15.0",
        roles="worker: {replicas: 2, env: {TF_USE_LEGACY_KERAS: 'True'}}"))
    assert "with TF_USE_LEGACY_KERAS=True: its `tf.keras` is Keras 2 already" in warning
    assert warning.endswith('leave the variable out (docs/job-spec.md, "What the image must '
                            'provide")')


def test_the_warnings_reach_the_command_line(tmp_path: Path,
                                             run_cli: Callable[..., Result]) -> None:
    directory = build(tmp_path, run_cli, job_text(image="tensorflow/tensorflow:1.15.5-py3"))
    result = run_cli("validate", str(directory))
    assert result.status == 0
    assert "  warning: StatefulSet/demo-worker: role worker runs " \
           "tensorflow/tensorflow:1.15.5-py3, whose Python" in result.stdout
