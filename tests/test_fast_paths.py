"""What keeps tfcompile fast at fleet scale, pinned as behaviour rather than timings.

`build` runs in pre-commit hooks and CI on every change: it loads nothing of `validate`,
`render` or `run-local`, and a build that succeeds nothing that only errors or `--check` need;
the spec models are built without parsing a builtin's text signature. The emitter lays out the
block YAML of Kubernetes objects itself (or feeds ruamel's emitter events) and must write the
bytes ruamel's own dumper writes. `validate` expands a StatefulSet's pod template once: the pods
it derives must equal the pods expanded one by one, and memory must grow with the number of
tasks, not with its square.
"""

from __future__ import annotations

import gc
import inspect
import io
import os
import random
import re
import subprocess
import sys
import tracemalloc
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from ruamel.yaml import YAML
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    LiteralScalarString,
    SingleQuotedScalarString,
)

from tests.conftest import EXAMPLES, OUTPUT, OVERLAYS, Result, job_text
from tfcompile.compiler import yaml_output
from tfcompile.compiler.checking.validation.validator import validate_rendered
from tfcompile.compiler.objects.compile import build_objects, file_name, kustomization
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.compiler.rendering.kustomize import render
from tfcompile.compiler.rendering.manifests import parse_manifests
from tfcompile.compiler.rendering.pods import (
    POD_INDEX_LABEL,
    environment_sources,
    pod_from_template,
)
from tfcompile.compiler.rendering.stateful_set_pods import POD_NAME_LABEL, pods_of
from tfcompile.compiler.yaml_output import dump
from tfcompile.spec import models
from tfcompile.spec.loading import discover, load_jobs

NOT_LOADED_BY_BUILD = (
    "tfcompile.compiler.checking.validation",
    "tfcompile.compiler.rendering",
    "tfcompile.compiler.local_run",
    "tfcompile.compiler.scaffold.repository",
    "tfcompile.spec.schema",
    "jsonschema",
    "kubernetes_validate",
)


def _imported_modules(arguments: list[str], directory: Path,
                      keep_record: bool = True) -> tuple[int, set[str]]:
    """Run `tfcompile ARGUMENTS` in a fresh interpreter; its status and every module it loaded.
    Without `keep_record`, the build keeps no record of an up-to-date output."""
    environment = dict(os.environ)
    if not keep_record:
        environment["TFCOMPILE_CACHE_DIR"] = ""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tfcompile.compiler.cli", *arguments],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    modules = set(re.findall(r"^import time:\s*\d+ \|\s*\d+ \|\s*(\S+)", completed.stderr, re.M))
    return completed.returncode, modules


@pytest.mark.slow
@pytest.mark.parametrize("check", [False, True], ids=["build", "build --check"])
def test_build_loads_nothing_of_validate_render_or_run_local(tmp_path: Path, check: bool) -> None:
    output = tmp_path / "output"
    arguments = ["build", str(EXAMPLES), "-o", str(output), "--overlays", str(OVERLAYS)]
    if check:  # the full check: a recorded up-to-date build loads less (test_build_record.py)
        status, _ = _imported_modules(arguments, tmp_path, keep_record=False)
        assert status == 0
        arguments.append("--check")
    status, modules = _imported_modules(arguments, tmp_path)
    assert status == 0
    assert "tfcompile.compiler.output.build" in modules  # the import list was read
    loaded = sorted(
        module for module in modules
        if any(module == name or module.startswith(name + ".") for name in NOT_LOADED_BY_BUILD)
    )
    assert loaded == []


@pytest.mark.slow
def test_validate_without_a_cluster_loads_no_spec_models(tmp_path: Path) -> None:
    """`validate` reads rendered objects, not specs: pydantic and the spec's models (0.13 s of
    a start) load only with `--server`, whose launcher policy check builds objects."""
    status, modules = _imported_modules(["validate", str(OUTPUT / "mnist")], tmp_path)
    assert status == 0
    assert "tfcompile.compiler.checking.validation.validator" in modules
    assert not {"pydantic", "tfcompile.spec.models"} & modules


