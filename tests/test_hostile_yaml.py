"""Hostile job files: each gives exit 2 with located problems, never a traceback, never an echo
of a value, and keys printed escaped. The cases are the ones mutated files crashed on (deep
nesting, `%YAML 1.3`, integers of thousands of digits) and the ones that built output the API
server refuses (lone surrogates, control characters)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import MINIMAL_JOB, Result
from tfcompile.spec.yaml_limits import EXPLICIT_TAG

MARKER = "hunter2-MARKER-0815"
"""Planted in every case; it must never be printed."""

BLOCKED_SECONDS = 60
"""How long a build refusing a FIFO may take before it is taken as blocked on it: far beyond
its milliseconds, so that a loaded machine cannot fail it; a blocked build waits for ever."""


def with_spec(extra: str) -> str:
    """MINIMAL_JOB with `extra` (indented into `spec:`) and the marker in an annotation."""
    text = MINIMAL_JOB.replace("  name: demo\n",
                               f"  name: demo\n  annotations: {{note: {MARKER}}}\n")
    return text.replace("  roles:\n", textwrap.indent(textwrap.dedent(extra), "  ") + "  roles:\n")


def with_image(line: str) -> str:
    """MINIMAL_JOB with its image line replaced by `line`."""
    return with_spec("").replace("  image: tensorflow/tensorflow:2.16.1\n", "  " + line)


def nested_flow(depth: int) -> str:
    return "[" * depth + MARKER + "]" * depth


def nested_block(depth: int) -> str:
    lines = [f"{'  ' * level}k{level}:" for level in range(depth)]
    return "\n".join(lines) + f" {MARKER}\n"


@dataclass(frozen=True)
class Hostile:
    name: str
    text: str
    at: str  # the text the problem points at
    says: str
    field: str = "(document)"


HOSTILE = [
    Hostile("500 levels of flow nesting", with_spec(f"x: {nested_flow(500)}\n"),
            "[" * (500 - 62) + MARKER, "nested more than 64 levels deep"),
    Hostile("300 levels of block nesting", "x:\n" + textwrap.indent(nested_block(300), "  "),
            "k63:", "nested more than 64 levels deep"),
    Hostile("nesting through an alias", with_spec(
        f"x-deep: &deep {nested_flow(40)}\nx-use: {nested_flow(30)[:-30].replace(MARKER, '*deep')}"
        + "]" * 30 + "\n"), "[" * 8 + MARKER, "nested more than 64 levels deep (through an alias)",
        "spec.x-use" + "[0]" * 62),
    Hostile("%YAML 1.3", "%YAML 1.3\n---\n" + with_spec(""), "%YAML",
            "unsupported %YAML version; allowed: 1.1 and 1.2"),
    Hostile("%YAML 2.0", "%YAML 2.0\n---\n" + with_spec(""), "%YAML",
            "unsupported %YAML version"),
    Hostile("a tag before an unknown %YAML version", "apiVersion: !!binary aGk=\n%YAML 1.3\n---\n"
            + with_spec(""), "%YAML", "unsupported %YAML version"),
    Hostile("integer of 5000 digits", with_spec("port: " + "7" * 5000 + "\n"), "7777",
            "a number of more than 100 characters"),
    Hostile("hexadecimal of 5000 digits", with_spec("port: 0x" + "f" * 5000 + "\n"), "0xff",
            "a number of more than 100 characters"),
    Hostile("!!int tagged string of 5000 digits",
            with_spec('port: !!int "' + "9" * 5000 + '"\n'), '"999',
            "a number of more than 100 characters"),
    Hostile("integer beyond 64 bits", with_spec("port: 99999999999999999999\n"), "9999",
            "is beyond the 64-bit integers Kubernetes stores", "spec.port"),
    Hostile("replicas beyond int32", with_spec("").replace("{replicas: 2}",
                                                           "{replicas: 2147483648}"),
            "2147483648", "must be at most 10000", "spec.roles.worker.replicas"),
    Hostile("negative CPU count", with_spec("").replace(
        "{replicas: 2}", "{replicas: 2, resources: {requests: {cpu: -4}}}"), "-4",
        "must be a string", "spec.roles.worker.resources.requests.cpu"),
    Hostile("lone surrogate in a string", with_spec('args: ["\\ud800"]\n'), '"\\ud800"',
            "contains a lone surrogate (U+D800) at character 1", "spec.args[0]"),
    Hostile("escape sequence in a string", with_spec('args: ["\\e[2J"]\n'), '"\\e[2J"',
            "contains the control character U+001B", "spec.args[0]"),
    Hostile("NUL in a string", with_image('image: "tensorflow\\0"\n'), '"tensorflow',
            "contains the control character U+0000", "spec.image"),
    Hostile("carriage return in a string", with_spec('args: ["a\\rb"]\n'), '"a\\rb"',
            "contains the control character U+000D", "spec.args[0]"),
    Hostile("C1 control in a string", with_spec('args: ["a\\x85"]\n'), '"a\\x85"',
            "contains the control character U+0085", "spec.args[0]"),
    Hostile("key with a newline and an escape sequence",
            with_spec('env: {"A\\nB\\e[31m": x}\n'), '"A\\nB',
            "the key contains the control character U+000A", "spec.env.A\\nB\\x1b[31m"),
    Hostile("key that is a list", with_spec(f"env: {{? [{MARKER}] : x}}\n"), "[hunter2",
            "a key must be a plain string", "spec.env.(key 1)"),
    Hostile("duplicate key", with_spec(f"image: {MARKER}\n"), f"image: {MARKER}",
            "invalid YAML: a key appears twice in one mapping"),
    Hostile("undefined alias", with_spec(f"image: *{MARKER}\n"), f"*{MARKER}",
            "invalid YAML: found undefined alias (…)"),
    *[Hostile(f"explicit tag {tagged}", with_spec(f"args: [a, {tagged}]\n"), tagged,
              EXPLICIT_TAG, "spec.args[1]") for tagged in (
        "!!int x", "!!float abc", "!!bool maybe", "!!null x", "!!str 3", "!!int 3",
        "!!omap [a: 1]", "!!omap {a: 1}", "!!set {a}", "!!set [a]", "!!pairs [a: 1]",
        "!!map {a: 1}", "!!seq [a]", "!!binary aGk=", "!!binary '!!!'", "!!timestamp 2001-12-14",
        "!!timestamp notatime", "!!merge x", "!!value x", "!!yaml x", f"!{MARKER} x",
        f"!{MARKER} {{a: 1}}", "! x", "!<tag:yaml.org,2002:int> x", f"!<!{MARKER}> x",
        "!!python/object/apply:os.system [ls]", "&anchor !!int x", "!!int &anchor x")],
    Hostile("explicit tag without a value", with_spec("x-empty: !!int\n"), "!!int",
            EXPLICIT_TAG, "spec.x-empty"),
    Hostile("explicit tag on a key", with_spec(f"env: {{!!str TAGGED: {MARKER}}}\n"), "!!str",
            EXPLICIT_TAG, "spec.env.TAGGED"),
    Hostile("explicit tag on a key shaped like a credential",
            with_spec("env: {? !!str ghp_" + "a" * 36 + " : x}\n"), "!!str", EXPLICIT_TAG,
            "spec.env.(hidden key)"),
    Hostile("explicit tag on a block mapping", with_spec("env: !!map\n  A: x\n"), "!!map",
            EXPLICIT_TAG, "spec.env"),
    Hostile("explicit tag with a %TAG handle",
            "%TAG !e! tag:example.com,2000:\n---\n" + with_spec("args: [!e!thing x]\n"),
            "!e!thing", EXPLICIT_TAG, "spec.args[0]"),
    Hostile("explicit tag in a pod template", with_spec(
        "podTemplate: {spec: {terminationGracePeriodSeconds: !!float 1e400}}\n"), "!!float",
            EXPLICIT_TAG, "spec.podTemplate.spec.terminationGracePeriodSeconds"),
    Hostile("explicit tag in a second document", with_spec("") + "---\n"
            + with_spec("").replace("name: demo", "name: other").replace(
                "replicas: 2", "replicas: !!int two"), "!!int two", EXPLICIT_TAG,
            "spec.roles.worker.replicas"),
    Hostile("explicit tag in a file the parser then refuses",
            with_spec("args: [!!int x]\nbroken: [\n"), "!!int", EXPLICIT_TAG),
    Hostile("timestamp where a string belongs", with_image("image: 2024-01-01\n"),
            "2024-01-01", "must be a string", "spec.image"),
    Hostile("a value in a wrong enum", with_spec(f"strategy: {MARKER}\n"), MARKER + "\n  roles",
            "must be one of", "spec.strategy"),
    Hostile("a value in a wrong pattern", with_spec("").replace("name: demo",
                                                                f"name: {MARKER}"),
            MARKER, "must be a DNS-1035 label", "metadata.name"),
    Hostile("a string where a number belongs", with_spec(f"port: {MARKER}\n"),
            MARKER + "\n  roles",
            "must be a whole number", "spec.port"),
    Hostile("a mapping where a list belongs", with_spec(f"args: {{a: {MARKER}}}\n"), "args:",
            "must be a list", "spec.args"),
]


def _position(text: str, fragment: str) -> tuple[int, int]:
    start = text.index(fragment)
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


@pytest.mark.parametrize("case", HOSTILE, ids=[case.name for case in HOSTILE])
def test_hostile_input_is_a_located_problem_without_echo(
    case: Hostile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    run_cli: Callable[..., Result],
) -> None:
    (tmp_path / "job.yaml").write_text(case.text, encoding="utf-8", errors="surrogatepass")
    monkeypatch.chdir(tmp_path)
    started = time.process_time()  # the work done, whatever else shares the processor
    result = run_cli("build", "job.yaml", "-o", "output")
    assert time.process_time() - started < 10
    assert result.status == 2, result.stderr
    line, column = _position(case.text, case.at)
    expected = f"job.yaml:{line}:{column}: {case.field}: "
    rows = result.stderr.splitlines()
    assert any(row.startswith(expected) and case.says in row for row in rows), (
        f"expected {expected!r} with {case.says!r}; got:\n{result.stderr}")
    assert MARKER not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert all(row.isprintable() for row in rows)
    assert not (tmp_path / "output").exists()


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_yaml_1_1_and_1_2_directives_are_accepted(
    version: str, write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    path = write_job(f"%YAML {version}\n---\n" + MINIMAL_JOB)
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr


def test_nesting_up_to_the_limit_is_no_depth_problem(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    path = write_job(with_spec(f"x: {nested_flow(60)}\n"))
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert result.status == 2
    assert "spec.x: unknown field" in result.stderr
    assert "nested" not in result.stderr


def test_a_job_file_over_256_kib_is_refused_before_parsing(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    path = write_job(MINIMAL_JOB + "#" * (256 * 1024 - len(MINIMAL_JOB) - 1) + "\n")
    assert path.stat().st_size == 256 * 1024
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    started = time.process_time()  # refused unread: no parsing, whatever else runs beside
    result = run_cli("build", str(path), "-o", str(tmp_path / "out"))
    assert time.process_time() - started < 1
    assert result.status == 2
    assert ("job.yaml:1:1: (document): the file is 262145 bytes; a job file may have at most "
            "262144") in result.stderr


def test_a_fifo_given_as_a_job_file_is_refused_without_blocking(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    os.mkfifo(tmp_path / "job.yaml")
    results: list[Result] = []
    build = threading.Thread(target=lambda: results.append(
        run_cli("build", str(tmp_path / "job.yaml"), "-o", str(tmp_path / "out"))), daemon=True)
    build.start()
    build.join(timeout=BLOCKED_SECONDS)
    if build.is_alive():
        # A build blocked opening the FIFO for reading: a writer's open lets it go on.
        os.close(os.open(tmp_path / "job.yaml", os.O_WRONLY | os.O_NONBLOCK))
        build.join(timeout=BLOCKED_SECONDS)
        pytest.fail(f"the build was still running after {BLOCKED_SECONDS} s: it blocked on the "
                    "FIFO")
    (result,) = results
    assert result.status == 2
    assert "not a regular file" in result.stderr


def test_a_fifo_in_a_searched_folder_is_skipped(
    tmp_path: Path, write_job: Callable[..., Path], run_cli: Callable[..., Result]
) -> None:
    write_job(MINIMAL_JOB)
    os.mkfifo(tmp_path / "jobs" / "pipe.yaml")
    result = run_cli("build", str(tmp_path / "jobs"), "-o", str(tmp_path / "out"))
    assert result.status == 0, result.stderr


def test_a_job_file_that_is_not_utf8_is_refused(
    tmp_path: Path, run_cli: Callable[..., Result]
) -> None:
    (tmp_path / "job.yaml").write_bytes(MINIMAL_JOB.encode() + b"# \xff\xfe\n")
    result = run_cli("build", str(tmp_path / "job.yaml"), "-o", str(tmp_path / "out"))
    assert result.status == 2
    position = len(MINIMAL_JOB.encode()) + 3
    assert f"not UTF-8 text (byte {position}: invalid start byte)" in result.stderr


@pytest.mark.slow
def test_a_reused_anchor_builds_without_printing_the_input(
    write_job: Callable[..., Path], tmp_path: Path
) -> None:
    """Through the real command: the YAML library's warning would print the lines."""
    text = with_spec("").replace(f"{{note: {MARKER}}}",
                                 f"{{a: &{MARKER} x, b: &{MARKER} y, c: *{MARKER}}}")
    completed = subprocess.run(
        [str(Path(sys.executable).with_name("tfcompile")), "build", str(write_job(text)),
         "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert MARKER not in completed.stdout + completed.stderr


TAGGED_VALUES = ["!!int x", "!!float abc", "!!bool maybe", "!!bool", "!!null x",
                 "!!timestamp notatime", "!!binary '!!!'", "!!omap {a: 1}", "!!set [a]",
                 "!!int [a]", "!<tag:yaml.org,2002:int>", f"!{MARKER} x",
                 "!!python/object/apply:os.system [ls]"]


@pytest.mark.parametrize("tagged", TAGGED_VALUES)
def test_what_validate_reads_refuses_a_tag_at_its_place_without_a_traceback(tagged: str) -> None:
    """Kustomizations and manifests (`yaml_input`): a value its tag cannot hold is an error
    that says where, never another exception, and repeats no value."""
    from tfcompile.compiler.yaml_input import (
        YamlInputError,
        read_document,
        read_documents,
        read_generated_document,
        read_manifests,
    )

    text = f"kind: Kustomization\nnamePrefix: {tagged}\n"
    for read in (read_document, read_documents, read_generated_document, read_manifests):
        try:
            read(text)
        except YamlInputError as error:
            assert MARKER not in str(error)
            if "tag cannot hold" in str(error):
                assert str(error).startswith("line 2, column 13: "), str(error)


@pytest.mark.parametrize("tagged", ["!!bool maybe", "!!int x", "!<tag:yaml.org,2002:int>"])
def test_validate_of_a_kustomization_with_a_tag_fails_without_a_traceback(
    tagged: str, tmp_path: Path, write_job: Callable[..., Path],
    run_cli: Callable[..., Result],
) -> None:
    assert run_cli("build", str(write_job(MINIMAL_JOB)), "-o", str(tmp_path / "out")).status == 0
    kustomization = tmp_path / "out" / "demo" / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace(
        "kind: Kustomization\n", f"kind: Kustomization\nnamePrefix: {tagged}\n"))
    result = run_cli("validate", str(tmp_path / "out" / "demo"))
    assert result.status == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert f"{tmp_path / 'out' / 'demo'}: cannot render: " in result.stderr
