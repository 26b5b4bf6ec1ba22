"""Images known to fall outside the image contract: a warning per role, before a cluster says so.

The `tensorflow` container of a role runs tfcompile's launcher with the image's `python`, which
must be CPython or PyPy 3.8 or later (docs/job-spec.md, "What the image must provide"). Most
images cannot be judged from their name, but the stock TensorFlow images can:

- `tensorflow/tensorflow` (and `tensorflow/tensorflow-gpu`) up to 2.1 have Python 2.7, 3.5 or
  3.6: Docker Hub's page of the image says that versioned images up to 1.15.0 and 2.1.0 have
  Python 2.7 in tags without `py`, and Python 3 (3.5 on Ubuntu 16.04, 3.6 on Ubuntu 18.04, the
  base from 1.14 on) in tags with `-py3`, which later tags dropped; the 1.15 and 2.1 patch
  releases after them are Python 3.6 (tensorflow#41153 shows 2.1.1's `python --version`:
  3.6.9). A container of such a tag stops with SyntaxError before training, every restart.
  The images of 2.2 to 2.6 built before September 2021 are on Ubuntu 18.04 as well (Python
  3.6; Docker Hub: "Images built after Sept 2021 are based on Ubuntu 20.04", Python 3.8), but
  which of their tags were built before then could not be confirmed tag by tag, so those are
  not flagged: only what is known is said.
- `TF_USE_LEGACY_KERAS=1` (TensorFlow reads `1`, `true` and `True`) makes `tf.keras` the
  tf-keras package, which no stock image holds, so `tf.keras` fails at import, launcher or
  not: in `tensorflow/tensorflow` from 2.16 on (and `latest`, `nightly`), which have Keras 3
  (ImportError: Keras cannot be imported), and in 2.15, whose `tf.keras` is Keras 2 without the
  variable (TensorFlow 2.15's `__init__` reads it; tests/test_example_images.py measured both).

The image is judged as Kustomize renders it (an `images:` transformer may have changed it), and
the variable as the kubelet expands it, from the role's first pod (a role with no replicas: the
template's literal values). A job with `launcher: none` runs no launcher, so only the Keras
warning applies to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tfcompile.compiler.objects.labels import ROLE_LABEL
from tfcompile.compiler.objects.launcher_interface import LAUNCHER_DIRECTORY, PROGRAM_FILE
from tfcompile.compiler.rendering.manifests import KubernetesObject, name_of, object_reference
from tfcompile.compiler.rendering.pods import Pod

from .report import quoted
from .workload_rules import TENSORFLOW_CONTAINER, is_role

STOCK_REPOSITORIES = ("tensorflow/tensorflow", "tensorflow/tensorflow-gpu")
DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
OLDEST_LAUNCHER_TENSORFLOW = (2, 2)
"""Stock tags below this version have a Python older than 3.8 (the module's docstring)."""
KERAS_3_TENSORFLOW = (2, 16)
"""Stock tags from this version on have Keras 3 and no tf-keras."""
LEGACY_KERAS_TENSORFLOW = (2, 15)
"""The first TensorFlow that reads `TF_USE_LEGACY_KERAS` (no stock tag has tf-keras)."""
MOVING_KERAS_3_TAGS = ("latest", "nightly")
"""Tags (and their `-gpu`, `-jupyter` variants) that point at a TensorFlow of 2.16 or later."""
LEGACY_KERAS_VARIABLE = "TF_USE_LEGACY_KERAS"
LEGACY_KERAS_VALUES = ("1", "true", "True")
"""The values TensorFlow takes as asking for Keras 2 (tf_keras) as `tf.keras`."""
LAUNCHER_PROGRAM = f"{LAUNCHER_DIRECTORY}/{PROGRAM_FILE}"
IMAGE_CONTRACT = 'docs/job-spec.md, "What the image must provide"'


def stock_tag(image: str) -> str | None:
    """The tag of a stock TensorFlow image on Docker Hub (`latest` when none is given), or None
    for any other image."""
    name = image.split("@", 1)[0]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        if first not in DOCKER_HUB:
            return None
        name = rest
    repository, _, tag = name.partition(":")
    if repository not in STOCK_REPOSITORIES:
        return None
    return tag or "latest"


def _version(tag: str) -> tuple[int, int] | None:
    found = re.match(r"([0-9]+)\.([0-9]+)", tag)
    return None if found is None else (int(found[1]), int(found[2]))


def python_too_old(tag: str) -> bool:
    """Whether a stock tag is known to have a Python older than 3.8: 2.1 and before, and every
    `-py3` tag (only those releases had them)."""
    version = _version(tag)
    return "py3" in tag.split("-")[1:] or (version is not None
                                          and version < OLDEST_LAUNCHER_TENSORFLOW)


def keras_3(tag: str) -> bool:
    """Whether a stock tag has Keras 3 and no tf-keras: 2.16 and later, `latest`, `nightly`."""
    version = _version(tag)
    if version is not None:
        return version >= KERAS_3_TENSORFLOW
    return tag.split("-")[0] in MOVING_KERAS_3_TAGS and "py3" not in tag.split("-")


def reads_legacy_keras(tag: str) -> bool:
    """Whether a stock tag's TensorFlow takes `TF_USE_LEGACY_KERAS` (and so, holding no
    tf-keras, fails at `tf.keras` with it set): 2.15 and every Keras 3 tag."""
    version = _version(tag)
    return keras_3(tag) or (version is not None and version >= LEGACY_KERAS_TENSORFLOW)


def _container(pod_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for container in pod_spec.get("containers") or []:
        if isinstance(container, Mapping) and container.get("name") == TENSORFLOW_CONTAINER:
            return container
    return None


def _environment(container: Mapping[str, Any], pod: Pod | None) -> Mapping[str, str]:
    """The container's variables as the kubelet sets them (its first pod's), or the template's
    literal values when the role has no pod."""
    if pod is not None:
        for running in pod.containers:
            if running.name == TENSORFLOW_CONTAINER:
                return running.environment
    return {str(entry.get("name")): str(entry["value"]) for entry in container.get("env") or []
            if isinstance(entry, Mapping) and isinstance(entry.get("value"), str)}


def _runs_launcher(container: Mapping[str, Any]) -> bool:
    command = container.get("command") or []
    return isinstance(command, list) and LAUNCHER_PROGRAM in command[:2]


def _role_warnings(item: KubernetesObject, pod: Pod | None) -> Iterator[str]:
    template = (item.get("spec") or {}).get("template") or {}
    container = _container(template.get("spec") or {})
    if container is None:
        return
    image = str(container.get("image", ""))
    tag = stock_tag(image)
    if tag is None:
        return
    role = str(((template.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL, ""))
    where = f"{object_reference(item)}: role {quoted(role)} runs {quoted(image)}"
    if _runs_launcher(container) and python_too_old(tag):
        yield (
            f"{where}, whose Python (2.7, 3.5 or 3.6, as in every TensorFlow image up to 2.1) "
            "is older than tfcompile's launcher needs (3.8): its containers stop with "
            "SyntaxError before training, at every restart. Use an image of TensorFlow 2.7 or "
            "later (tensorflow/tensorflow:2.15.0), or keep this one and set `launcher: none` in "
            "job.yaml (then nothing records success, and onSuccess, onFailure, failurePolicy "
            f"and deadline are refused; {IMAGE_CONTRACT})"
        )
    value = _environment(container, pod).get(LEGACY_KERAS_VARIABLE)
    if value not in LEGACY_KERAS_VALUES or not reads_legacy_keras(tag):
        return
    if keras_3(tag):
        instead = (
            "this image has Keras 3 and no tf-keras, so `tf.keras` fails at import. For Keras 2 "
            "(which MultiWorkerMirroredStrategy with model.fit needs) use "
            "tensorflow/tensorflow:2.15.0 without the variable, or an image of your own with "
            "tf-keras of the same version; else leave the variable out and use Keras 3")
    else:
        instead = (
            "its `tf.keras` is Keras 2 already, and the variable makes it tf-keras, which this "
            "image lacks, so `tf.keras` fails at import: leave the variable out")
    yield f"{where} with {LEGACY_KERAS_VARIABLE}={value}: {instead} ({IMAGE_CONTRACT})"

def image_warnings(objects: Sequence[KubernetesObject], pods: Sequence[Pod]) -> list[str]:
    """One warning per role and finding: a stock TensorFlow image known to have a Python too old
    for the launcher the role runs, or Keras 3 where the role asks for Keras 2."""
    first_pods: dict[str, Pod] = {}
    for pod in pods:
        if pod.owner_kind == "StatefulSet":
            first_pods.setdefault(pod.owner_name, pod)
    warnings: list[str] = []
    for item in objects:
        if is_role(item):
            warnings.extend(_role_warnings(item, first_pods.get(name_of(item))))
    return warnings