ONLY_FOR_ERRORS_OR_CHECK = ("difflib", "traceback", "tfcompile.spec.messages",
                            "tfcompile.spec.misplaced_fields")
"""What a build loads only to explain invalid specs, diff a stale tree or report a bug."""



def every_role_job(name: str, workers: str) -> str:
    """A job with a chief, `workers` workers, a parameter server and an evaluator."""
    return job_text(name, command="[python, train.py]", roles=(
        f"chief: {{replicas: 1}}\nworker: {{replicas: {workers}}}\n"
        "ps: {replicas: 1}\nevaluator: {replicas: 1}"))


@pytest.mark.slow
@pytest.mark.parametrize("keep_record", [False, True], ids=["no record", "record kept"])
def test_a_build_that_succeeds_loads_nothing_only_errors_or_check_need(
    tmp_path: Path, keep_record: bool
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(every_role_job("one", "2"))
    arguments = ["build", str(job), "-o", str(tmp_path / "output")]
    status, modules = _imported_modules(arguments, tmp_path, keep_record=keep_record)
    assert status == 0
    # a full build
    assert {"tfcompile.spec.models", "tfcompile.compiler.objects.compile"} <= modules
    assert sorted(set(ONLY_FOR_ERRORS_OR_CHECK) & modules) == []
    # Invalid: the messages are loaded when they are needed.
    job.write_text(every_role_job("one", '"2"'))
    status, modules = _imported_modules(arguments, tmp_path, keep_record=keep_record)
    assert status == 2
    assert "tfcompile.spec.messages" in modules


def test_the_spec_models_take_no_builtin_as_a_default_factory() -> None:
    """Pydantic reads a default factory's signature; a builtin's (`dict`, `list`) is parsed
    from its text with the tokenizer, which every build would pay for."""
    spec_models = [value for value in vars(models).values()
                   if isinstance(value, type) and issubclass(value, BaseModel)]
    assert models.JobSpec in spec_models
    factories = [(model.__name__, name, field.default_factory)
                 for model in spec_models for name, field in model.model_fields.items()
                 if field.default_factory is not None]
    assert len(factories) > 10
    for model_name, name, factory in factories:
        assert inspect.isfunction(factory) or (
            isinstance(factory, type) and issubclass(factory, BaseModel)
        ), (model_name, name, factory)


@pytest.mark.slow
def test_validate_still_loads_what_it_needs(tmp_path: Path, run_cli: Callable[..., Result]) -> None:
    output = tmp_path / "output"
    assert run_cli("build", str(EXAMPLES / "mnist"), "-o", str(output),
                   "--overlays", str(OVERLAYS)).status == 0
    status, modules = _imported_modules(["validate", "-o", str(output)], tmp_path)
    assert status == 0
    assert {"tfcompile.compiler.checking.validation.schemas", "jsonschema"} <= modules
    assert not any(module.startswith("tfcompile.compiler.local_run") for module in modules)


# The emitter as it was before it fed events directly: ruamel's representer and serializer,
# given the styles the writer chooses. It checks that the writer's two paths (events, direct
# layout) write the same bytes; that those bytes read back right is tests/test_yaml_output.py's
# property, checked with readers that share none of these rules.
_YAML_1_1 = VersionedResolver(version=(1, 1))
_YAML_1_2 = VersionedResolver(version=(1, 2))


def _reference_dump(document: Mapping[str, Any]) -> str:
    def string_everywhere(text: str) -> bool:
        return all(
            resolver.resolve(ScalarNode, text, (True, False)) == "tag:yaml.org,2002:str"
            for resolver in (_YAML_1_1, _YAML_1_2)
        )

    def escaped(text: str) -> bool:
        return any(character in "\r\x7f\x85\u2028\u2029\ufeff"
                   or (unicodedata.category(character) == "Cc" and character not in "\t\n")
                   for character in text)

    def prepare_key(key: Any) -> Any:
        if isinstance(key, str) and escaped(key):
            return DoubleQuotedScalarString(key)
        if isinstance(key, str) and not string_everywhere(key):
            return SingleQuotedScalarString(key)
        return key

    def prepare(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {prepare_key(key): prepare(item) for key, item in value.items()}
        if isinstance(value, list):
            return [prepare(item) for item in value]
        if isinstance(value, str) and escaped(value):
            return DoubleQuotedScalarString(value)
        block_safe = not any(line != line.rstrip(" \t") for line in str(value).split("\n"))
        if isinstance(value, str) and "\n" in value and block_safe and "\r" not in value:
            return LiteralScalarString(value)
        if isinstance(value, str) and not string_everywhere(value):
            return SingleQuotedScalarString(value)
        return value

    writer = YAML(typ="rt", pure=True)
    writer.default_flow_style = False
    writer.width = 1 << 30
    writer.indent(mapping=2, sequence=2, offset=0)
    stream = io.StringIO()
    writer.dump(prepare(document), stream)
    return stream.getvalue()


_CHARACTERS = [*"abcXYZ019 -_./:,?[]{}#&*!|>'\"%@`=~<+\\$()", "\t", "\n", "\n\n", "\r", "é",
               "☃", "😀", "\x85", "\u2028", "\ufeff", "\x00", "\x7f", "\xa0", "  "]
_WORDS = ["yes", "no", "on", "off", "y", "True", "null", "~", "0777", "0o17", "0x1F", "1e3",
          "1.5", "1_000", ".inf", "2001-12-14", "<<", "=", "-", "---", "...", "- a", "a: b",
          "a #b", "#a", "", " ", "12:30:45", "+1", "0", "!tag", "&a", "*a", "|", ">", "? x",
          "def main():\n\tpass\n", "line\n\n\n", "  indented\nblock\n", "trailing \nspace"]


def _text(generator: random.Random) -> str:
    if generator.random() < 0.3:
        return generator.choice(_WORDS)
    length = generator.choice([1, 2, 5, 20, 127, 128, 129, 200])
    text = "".join(generator.choice(_CHARACTERS) for _ in range(length))
    return generator.choice(_WORDS) + text if generator.random() < 0.3 else text


def _value(generator: random.Random, depth: int) -> Any:
    choice = generator.random()
    if depth > 3 or choice < 0.5:
        kind = generator.random()
        if kind < 0.8:
            return _text(generator)
        if kind < 0.9:
            return generator.randint(-5, 100000)
        return generator.choice([True, False, None])
    if choice < 0.75:
        return [_value(generator, depth + 1) for _ in range(generator.randint(0, 4))]
    return {_text(generator): _value(generator, depth + 1) for _ in range(generator.randint(0, 4))}


@pytest.mark.parametrize("documents", [100, pytest.param(400, marks=pytest.mark.slow)])
def test_the_emitter_writes_the_bytes_ruamels_dumper_writes(documents: int) -> None:
    """The fast tier writes the first hundred documents of the `slow` tier's run."""
    generator = random.Random(20261126)
    for _ in range(documents):
        document = {"apiVersion": "v1", "kind": "ConfigMap",
                    "data": {_text(generator): _value(generator, 0) for _ in range(4)}}
        assert dump(document) == _reference_dump(document), document


_KEYS = ["name", "image", "app.kubernetes.io/name", "a-b", "x", "on", "y", "1", "true", "",
         "a b", "a:b", "a: b", "-x", "#c", "é", "k" * 127]


def _layout_text(generator: random.Random) -> str:
    """Mostly what Kubernetes objects hold (names, words YAML 1.1 reads as other types, scripts
    with tabs, blank lines and trailing newlines), now and then anything at all."""
    choice = generator.random()
    if choice < 0.4:
        return generator.choice(_WORDS)
    if choice < 0.6:
        return generator.choice(_KEYS)
    if choice < 0.8:
        lines = ["".join(generator.choice("ab :#'\t -é😀") for _ in range(generator.randint(0, 8)))
                 for _ in range(generator.randint(1, 4))]
        return "\n".join(lines) + generator.choice(["", "\n", "\n\n"])
    return _text(generator)


def _layout_value(generator: random.Random, depth: int) -> Any:
    choice = generator.random()
    if depth > 3 or choice < 0.5:
        kind = generator.random()
        if kind < 0.8:
            return _layout_text(generator)
        if kind < 0.9:
            return generator.randint(-5, 10**20)
        return generator.choice([True, False, None])
    if choice < 0.75:
        items = [_layout_value(generator, depth + 1) for _ in range(generator.randint(0, 4))]
        # Mostly what objects hold: no null, empty map or list directly in a list.
        return [item for item in items if generator.random() < 0.1
                or not (item is None or item == {} or isinstance(item, list))]
    return {_layout_key(generator): _layout_value(generator, depth + 1)
            for _ in range(generator.randint(0, 4))}


def _layout_key(generator: random.Random) -> str:
    if generator.random() < 0.9:
        return generator.choice(_KEYS[:5])
    return generator.choice([*_KEYS, _text(generator)])


def _in_direct_layout(document: Mapping[str, Any]) -> bool:
    try:
        yaml_output._layout_mapping(document, 0, [], inline=False)
    except yaml_output._NotInLayout:
        return False
    return True


@pytest.mark.parametrize("documents", [400, pytest.param(1500, marks=pytest.mark.slow)])
def test_the_direct_layout_writes_the_bytes_ruamels_dumper_writes(documents: int) -> None:
    """Documents shaped like Kubernetes objects, with tricky text: about a third fit the
    direct layout, the rest go through ruamel's emitter; both must write the dumper's bytes.
    The fast tier writes the first 400 documents of the `slow` tier's run."""
    generator = random.Random(20261127)
    direct = 0
    for _ in range(documents):
        document = {"apiVersion": "v1", "kind": "ConfigMap",
                    "data": {_layout_key(generator): _layout_value(generator, 0)
                             for _ in range(3)}}
        direct += _in_direct_layout(document)
        assert dump(document) == _reference_dump(document), document
    assert direct > documents // 5


def test_every_compiled_example_takes_the_direct_layout() -> None:
    """What keeps a large build fast: no compiled object needs ruamel's emitter."""
    jobs = [job for path in discover([EXAMPLES]) for job in load_jobs(path)]
    assert len(jobs) >= 4
    for job in jobs:
        objects = build_objects(job, shipped_launcher())
        for document in objects:
            assert _in_direct_layout(document), (job.job.metadata.name, document["kind"])
        assert _in_direct_layout(kustomization([file_name(item) for item in objects],
                                               ["../overlays/x"]))


def _stateful_set(replicas: int, extra_value: str = "plain") -> dict[str, Any]:
    """A StatefulSet whose pods read their name and ordinal in every way the kubelet allows."""
    def field(path: str) -> dict[str, Any]:
        return {"valueFrom": {"fieldRef": {"fieldPath": path}}}

    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "demo-worker"},
        "spec": {
            "replicas": replicas,
            "serviceName": "demo-worker",
            "template": {
                "metadata": {"labels": {"tfcompile.dev/role": "worker"},
                             "annotations": {"note": extra_value}},
                "spec": {
                    "containers": [{
                        "name": "tensorflow",
                        "image": "python:3.11",
                        "command": ["python", "-c", "$(POD_NAME)"],
                        "args": ["--index=$(TASK_INDEX)", "$$(TASK_INDEX)", "$(UNSET)"],
                        "env": [
                            {"name": "TASK_INDEX",
                             **field(f"metadata.labels['{POD_INDEX_LABEL}']")},
                            {"name": "POD_NAME", **field("metadata.name")},
                            {"name": "SAME", **field(f"metadata.labels['{POD_NAME_LABEL}']")},
                            {"name": "NOTE", **field("metadata.annotations['note']")},
                            {"name": "FROM_MAP",
                             "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "k"}}},
                            {"name": "TF_CONFIG",
                             "value": '{"task":{"index":$(TASK_INDEX)},"me":"$(POD_NAME)",'
                                      '"map":"$(FROM_MAP)"}'},
                        ],
                        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch",
                                          "subPathExpr": "$(POD_NAME)/$(TASK_INDEX)"}],
                    }],
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                },
            },
        },
    }


