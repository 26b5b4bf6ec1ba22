"""Property: whatever a job file holds, loading it gives a job whose output the API server
accepts, or `SpecError` problems that each point at a place in the file and repeat no value —
never another exception, never a traceback.

Cases are the example jobs mutated (lines deleted, doubled, swapped, bytes changed, hostile
scalars and structures inserted) and generated YAML structures put into known fields. One run
is derandomized (the same cases in every CI run, so a failure reproduces: 50 in the fast tier,
200 in `slow`, as for the parsers' agreement and the limit on values below); another draws
fresh cases each run; the long one (marked `slow`) takes 3,000 derandomized cases, pod templates
among them: ported jobs with pod templates mutated, and fragments drawn from Kubernetes' own pod
template schema with parts of the wrong shape; another long one takes 3,000 derandomized cases of
explicit YAML tags and hostile volume, claim, ConfigMap and Secret names and mount paths. Every
case must end, and within the time a file within the limits may take. All go through the
library (`load_jobs`, then `build_objects` and the YAML writer when the job is valid) for speed;
a few hostile files go through the real command.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, SequenceNode
from ruamel.yaml.tokens import TagToken

from tests.conftest import EXAMPLES, MINIMAL_JOB, REPOSITORY
from tfcompile.compiler.objects.compile import build_objects
from tfcompile.compiler.output.launcher_zip import shipped_launcher
from tfcompile.compiler.yaml_output import dump
from tfcompile.spec import yaml_documents, yaml_limits
from tfcompile.spec.loading import load_jobs
from tfcompile.spec.plain_data import PlainCopier, TooManyValues, node_position
from tfcompile.spec.pod_template import ROOT_DEFINITION, definition, resolve
from tfcompile.spec.positions import Locations
from tfcompile.spec.problems import SpecError

MARKER = "fuzzmarker-Qx7Zr2"
"""Planted as a value in every case; no message may contain it."""

FIXED_EXAMPLES = 200
"""The derandomized runs' cases in the `slow` tier; the fast tier runs the first FAST_EXAMPLES."""
FAST_EXAMPLES = 50
FRESH_EXAMPLES = 80
LONG_EXAMPLES = 3000
TAGS_AND_VOLUMES_EXAMPLES = 3000
HANG_SECONDS = 60

def _planted(text: str) -> str:
    """`text` with the marker as the value of an annotation (a valid place, so that the job
    still builds and a mutation can carry the marker anywhere)."""
    if "\n  annotations:\n" in text:
        return text.replace("\n  annotations:\n", f"\n  annotations:\n    note: {MARKER}\n", 1)
    return re.sub(r"^(  name: .*\n)", rf"\1  annotations: {{note: {MARKER}}}\n", text, count=1,
                  flags=re.MULTILINE)


SEEDS = [_planted(path.read_text(encoding="utf-8"))
         for path in sorted(EXAMPLES.glob("*/job.yaml"))] + [_planted(MINIMAL_JOB)]
"""The example jobs and a minimal one, each with the marker planted."""

PORTED = REPOSITORY / "tests" / "fixtures" / "ported"

SCRIPTS = {path.name: path.read_text(encoding="utf-8")
           for path in sorted(EXAMPLES.glob("*/*.py"))}

HOSTILE_SCALARS = [
    "9" * 5000, "0x" + "f" * 5000, "99999999999999999999", "-9223372036854775809", "1e400",
    ".nan", '"\\ud800"', '"\\udfff x"', '"\\x1b[31m"', '"\\0"', '"a\\rb"', '"\\x85"',
    '"\\u202e"', "!!binary aGk=", "!foo bar", "2024-01-01", "*undefined", "&a [*a]", "~",
    "[" * 300 + "]" * 300, "{a: " * 100 + "1" + "}" * 100, "? [x]\n  : y", "|\n  text",
    "'" + "x" * 300 + "'", f"{MARKER}", f"'{MARKER}'", f"'--password={MARKER}'",
    f"'postgres://u:{MARKER}@h/db'", "train me.py", "../../../../etc/hostname",
    "/proc/self/environ", "../../.git/config", "'\\t'", "\t", "yes", "0o777", "1_0",
]

HOSTILE_LINES = [
    "%YAML 1.3\n---", "%YAML 1.1\n---", "%YAML 2.0\n---", "%TAG ! tag:x,2000:\n---", "---",
    "...", "- a", "? [a, b]\n: c", "a: &x [*x]", "<<: {a: 1}", "\t", "#", "'", '"', "{", "[",
]

