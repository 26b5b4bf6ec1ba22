"""Sources of other projects, fetched at test time into the Go module cache (never committed):
the gang schedulers' CRDs and constants, so compiled objects are checked against each project's
own definitions rather than a copy that could drift."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

KUEUE = ("sigs.k8s.io/kueue", "v0.17.0")
SCHEDULER_PLUGINS = ("sigs.k8s.io/scheduler-plugins", "v0.31.8")
VOLCANO_APIS = ("volcano.sh/apis", "v1.12.1")
POD_SECURITY_ADMISSION = ("k8s.io/pod-security-admission", "v0.33.0")


def module_directory(module: tuple[str, str]) -> Path:
    """The module's source directory in the Go module cache, downloading it if needed."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("these tests read the gang schedulers' sources with `go mod download`: "
                    "install Go")
    path, version = module
    process = subprocess.run([go, "mod", "download", "-json", f"{path}@{version}"],
                             capture_output=True, text=True, timeout=600, check=False,
                             cwd="/")
    try:
        info = json.loads(process.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"go mod download {path}@{version} failed: {process.stderr.strip()}")
    if "Dir" not in info:
        pytest.fail(f"go mod download {path}@{version} failed: {info.get('Error')}")
    return Path(info["Dir"])


def volcano_source() -> Path:
    """The Go package of Volcano's `scheduling` kinds (PodGroup, Queue)."""
    return module_directory(VOLCANO_APIS) / "pkg" / "apis" / "scheduling" / "v1beta1"


def scheduler_plugins_crd_file() -> Path:
    """The CRD of the coscheduling plugin's PodGroup."""
    return (module_directory(SCHEDULER_PLUGINS) / "config" / "crd" / "bases" /
            "scheduling.x-k8s.io_podgroups.yaml")


def coscheduling_pod_group_label() -> str:
    """The pod label that puts a pod into a coscheduling PodGroup."""
    return go_string_constant(module_directory(SCHEDULER_PLUGINS) / "apis" / "scheduling" /
                              "v1alpha1" / "types.go", "PodGroupLabel")


def kueue_crd_files() -> list[Path]:
    return sorted((module_directory(KUEUE) / "config" / "components" / "crd" / "bases")
                  .glob("*.yaml"))


@dataclass(frozen=True)
class KueueNames:
    """The label and annotation keys with which Kueue admits plain pods as one group."""

    queue_label: str
    group_label: str
    total_count: str
    serving: str
    serving_value: str


def kueue_names() -> KueueNames:
    kueue = module_directory(KUEUE)
    pod_constants = kueue / "pkg" / "controller" / "jobs" / "pod" / "constants" / "constants.go"
    return KueueNames(
        queue_label=go_string_constant(
            kueue / "pkg" / "controller" / "constants" / "constants.go", "QueueLabel"),
        group_label=go_string_constant(pod_constants, "GroupNameLabel"),
        total_count=go_string_constant(pod_constants, "GroupTotalCountAnnotation"),
        serving=go_string_constant(pod_constants, "GroupServingAnnotationKey"),
        serving_value=go_string_constant(pod_constants, "GroupServingAnnotationValue"),
    )


def go_string_constant(source: Path, name: str) -> str:
    """The value of a Go string constant `name = "..."` (or `Other + "..."`) in `source`,
    resolving names defined in the same directory or imported `constants`/`scheduling` ones."""
    for path in sorted(source.parent.glob("*.go")):
        match = re.search(rf"\b{name}\s*=\s*([^\n]+)", path.read_text())
        if match is None:
            continue
        value = ""
        for part in match.group(1).split("+"):
            part = part.strip()
            if part.startswith('"'):
                value += json.loads(part.split("//")[0].strip())
            else:
                qualified = part.split(".")
                directory = (source.parent if len(qualified) == 1
                             else _imported(path, qualified[0]))
                value += go_string_constant(directory / "x.go", qualified[-1])
        return value
    raise AssertionError(f"no constant {name} next to {source}")


def _imported(source: Path, package: str) -> Path:
    block = re.search(r"^import \((.*?)^\)", source.read_text(), re.MULTILINE | re.DOTALL)
    assert block is not None, f"{source} has no import block"
    for match in re.finditer(r'(?:(\w+)\s+)?"([^"]+)"', block.group(1)):
        alias, path = match.group(1), match.group(2)
        if (alias or path.rsplit("/", 1)[-1]) == package:
            module_root = source
            while not (module_root / "go.mod").is_file():
                module_root = module_root.parent
            module_path = re.search(r"^module\s+(\S+)", (module_root / "go.mod").read_text(),
                                    re.MULTILINE)
            assert module_path is not None
            return module_root / path.removeprefix(module_path.group(1) + "/")
    raise AssertionError(f"{source} does not import {package}")


_GO_TYPES = {"int32": "integer", "int64": "integer", "int": "integer", "string": "string",
             "bool": "boolean"}


def go_struct_schema(source: Path, struct: str) -> dict[str, Any]:
    """A strict JSON Schema of a Go API struct from its `json` tags: the fields it declares and
    their scalar types (maps and structs are objects; their insides are not checked)."""
    text = source.read_text()
    body = re.search(rf"^type {struct} struct {{\n(.*?)^}}", text, re.MULTILINE | re.DOTALL)
    assert body is not None, f"no struct {struct} in {source}"
    properties: dict[str, Any] = {}
    for line in body.group(1).splitlines():
        field = re.match(r'\s*\w+\s+(\S+)\s+`json:"([^",]*)', line)
        if field is None or not field.group(2):
            continue
        go_type = field.group(1).lstrip("*")
        properties[field.group(2)] = {"type": _GO_TYPES.get(go_type, "object")}
    return {"type": "object", "properties": properties, "additionalProperties": False}