@pytest.mark.parametrize("extra_value", ["plain", "\ue000pod-name\ue001 \ue000 in a value"])
def test_pods_expanded_once_equal_pods_expanded_one_by_one(extra_value: str) -> None:
    stateful_set = _stateful_set(5, extra_value)
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
                  "data": {"k": extra_value}}
    objects = [config_map, stateful_set]
    sources = environment_sources(objects, None)
    one_by_one = [
        pod_from_template(
            name=f"demo-worker-{ordinal}", namespace=None, owner_kind="StatefulSet",
            owner_name="demo-worker", index=ordinal,
            template=stateful_set["spec"]["template"],
            extra_labels={POD_NAME_LABEL: f"demo-worker-{ordinal}",
                          POD_INDEX_LABEL: str(ordinal)},
            hostname=f"demo-worker-{ordinal}", subdomain="demo-worker", sources=sources,
        )
        for ordinal in range(5)
    ]
    pods = pods_of(objects)
    assert pods == one_by_one
    third = pods[3].containers[0]
    assert third.environment["TF_CONFIG"] == (
        f'{{"task":{{"index":3}},"me":"demo-worker-3","map":"{extra_value}"}}'
    )
    assert third.args == ["--index=3", "$(TASK_INDEX)", "$(UNSET)"]
    assert third.volume_mounts[0].sub_path == "demo-worker-3/3"
    assert dict(third.environment) == dict(one_by_one[3].containers[0].environment)