FIELDS = [
    ("metadata", "name"), ("metadata", "labels"), ("metadata", "annotations"),
    ("spec", "image"), ("spec", "args"), ("spec", "command"), ("spec", "env"),
    ("spec", "script"), ("spec", "port"), ("spec", "roles"), ("spec", "storage"),
    ("spec", "tensorboard"), ("spec", "overlays"), ("spec", "notSecret"), ("spec", "suspend"),
]


@st.composite
def mutated(draw: st.DrawFn, seeds: st.SearchStrategy[str] | None = None) -> str:
    """An example job (or one of `seeds`) with a few line or character mutations."""
    lines = draw(seeds if seeds is not None else st.sampled_from(SEEDS)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, max(len(lines) - 1, 0)))
        action = draw(st.sampled_from(
            ["delete", "double", "swap", "scalar", "line", "character", "indent", "text"]))
        if not lines:
            lines = [""]
        if action == "delete":
            del lines[index]
        elif action == "double":
            lines.insert(index, lines[index])
        elif action == "swap" and index + 1 < len(lines):
            lines[index], lines[index + 1] = lines[index + 1], lines[index]
        elif action == "scalar" and ":" in lines[index]:
            key = lines[index].split(":", 1)[0]
            lines[index] = f"{key}: {draw(st.sampled_from(HOSTILE_SCALARS))}"
        elif action == "line":
            lines.insert(index, draw(st.sampled_from(HOSTILE_LINES)))
        elif action == "character" and lines[index]:
            position = draw(st.integers(0, len(lines[index]) - 1))
            character = draw(st.characters(codec="utf-8"))
            lines[index] = lines[index][:position] + character + lines[index][position + 1:]
        elif action == "indent":
            lines[index] = " " * draw(st.integers(0, 6)) + lines[index].lstrip()
        elif action == "text":
            lines.insert(index, draw(st.text(max_size=40)))
    return "\n".join(lines) + "\n"


SCALARS = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(max_size=20) | st.sampled_from([MARKER, f"--token={MARKER}"]))
STRUCTURES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@st.composite
def generated(draw: st.DrawFn) -> str:
    """The minimal job with a generated structure (JSON is YAML: surrogates, controls and huge
    numbers arrive as escapes and digits) in one of its fields."""
    section, field = draw(st.sampled_from(FIELDS))
    value = json.dumps(draw(STRUCTURES))
    text = _planted(MINIMAL_JOB)
    line = f"  {field}: {value}\n"
    anchor = "  roles:\n" if section == "spec" else "spec:\n"
    if f"  {field}:" in text:
        text = re.sub(rf"^  {field}:.*\n", "", text, flags=re.MULTILINE)
        anchor = "spec:\n" if section == "metadata" else "  roles:\n"
        if field == "roles":
            text = re.sub(r"^    worker:.*\n", "", text, flags=re.MULTILINE)
    if section == "metadata":
        return text.replace("spec:\n", line + "spec:\n", 1)
    return text.replace(anchor, line + anchor, 1) if field != "roles" else text + line


HOSTILE_TEXT = st.text(st.characters(categories=["Cc", "Cs", "Cf", "Zl", "Zs", "L", "N", "P"]),
                       min_size=1, max_size=12)
STRING_FIELDS = [
    ("  image: tensorflow/tensorflow:2.16.1\n", "  image: {}\n"),
    ("  command: [python, /app/train.py]\n", "  command: [python, {}]\n"),
    ("  roles:\n", "  args: [{}]\n  roles:\n"),
    ("  roles:\n", "  env: {{NOTE: {}}}\n  roles:\n"),
    ("  roles:\n", "  env: {{{}: x}}\n  roles:\n"),
    ("  roles:\n", "  script: {}\n  roles:\n"),
    ("  annotations: {", "  annotations: {{text: {}, "),
]


@st.composite
def hostile_strings(draw: st.DrawFn) -> str:
    """The minimal job with a string of control characters, surrogates, format characters or
    any letters in a field that takes text (a value or a key)."""
    old, new = draw(st.sampled_from(STRING_FIELDS))
    return _planted(MINIMAL_JOB).replace(old, new.format(json.dumps(draw(HOSTILE_TEXT))), 1)


CASES = mutated() | generated() | hostile_strings()

POD_TEMPLATE_SEEDS = [_planted(path.read_text(encoding="utf-8"))
                      for path in sorted(PORTED.glob("*.yaml"))
                      if "podTemplate:" in path.read_text(encoding="utf-8")]
"""Ported jobs with pod templates (sidecars, init containers, volumes, affinity, tolerations),
each with the marker planted."""

