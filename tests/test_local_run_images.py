"""The image a local run asks podman for, and when it pulls it: as a node's runtime names an
image and as the API server defaults `imagePullPolicy`."""

from __future__ import annotations

import pytest

from tfcompile.compiler.local_run.container_runtime import pull_option, qualified_image


@pytest.mark.parametrize(("image", "qualified"), [
    ("tensorflow/tensorflow:2.15.0", "docker.io/tensorflow/tensorflow:2.15.0"),
    ("python:3.11", "docker.io/library/python:3.11"),
    ("python", "docker.io/library/python:latest"),
    ("registry.example.com:5000/team/train:v1", "registry.example.com:5000/team/train:v1"),
    ("localhost/tfcompile-test/pypy3:3.9", "localhost/tfcompile-test/pypy3:3.9"),
    ("ghcr.io/org/image@sha256:" + "a" * 64, "ghcr.io/org/image@sha256:" + "a" * 64),
])
def test_a_name_without_a_registry_is_docker_hubs(image: str, qualified: str) -> None:
    assert qualified_image(image) == qualified


@pytest.mark.parametrize(("policy", "image", "option"), [
    (None, "tensorflow/tensorflow:2.15.0", "missing"),
    (None, "tensorflow/tensorflow", "always"),
    (None, "tensorflow/tensorflow:latest", "always"),
    ("Always", "tensorflow/tensorflow:2.15.0", "always"),
    ("Never", "tensorflow/tensorflow:latest", "never"),
    ("IfNotPresent", "tensorflow/tensorflow:latest", "missing"),
])
def test_the_pull_policy_is_defaulted_as_the_api_server_defaults_it(
        policy: str | None, image: str, option: str) -> None:
    assert pull_option(policy, image) == option