def _broken(value: Any, chooser: random.Random) -> Any:
    """`value` with one mapping given an unknown field and one leaf a wrong type (its
    apiVersion and kind kept: they say which schema is checked)."""
    mappings: list[dict[str, Any]] = []
    leaves: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        if isinstance(node, dict):
            mappings.append(node)
        for key, item in items:
            if isinstance(item, (dict, list)):
                walk(item)
            elif node is not value or key not in ("apiVersion", "kind"):
                leaves.append((node, key))

    walk(value)
    chooser.choice(mappings)["notAField"] = 1
    holder, key = chooser.choice(leaves)
    holder[key] = [{"wrong": "type"}] if isinstance(holder[key], str) else "wrong type"
    return value


def test_the_inlined_schemas_find_the_errors_the_referring_schemas_find() -> None:
    """`validate` checks each kind with the shared definitions written in place; the schema
    files as kubernetes-validate ships them, resolved by jsonschema's registry, must find the
    same errors at the same places, on broken copies of every example's objects and on a CRD
    (whose schema refers to itself)."""
    import copy
    import json

    import jsonschema  # type: ignore[import-untyped, unused-ignore]
    from referencing import Registry, Resource

    from tfcompile.compiler.checking.validation.schemas import _schema_file_name, _validator
    from tfcompile.compiler.kubernetes_versions import DEFAULT_KUBERNETES_VERSION, schema_directory
    from tfcompile.compiler.yaml_input import read_manifests

    version = DEFAULT_KUBERNETES_VERSION
    directory = schema_directory(version)
    registry = Resource.from_contents(
        json.loads(directory.joinpath("_definitions.json").read_text())) @ Registry()
    objects = [item for name in sorted(OUTPUT.glob("*/*.yaml"))
               if name.name != "kustomization.yaml"
               for item in read_manifests(name.read_text()) if item]
    objects.append({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "trials.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Trial", "plural": "trials"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"steps": {
                             "type": "array", "items": {"type": "integer"}}}}}}}}]}})
    chooser = random.Random(20261202)
    broken = [_broken(copy.deepcopy(item), chooser) for item in objects]
    kinds = {(item["apiVersion"], item["kind"]) for item in broken}
    assert len(kinds) >= 8 and len(broken) >= 100

    def errors(validator: Any, item: Any) -> list[tuple[Any, ...]]:
        return sorted((list(error.absolute_path), error.validator, error.message)
                      for error in validator.iter_errors(item))

    referring_of: dict[tuple[str, str], Any] = {}
    for item in broken:
        kind = (item["apiVersion"], item["kind"])
        if kind not in referring_of:
            referring_of[kind] = jsonschema.Draft202012Validator(
                json.loads(directory.joinpath(_schema_file_name(*kind)).read_text()),
                registry=registry)
        referring = referring_of[kind]
        expected = errors(referring, item)
        assert expected, item["kind"]
        assert errors(_validator(version, item["apiVersion"], item["kind"]), item) == expected