WRONG_SHAPES = st.sampled_from(["x", 0, -1, True, None, [], [None], ["x"], {}, {"x": None},
                                MARKER, f"--token={MARKER}"])
"""What a part of a pod template may be drawn as instead of its kind: a scalar, null, a list, a
map, a list with an empty item."""

TEMPLATE_STRINGS = st.sampled_from([
    "tensorflow", "side", "tfcompile-state", "script", "data", "/opt/tfcompile", "/data",
    "nvidia.com/gpu", "tfcompile.dev/job", "TF_CONFIG", "Exists", "NoSchedule", "Always", "0",
    "1Gi", "100m", MARKER, f"--password={MARKER}", "",
]) | st.text(max_size=12)


@st.composite
def kubernetes_value(draw: st.DrawFn, schema: Mapping[str, Any], depth: int = 0) -> Any:
    """A value for a Kubernetes schema node, drawn from its own vocabulary (property names,
    types, nesting), one part in eight of another shape."""
    schema = resolve(schema)
    if depth > 8 or draw(st.integers(0, 7)) == 0:
        return draw(WRONG_SHAPES)
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else [kind for kind in kinds if kind != "null"]
    properties = schema.get("properties")
    if properties:
        names = draw(st.lists(st.sampled_from(sorted(properties)), max_size=3, unique=True))
        return {name: draw(kubernetes_value(properties[name], depth + 1)) for name in names}
    if "object" in kinds and isinstance(schema.get("additionalProperties"), Mapping):
        keys = draw(st.lists(TEMPLATE_STRINGS, max_size=2, unique=True))
        return {key: draw(kubernetes_value(schema["additionalProperties"], depth + 1))
                for key in keys}
    if "array" in kinds:
        return draw(st.lists(kubernetes_value(schema.get("items", {}), depth + 1), max_size=2))
    if "integer" in kinds or "number" in kinds:
        return draw(st.integers(-1, 70000))
    if "boolean" in kinds:
        return draw(st.booleans())
    return draw(TEMPLATE_STRINGS | st.integers(0, 70000))


@st.composite
def generated_pod_templates(draw: st.DrawFn) -> str:
    """The minimal job with a pod template drawn from Kubernetes' own schema, at job or role
    level (a key YAML reads as a number thrown in now and then)."""
    fragment = json.dumps(draw(kubernetes_value(definition(ROOT_DEFINITION))))
    if draw(st.booleans()):
        fragment = fragment.replace('"x": ', "1: ", 1)
    text = _planted(MINIMAL_JOB)
    if draw(st.booleans()):
        return text.replace("  roles:\n", f"  podTemplate: {fragment}\n  roles:\n", 1)
    return text.replace("worker: {replicas: 2}", f"worker: {{replicas: 2, podTemplate: "
                        f"{fragment}}}", 1)


@st.composite
def mutated_pod_templates(draw: st.DrawFn) -> str:
    """A ported job with pod templates, with a few line or character mutations."""
    return draw(mutated(st.sampled_from(POD_TEMPLATE_SEEDS)))


POD_TEMPLATE_CASES = generated_pod_templates() | mutated_pod_templates()

ANCHOR_CASES = [
    MINIMAL_JOB.replace("spec:\n", "x-base: &base {replicas: 2, gpus: 1}\nspec:\n", 1)
    .replace("worker: {replicas: 2}", "worker: {<<: *base, replicas: 3}"),
    MINIMAL_JOB + "---\n" + MINIMAL_JOB.replace("name: ", "name: second-"),
    "---\n...\n---\n" + MINIMAL_JOB + "...\n",
    MINIMAL_JOB.replace("apiVersion", "? apiVersion\n:", 1),
    MINIMAL_JOB + "x: !!binary aGk=\ny: !!set {a, b}\nz: !!omap [{a: 1}]\nw: 2024-01-01\n",
    MINIMAL_JOB + "x: &a [1, &b {c: *a}]\ny: *b\n",
    MINIMAL_JOB + "x: [0o17, 017, 0x1F, 1_000, .inf, -.Inf, .NaN, ~, null, yes, On, 1e3]\n",
    MINIMAL_JOB + "x: |+\n  kept\n\ny: >-\n  folded\n  text\nz: 'it''s'\nv: \"\\u263A\"\n",
    MINIMAL_JOB + "x: {a: 1, a: 2}\n",
    "\ufeff" + MINIMAL_JOB,
    MINIMAL_JOB.replace("\n", "\r\n"),
    MINIMAL_JOB + "x:\n- - a\n  - b\n- {c: [d, e]}\n",
    MINIMAL_JOB + "x: !custom {a: 1}\ny: !other text\n",
]
"""Anchors, merge keys, several documents, tags, YAML 1.1 look-alikes and line ends, which the
mutations above rarely produce."""
CASES_AND_ANCHORS = CASES | st.sampled_from(ANCHOR_CASES)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}")


