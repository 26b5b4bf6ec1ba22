"""Pod Security: compiled pods meet "restricted", and `validate` says which level a job's pods
meet when the job (or a component) asks for more privileges."""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import EXAMPLES, OUTPUT, Result, job_text
from tests.go_modules import POD_SECURITY_ADMISSION, module_directory
from tfcompile.compiler.checking.validation.pod_security import level_of

ADMISSION_PROGRAM = Path(__file__).parent / "pod_security_admission" / "main.go"

ROOT_JOB = job_text("rooted", spec_lines="""\
    podTemplate:
      spec:
        securityContext: {runAsUser: 0, runAsNonRoot: false}
    """)


@functools.cache
def _templates_in_output() -> tuple[tuple[str, dict[str, Any]], ...]:
    """Read once for the session: the committed output is not written by these tests."""
    found = []
    for path in sorted(OUTPUT.glob("*/*.yaml")):
        document = YAML(typ="safe").load(path.read_text())
        if document.get("kind") in ("StatefulSet", "Deployment"):
            found.append((path.name, document["spec"]["template"]))
    return tuple(found)


def templates_in_output() -> list[tuple[str, dict[str, Any]]]:
    """The pod templates of the committed output, each a copy of its own to change."""
    return copy.deepcopy(list(_templates_in_output()))


def test_every_compiled_example_pod_meets_restricted() -> None:
    templates = templates_in_output()
    assert len(templates) >= 10
    for name, template in templates:
        assert level_of(template) == ("restricted", []), name


CHANGES: list[tuple[Callable[[dict[str, Any]], None], str, str]] = [
        (lambda s: s["securityContext"].update(runAsUser=0), "baseline", "user 0"),
        (lambda s: s["securityContext"].pop("runAsNonRoot"), "baseline", "runAsNonRoot"),
        (lambda s: s["securityContext"].pop("seccompProfile"), "baseline", "seccompProfile"),
        (lambda s: s["containers"][0]["securityContext"].pop("allowPrivilegeEscalation"),
         "baseline", "allowPrivilegeEscalation"),
        (lambda s: s["containers"][0]["securityContext"]["capabilities"].update(drop=[]),
         "baseline", "drop ALL"),
        (lambda s: s["volumes"].append({"name": "nfs", "nfs": {"server": "a", "path": "/"}}),
         "baseline", "volume nfs is of type nfs"),
        (lambda s: s["containers"][0]["securityContext"].update(privileged=True),
         "privileged", "privileged"),
        (lambda s: s.update(hostNetwork=True), "privileged", "hostNetwork"),
        (lambda s: s["volumes"].append({"name": "host", "hostPath": {"path": "/"}}),
         "privileged", "hostPath"),
        (lambda s: s["containers"][0]["securityContext"]["capabilities"].update(
            add=["SYS_ADMIN"]), "privileged", "SYS_ADMIN"),
        (lambda s: s["containers"][0]["securityContext"]["capabilities"].update(
            add=["NET_BIND_SERVICE"]), "restricted", ""),
        (lambda s: s["containers"][0]["securityContext"]["capabilities"].update(
            add=["CHOWN"]), "baseline", "CHOWN"),
        (lambda s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
         "privileged", "kernel.msgmax"),
        (lambda s: s["securityContext"].update(sysctls=[
            {"name": "net.ipv4.tcp_syncookies", "value": "1"}]), "restricted", ""),
        (lambda s: s["containers"][0]["securityContext"].update(
            seccompProfile={"type": "Unconfined"}), "privileged", "Unconfined"),
        (lambda s: s["containers"][0]["ports"][0].update(hostPort=2222), "privileged",
         "hostPort"),
        (lambda s: s["containers"][0]["securityContext"].update(runAsNonRoot=False),
         "baseline", "runAsNonRoot"),
        (lambda s: s["volumes"].append({"name": "key", "secret": {"secretName": "k"}}),
         "restricted", ""),
        (lambda s: s.update(hostIPC=True), "privileged", "hostIPC"),
    ]


@pytest.mark.parametrize(("change", "level", "reason"), CHANGES)
def test_each_rule_lowers_the_level(change: Callable[[dict[str, Any]], None], level: str,
                                    reason: str) -> None:
    _, template = templates_in_output()[0]
    changed = copy.deepcopy(template)
    change(changed["spec"])
    found, reasons = level_of(changed)
    assert found == level
    assert any(reason in text for text in reasons) or not reasons, reasons


@pytest.fixture(scope="module")
def admission(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Pod Security evaluation (k8s.io/pod-security-admission), built at test time."""
    go = shutil.which("go")
    if go is None:
        pytest.fail("comparing with the real Pod Security admission needs Go")
    path, version = POD_SECURITY_ADMISSION
    module_directory(POD_SECURITY_ADMISSION)
    directory = tmp_path_factory.mktemp("admission")
    shutil.copy(ADMISSION_PROGRAM, directory / "main.go")
    (directory / "go.mod").write_text(
        f"module tfcompile.dev/podsecurity\n\ngo 1.24.0\n\nrequire {path} {version}\n")
    built = subprocess.run([go, "build", "-o", "admission", "."], cwd=directory,
                           env={**os.environ, "GOFLAGS": "-mod=mod"}, capture_output=True,
                           text=True, timeout=1200, check=False)
    assert built.returncode == 0, built.stderr
    return directory / "admission"


@pytest.mark.slow
def test_the_level_agrees_with_the_real_admission(admission: Path) -> None:
    templates = [template for _, template in templates_in_output()]
    for change, _, _ in CHANGES:
        changed = copy.deepcopy(templates[0])
        change(changed["spec"])
        templates.append(changed)
    evaluated = subprocess.run([str(admission)], input=json.dumps(templates),
                               capture_output=True, text=True, timeout=120, check=True)
    real = json.loads(evaluated.stdout)
    assert [level_of(template)[0] for template in templates] == real
    assert set(real) == {"restricted", "baseline", "privileged"}


def test_validate_reports_the_level_of_a_job_that_runs_as_root(
    write_job: Callable[..., Path], run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    assert run_cli("build", str(write_job(ROOT_JOB)), "-o", str(tmp_path / "out")).status == 0
    result = run_cli("validate", str(tmp_path / "out" / "rooted"))
    assert result.status == 0, result.stdout
    assert ('note: StatefulSet/rooted-worker: its pods meet Pod Security "baseline", not '
            '"restricted" (container tensorflow does not run with runAsNonRoot: true; '
            'container tensorflow runs as user 0; the pod runs as user 0)') in result.stdout


def test_validate_says_the_examples_meet_restricted(
    run_cli: Callable[..., Result], tmp_path: Path,
) -> None:
    assert run_cli("build", str(EXAMPLES / "parameter-server"), "-o",
                   str(tmp_path / "out")).status == 0
    result = run_cli("validate", str(tmp_path / "out" / "parameter-server"))
    assert result.status == 0
    (line,) = [line for line in result.stdout.splitlines()
               if 'note: Pod Security "restricted" is met by the pods of' in line]
    for workload in ("StatefulSet/parameter-server-chief", "StatefulSet/parameter-server-worker",
                     "StatefulSet/parameter-server-ps", "StatefulSet/parameter-server-evaluator",
                     "Deployment/parameter-server-tensorboard"):
        assert workload in line
    assert "not \"restricted\"" not in result.stdout