@pytest.mark.slow
def test_validate_memory_grows_with_tasks_not_their_square(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    """2,000 workers: every pod's TF_CONFIG lists 2,003 hosts (about 70 KB). Kept per pod,
    with its parsed cluster, that would be hundreds of megabytes."""
    job = tmp_path / "jobs" / "job.yaml"
    job.parent.mkdir()
    job.write_text(every_role_job("fleet", "2000"))
    output = tmp_path / "output"
    assert run_cli("build", str(job), "-o", str(output), "--overlays", str(OVERLAYS)).status == 0
    rendered = render(output / "fleet")
    parse_manifests(rendered)  # schema files and caches loaded before measuring
    tracemalloc.start()
    try:
        report = validate_rendered(rendered, output / "fleet")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report.ok, report.to_text()
    assert len([o for o in report.objects if o["kind"] == "StatefulSet"]) == 4
    assert peak < 48 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"


@pytest.mark.slow
def test_a_builds_memory_does_not_hold_its_jobs_texts(tmp_path: Path) -> None:
    """What keeps memory flat in the number of jobs: compiled texts wait in a temporary file,
    so what a compilation holds per job (names of files, not their text) is a small part of
    the job's output."""
    from tfcompile.compiler.output.compilation import BuildSettings, compile_inputs

    example = EXAMPLES / "parameter-server"
    template = (example / "job.yaml").read_text(encoding="utf-8")

    def settings(count: int) -> BuildSettings:
        specs = tmp_path / f"jobs{count}"
        specs.mkdir()
        for script in example.glob("*.py"):
            (specs / script.name).write_text(script.read_text(encoding="utf-8"),
                                             encoding="utf-8")
        for index in range(count):
            (specs / f"job{index}.yaml").write_text(
                template.replace("name: parameter-server", f"name: fleet-{index}", 1),
                encoding="utf-8")
        return BuildSettings([specs], tmp_path / "output", OVERLAYS)

    def retained(count: int) -> tuple[int, int]:
        """Bytes the compilation of `count` jobs holds, and bytes of one job's files."""
        chosen = settings(count)
        compile_inputs(chosen)  # the writer's memos filled before measuring
        tracemalloc.start()
        try:
            compilation = compile_inputs(chosen)
            gc.collect()  # garbage in cycles not yet collected is not what the build holds
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(compilation.jobs) == count
        files = compilation.jobs[0].files
        return held, sum(len(files[name].encode("utf-8")) for name in files)

    few, text_per_job = retained(10)
    many, _ = retained(40)
    per_job = (many - few) / 30
    assert text_per_job > 20_000
    assert per_job < text_per_job / 3, (per_job, text_per_job)