def _assert_the_api_server_accepts(objects: list[dict[str, Any]]) -> None:
    for document in objects:
        for text in _strings(document):
            text.encode("utf-8")  # a lone surrogate fails here
            assert not any(unicodedata.category(c) == "Cc" and c not in "\t\n" for c in text)
        if document["kind"] == "ConfigMap":
            for key in document.get("data", {}):  # the state record has none
                assert CONFIG_MAP_KEY.fullmatch(key) and not key.startswith(".."), key
        dump(document).encode("utf-8")


def run_case(text: str, folder: Path) -> str:
    """Load (and when valid, compile) one case; the outcome, or an AssertionError."""
    path = folder / "job.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        loaded = load_jobs(path)
        objects = [item for job in loaded for item in build_objects(job, shipped_launcher())]
    except SpecError as error:
        assert error.problems
        for problem in error.problems:
            shown = str(problem)
            assert problem.location.line >= 1 and problem.location.column >= 1
            assert problem.location.file == str(path) or problem.location.file.endswith(
                "job.yaml")
            assert shown.isprintable(), shown
            assert MARKER not in problem.message, shown
        return "refused"
    _assert_the_api_server_accepts(objects)
    return "built"


def _folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="tfcompile-fuzz-"))
    for name, text in SCRIPTS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


CASE_SECONDS = 2
"""What one case may take: as long as the worst file within the limits (test_worst_shapes)."""


@contextlib.contextmanager
def _no_hang(seconds: float) -> Iterator[None]:
    """Fail (instead of waiting for ever) when the block has not ended after `seconds`."""

    def hung(signal_number: int, frame: Any) -> None:
        raise AssertionError(f"a case had not ended after {seconds} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run(examples: int, derandomize: bool,
         cases: st.SearchStrategy[str] = CASES,
         judge: Callable[[str, Path], str] = run_case) -> Counter[str]:
    outcomes: Counter[str] = Counter()
    folder = _folder()

    @settings(max_examples=examples, derandomize=derandomize, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(text=cases)
    def check(text: str) -> None:
        started = time.process_time()
        with _no_hang(HANG_SECONDS):
            outcomes[judge(text, folder)] += 1
        assert time.process_time() - started < CASE_SECONDS

    try:
        started = time.monotonic()
        check()
        outcomes["seconds"] = round(time.monotonic() - started)
    finally:
        shutil.rmtree(folder)
    print(f"loader fuzz ({'fixed seed' if derandomize else 'fresh'}): {dict(outcomes)}")
    return outcomes


def test_the_loader_survives_a_fixed_set_of_hostile_cases() -> None:
    outcomes = _run(FAST_EXAMPLES, derandomize=True)
    assert outcomes["built"] > 0 and outcomes["refused"] > 0


@pytest.mark.slow
def test_the_loader_survives_the_whole_fixed_set_of_hostile_cases() -> None:
    outcomes = _run(FIXED_EXAMPLES, derandomize=True)
    assert outcomes["built"] > 0 and outcomes["refused"] > 0


@pytest.mark.slow
def test_the_loader_survives_thousands_of_hostile_cases_pod_templates_included() -> None:
    """The long run: LONG_EXAMPLES cases, a third of them pod templates (mutated ported jobs,
    and fragments drawn from Kubernetes' own schema with parts of the wrong shape), each a job
    or located problems, none taking longer than a file within the limits may."""
    outcomes = _run(LONG_EXAMPLES, derandomize=True, cases=CASES | POD_TEMPLATE_CASES)
    assert outcomes["built"] + outcomes["refused"] >= LONG_EXAMPLES
    assert outcomes["built"] > 0 and outcomes["refused"] > 0


TAGS = [
    "!!int", "!!float", "!!bool", "!!null", "!!str", "!!binary", "!!timestamp", "!!omap",
    "!!set", "!!pairs", "!!map", "!!seq", "!!merge", "!!value", "!!yaml", "!", "!local",
    f"!{MARKER}", "!<tag:yaml.org,2002:int>", "!<tag:yaml.org,2002:timestamp>", "!<!x>",
    "!!python/object/apply:os.system", "!!python/name:os.system", "!!python/tuple", "!e!thing",
]
"""Explicit tags: YAML's own (each with values it cannot hold), local ones, verbatim ones,
Python's, and one through a `%TAG` handle."""

TAGGED_VALUES = [
    "x", "abc", "maybe", "yes", "3", "-1", "2.5", "1e400", ".nan", "0x1F", "1_0", "~", "",
    "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-13-45", "notatime", "aGk=", "'!!!'",
    "[a]", "[a: 1]", "[{a: 1}]", "{a: 1}", "{a}", "[[1, 2]]", MARKER, f"'--token={MARKER}'",
    "'" + "9" * 150 + "'",
]

TAG_PLACES = [
    ("  roles:\n", "  args: [a, {}]\n  roles:\n"),
    ("  roles:\n", "  args:\n  - {}\n  roles:\n"),
    ("  image: tensorflow/tensorflow:2.16.1\n", "  image: {}\n"),
    ("  roles:\n", "  env: {{A: {}}}\n  roles:\n"),
    ("  roles:\n", "  env: {{? {} : x}}\n  roles:\n"),
    ("worker: {replicas: 2}", "worker: {{replicas: {}}}"),
    ("  roles:\n", "  port: {}\n  roles:\n"),
    ("  roles:\n", "  podTemplate: {{spec: {{terminationGracePeriodSeconds: {}}}}}\n  roles:\n"),
    ("  roles:\n", "  podTemplate: {{metadata: {{annotations: {{a: {}}}}}}}\n  roles:\n"),
    ("  roles:\n", "  storage: {{volumes: [{{name: {}, claimName: c, mountPath: /d, "
     "readOnly: true}}]}}\n  roles:\n"),
    ("  name: demo\n", "  name: {}\n"),
    ("kind: TrainingJob\n", "kind: {}\n"),
]
"""Where a tagged node goes: a list item (flow and block), a scalar field, a key, a number, a
pod template, a volume, the name, the kind."""

WHOLE_MAPPING_PLACES = [("spec:\n", "spec: {}\n"), ("metadata:\n", "metadata: {}\n")]
"""Where a tag stands before a block mapping, tagging it whole."""


@st.composite
def tagged_documents(draw: st.DrawFn) -> str:
    """The minimal job with one to three explicit tags, each on a value it may not hold, with an
    anchor before or after it now and then; a `%TAG` directive when a handle is used."""
    text = _planted(MINIMAL_JOB)
    places = draw(st.lists(st.sampled_from(TAG_PLACES + WHOLE_MAPPING_PLACES), min_size=1,
                           max_size=3, unique=True))
    for old, new in places:
        tag = draw(st.sampled_from(TAGS))
        whole = (old, new) in WHOLE_MAPPING_PLACES
        node = tag if whole else f"{tag} {draw(st.sampled_from(TAGGED_VALUES))}".rstrip()
        anchor = draw(st.sampled_from(["", "before", "after"]))
        if anchor == "before":
            node = f"&anchor{len(text)} {node}"
        elif anchor == "after":
            node = node.replace(tag, f"{tag} &anchor{len(text)}", 1)
        if old in text:
            text = text.replace(old, new.format(node), 1)
    if "!e!" in text:
        text = "%TAG !e! tag:example.com,2000:\n---\n" + text
    return text


HOSTILE_NAMES = [
    "/etc/passwd", "/", "a/b", "../x", "..", ".", "a..b", "-a", "a-", ".a", "a.", "UPPER",
    "Mixed-Case", "a_b", "a b", "'a b'", "a" * 63, "a" * 64, "a" * 253, "a" * 254,
    ".".join(["a"] * 127), "ünïcode", "名前", "'\u202eabc'", '"a\u200bb"', '"a\0b"', '"\0"',
    '""', "''", '"\t"', '"a\nb"', '"\ud800"', '"\x1b[2J"', "'C:\\x'", "'a:b'", "0", "1e3",
    "true", "null", "~", "[a]", "{a: b}", "*undefined", MARKER, f"'--token={MARKER}'",
    "data", "shared", "scratch", "script", "tfcompile-state", "tfcompile-home", "tfcompile-tmp",
    "kube-root-ca.crt", "!!str x", "!!binary aGk=", "!local x",
]
"""Names that are paths, `..`, uppercase, too long, Unicode, controls and NUL, not strings,
tfcompile's own, or tagged."""

HOSTILE_PATHS = [
    "/d", "/d/", "//d", "d", "/d/./e", "/d/../e", "//opt/tfcompile/launcher", "/opt/tfcompile",
    "/opt", "/", "/var/run", "/run/secrets/kubernetes.io/serviceaccount", "/tmp", "/tmp/x",
    "/mnt/shared", "/mnt/shared/x", "''", "'a\tb'", '"/d\0"', "/" + "d" * 300, "!!str /d",
]
"""Mount paths: plain, written otherwise than they mount, over tfcompile's folders or the
service-account token's, over another volume's, empty, with controls, tagged."""

VOLUME_TEMPLATES = [
    "storage: {{volumes: [{{name: {name}, claimName: {other}, mountPath: {path}, "
    "readOnly: true}}]}}",
    "storage: {{volumes: [{{name: data, claimName: {name}, mountPath: {path}, readOnly: false, "
    "subPath: {other}}}]}}",
    "storage: {{shared: {{mountPath: {path}, existingClaim: {name}}}}}",
    "podTemplate: {{spec: {{volumes: [{{name: {name}, persistentVolumeClaim: {{claimName: "
    "{other}}}}}], containers: [{{name: tensorflow, volumeMounts: [{{name: {name}, "
    "mountPath: {path}}}]}}]}}}}",
    "podTemplate: {{spec: {{volumes: [{{name: v, configMap: {{name: {name}}}}}, {{name: w, "
    "secret: {{secretName: {other}}}}}], containers: [{{name: side, image: busybox, "
    "volumeMounts: [{{name: v, mountPath: {path}}}]}}]}}}}",
    "podTemplate: {{spec: {{volumes: [{{name: v, projected: {{sources: [{{configMap: {{name: "
    "{name}}}}}, {{secret: {{name: {other}}}}}]}}}}]}}}}",
    "podTemplate: {{spec: {{volumes: [{{name: v, csi: {{driver: d, nodePublishSecretRef: "
    "{{name: {name}}}}}}}, {{name: e, ephemeral: {{volumeClaimTemplate: {{spec: "
    "{{storageClassName: {other}, accessModes: [ReadWriteOnce]}}}}}}}}]}}}}",
    "podTemplate: {{spec: {{volumes: [{{name: v, azureFile: {{secretName: {name}, shareName: "
    "s}}}}], initContainers: [{{name: i, image: busybox, volumeMounts: [{{name: v, "
    "mountPath: {path}, subPath: {other}}}]}}]}}}}",
    "storage: {{shared: {{mountPath: /mnt/shared, size: 1Gi}}}}\ntensorboard: {{logDir: "
    "/mnt/shared/logs, podTemplate: {{spec: {{volumes: [{{name: {name}, secret: {{secretName: "
    "{other}}}}}], containers: [{{name: tensorboard, volumeMounts: [{{name: {name}, "
    "mountPath: {path}}}]}}]}}}}}}",
]
"""Every field that names a volume, a claim, a ConfigMap or a Secret (or a mount path) in the
spec, in `storage`, the roles' pod templates and TensorBoard's."""


@st.composite
def hostile_volume_names(draw: st.DrawFn) -> str:
    """The minimal job with a volume, claim, ConfigMap or Secret name (and a mount path) drawn
    from hostile values, at job or role level."""
    names = st.sampled_from(HOSTILE_NAMES) | st.text(max_size=12).map(json.dumps)
    fragment = draw(st.sampled_from(VOLUME_TEMPLATES)).format(
        name=draw(names), other=draw(names), path=draw(st.sampled_from(HOSTILE_PATHS)))
    text = _planted(MINIMAL_JOB)
    if fragment.startswith("podTemplate") and draw(st.booleans()):
        return text.replace("worker: {replicas: 2}", f"worker: {{replicas: 2, {fragment}}}", 1)
    lines = "".join(f"  {line}\n" for line in fragment.split("\n"))
    return text.replace("  roles:\n", lines + "  roles:\n", 1)


def _has_tag(text: str) -> bool:
    try:
        return any(isinstance(token, TagToken) for token in yaml_limits.pure_tokens(text))
    except (YAMLError, ValueError, TypeError):
        return False


def run_tag_or_volume_case(text: str, folder: Path) -> str:
    """`run_case`, and a file with an explicit tag anywhere is never built."""
    outcome = run_case(text, folder)
    if outcome == "built":
        assert not _has_tag(text), text
    return outcome


@pytest.mark.slow
def test_the_loader_survives_thousands_of_explicit_tags_and_hostile_volume_names() -> None:
    """3,000 derandomized cases (the same in every run), half explicit tags (YAML's own on
    values they cannot hold, local, verbatim and Python tags, through `%TAG` handles, on keys,
    list items, numbers, whole mappings, beside anchors) and half hostile names where a
    volume, claim, ConfigMap or Secret is named (paths, `..`, uppercase, too long, Unicode,
    NUL, tfcompile's own names, tagged) with hostile mount paths: each builds or is refused
    with located problems that repeat no value, never another exception, and no tagged file
    builds. Measured: 3,000 cases in 49 s on a 2-core machine shared with other work."""
    outcomes = _run(TAGS_AND_VOLUMES_EXAMPLES, derandomize=True,
                    cases=tagged_documents() | hostile_volume_names(),
                    judge=run_tag_or_volume_case)
    assert outcomes["built"] + outcomes["refused"] >= TAGS_AND_VOLUMES_EXAMPLES
    assert outcomes["built"] > 0 and outcomes["refused"] > 0


def test_the_loader_survives_fresh_hostile_cases() -> None:
    outcomes = _run(FRESH_EXAMPLES, derandomize=False)
    assert outcomes["built"] + outcomes["refused"] >= FRESH_EXAMPLES


COMMAND_CASES = {
    "deep": "a: " + "[" * 5000 + "]" * 5000 + "\n",
    "version": "%YAML 1.3\n---\n" + SEEDS[-1],
    "digits": SEEDS[-1].replace("roles:\n", "port: " + "7" * 5000 + "\n  roles:\n"),
    "surrogate": SEEDS[-1].replace("roles:\n", 'image: "\\ud800"\n  roles:\n'),
    "duplicate": SEEDS[-1].replace("roles:\n", f"image: {MARKER}\n  roles:\n"),
    "secret": SEEDS[-1].replace("roles:\n", f"env: {{DB_PASSWORD: {MARKER}}}\n  roles:\n"),
    "tag-int": SEEDS[-1].replace("{replicas: 2}", "{replicas: !!int x}"),
    "tag-bool": SEEDS[-1].replace("roles:\n", "suspend: !!bool maybe\n  roles:\n"),
    "tag-local": SEEDS[-1].replace("roles:\n", f"args: [!{MARKER} {MARKER}]\n  roles:\n"),
    "tag-empty": SEEDS[-1].replace("roles:\n", "args: [!<tag:yaml.org,2002:int> ]\n  roles:\n"),
}


@pytest.mark.slow
def test_hostile_files_through_the_real_command(tmp_path: Path) -> None:
    command = Path(sys.executable).with_name("tfcompile")
    for name, text in COMMAND_CASES.items():
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
        completed = subprocess.run(
            [str(command), "build", str(tmp_path / f"{name}.yaml"), "-o", str(tmp_path / "out")],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert completed.returncode == 2, (name, completed.stderr)
        assert "Traceback" not in completed.stderr, name
        assert MARKER not in completed.stdout + completed.stderr, name
        assert f"{name}.yaml:" in completed.stderr, name
    assert not (tmp_path / "out").exists()


def _fixed_cases(cases: st.SearchStrategy[str],
                 examples: int) -> Callable[[Callable[[str], None]], Callable[[], None]]:
    """A property run over `examples` derandomized cases (the same in every run)."""

    def run(check: Callable[[str], None]) -> Callable[[], None]:
        chosen = settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
        return chosen(given(text=cases)(check))

    return run


def _described(tokens: Iterator[Any]) -> list[tuple[Any, ...]]:
    return [(type(token).__name__, getattr(token, "value", None), getattr(token, "plain", None),
             token.start_mark.line, token.start_mark.column) for token in tokens]


@settings(max_examples=FIXED_EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=CASES)
def test_the_fast_scanner_gives_the_limit_checks_the_pure_scanners_tokens(text: str) -> None:
    """The limit checks read libyaml's tokens when libyaml can scan the text: those tokens, and
    so the problems found, must be the pure-Python scanner's (which the spec's parser uses)."""
    try:
        fast = _described(yaml_limits.c_tokens(text))
    except (YAMLError, ValueError, TypeError):
        return  # libyaml refuses it: the pure-Python scanner decides, as before
    assert fast == _described(yaml_limits.pure_tokens(text))
    assert yaml_limits.check_tokens(text, "job.yaml") == list(
        yaml_limits._token_problems(yaml_limits.pure_tokens(text), "job.yaml"))


def _comparable(value: Any) -> Any:
    """`value` with what the copy leaves as the parser made it (a tagged scalar, a timestamp)
    reduced to its type, text and tag, which compare by value (a scalar's style does not
    matter: the spec refuses such values whatever their style)."""
    if isinstance(value, dict):
        return {key: _comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    if value is None or type(value) in (str, int, float, bool):
        return value
    return (type(value).__name__, str(value), str(getattr(value, "tag", "")))


def _value_at(data: Any, path: tuple[Any, ...]) -> Any:
    """The value at `path` of copied data; a marker where the copy has none."""
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return "(not copied)"
    return data


def _copied(documents: list[Any]) -> list[tuple[Any, ...]]:
    """Each document as the loader sees it: plain data, positions of values and keys, and the
    problems the copy found. An empty value (null) has no text of its own: libyaml places it
    where its key ends, the pure-Python parser at the next token (which may be lines further
    down), so the positions of empty values are left out."""
    copies = []
    for document in documents:
        locations = Locations("job.yaml")
        locations.record((), node_position(document), None)
        copier = PlainCopier(locations)
        try:
            data: Any = copier.copy(document, ())
        except TooManyValues:
            data = TooManyValues
        values = {path: position for path, position in locations._values.items()
                  if _value_at(data, path) is not None}
        copies.append((_comparable(data), values, locations._keys, locations._collections,
                       copier.problems))
    return copies


def _documents_agree(text: str) -> None:
    """Specs are parsed by libyaml under the round-trip constructor when it can: whatever it
    builds must be what the pure-Python parser builds, value for value and position for
    position; everything else is the pure-Python parser's to decide."""
    try:
        if yaml_limits.check_tokens(text, "job.yaml"):
            return  # refused before any document is built
    except YAMLError:
        return  # not YAML at all: refused before any document is built
    fast = yaml_documents.fast_documents(text)
    if fast is None:
        return
    assert _copied(fast) == _copied(yaml_documents.pure_documents(text))


test_libyaml_gives_the_loader_the_pure_parsers_documents = _fixed_cases(
    CASES_AND_ANCHORS, FAST_EXAMPLES)(_documents_agree)
test_libyaml_gives_the_pure_parsers_documents_on_every_fixed_case = pytest.mark.slow(
    _fixed_cases(CASES_AND_ANCHORS, FIXED_EXAMPLES)(_documents_agree))


@pytest.mark.parametrize("text", ANCHOR_CASES)
def test_libyaml_and_the_pure_parser_agree_on_anchors_tags_and_documents(text: str) -> None:
    fast = yaml_documents.fast_documents(text)
    if fast is None:  # refused by libyaml: the pure-Python parser must refuse it too
        with pytest.raises(YAMLError):
            yaml_documents.pure_documents(text)
        return
    assert _copied(fast) == _copied(yaml_documents.pure_documents(text))


def test_a_job_is_parsed_by_libyaml() -> None:
    """The fast path is taken for ordinary specs (the examples), not only kept as a fallback."""
    for seed in SEEDS:
        assert yaml_documents.fast_documents(seed) is not None
    assert yaml_documents.fast_documents("%YAML 1.2\n---\n" + MINIMAL_JOB) is None


def _counted_values(text: str) -> int:
    """The values the limit counts, walking the pure-Python scanner's tokens."""
    count = 0
    previous = None
    for token in yaml_limits.pure_tokens(text):
        count += yaml_limits.starts_a_value(token, previous)
        previous = token
    return count


def _nodes(text: str) -> int:
    """The values (nodes: scalars, lists, mappings, keys, empty values) the YAML library
    composes from `text`; an alias counts once, as the node it names is not read again."""
    seen: set[int] = set()
    total = 0

    def walk(node: Any) -> None:
        nonlocal total
        total += 1
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, MappingNode):
            for key, value in node.value:
                walk(key)
                walk(value)
        elif isinstance(node, SequenceNode):
            for item in node.value:
                walk(item)

    for document in YAML(typ="rt").compose_all(text):
        if document is not None:
            walk(document)
    return total


def _values_counted_within_the_file(text: str) -> None:
    """The limit on values is checked on the tokens, before anything is parsed. It may count
    fewer values than a file holds (a few flow forms, `{a, b}`, hold values without tokens,
    which the copy counts), never more: it refuses no file of fewer values."""
    try:
        if yaml_limits.check_tokens(text, "job.yaml"):
            return  # refused before any document is built
        counted = _counted_values(text)
        composed = _nodes(text)
    except YAMLError:
        return  # not YAML: refused before anything is counted
    assert counted <= composed


test_the_limit_on_values_counts_no_value_the_file_lacks = _fixed_cases(
    CASES_AND_ANCHORS, FAST_EXAMPLES)(_values_counted_within_the_file)
test_the_limit_on_values_counts_no_value_on_any_fixed_case = pytest.mark.slow(
    _fixed_cases(CASES_AND_ANCHORS, FIXED_EXAMPLES)(_values_counted_within_the_file))


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*/job.yaml")),
                         ids=lambda path: path.parent.name)
def test_the_limit_counts_every_value_of_the_example_jobs(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert _counted_values(text) == _nodes(text) > 0
