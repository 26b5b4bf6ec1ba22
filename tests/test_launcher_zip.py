"""The launcher's zip as the pods get it: every Python here runs it and builds the same bytes.

TensorFlow images bring CPython or PyPy 3.8 and later, and run the launcher with their own
`zipimport` (`output/launcher_zip.py`). These run the shipped zip with every such Python this
machine has (this one's, `python3.X` and `pypy3` on PATH, pyenv's versions): it prints its usage
without a command, and trains, records success and idles with its settings beside it, as the
ConfigMap's volume holds them. They also build the zip with each of them, since `build --check`
on another machine must find the same bytes, and replace the zip under a running launcher as the
kubelet does (a new directory, the link swapped, the old directory removed), which a launcher
that imported every module at its start never reads.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_launcher import settings_of
from tfcompile.compiler.objects import launcher_interface as launcher
from tfcompile.compiler.output import launcher_zip
from tfcompile.compiler.output.launcher_zip import (
    launcher_archive,
    launcher_modules,
    launcher_program,
    shipped_launcher,
)

pytestmark = pytest.mark.slow

OLDEST = (3, 8)
"""The oldest Python of a TensorFlow image the launcher runs on."""


def interpreters() -> list[str]:
    """This machine's Pythons of `OLDEST` or later, each once (by the interpreter a name or a
    pyenv shim resolves to)."""
    candidates = [sys.executable]
    for name in [*(f"python3.{minor}" for minor in range(8, 15)), "python3", "pypy3"]:
        found = shutil.which(name)
        if found is not None:
            candidates.append(found)
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += [str(path) for path in sorted(root.glob("*/bin/python3"))]
    question = ("import os, sys; print(sys.version_info[:2] >= " + repr(OLDEST)
                + ", os.path.realpath(sys.executable))")
    chosen: dict[str, str] = {}
    for candidate in candidates:
        try:
            answer = subprocess.run([candidate, "-c", question], capture_output=True, text=True,
                                    timeout=30, check=False)
        except OSError:
            continue
        recent, _, resolved = answer.stdout.strip().partition(" ")
        if answer.returncode == 0 and recent == "True":
            chosen.setdefault(resolved, candidate)
    return sorted(chosen.values())


@pytest.fixture(scope="module")
def pythons() -> list[str]:
    """Found once, when a test of this module runs (never when the fast tier collects it)."""
    return interpreters()


def mounted(directory: Path, archive: bytes, settings: dict[str, object]) -> Path:
    """The launcher's ConfigMap as the kubelet writes a volume: a timestamped directory, `..data`
    linking to it, and each key a link through `..data`; the zip's path."""
    directory.mkdir(parents=True, exist_ok=True)
    swap(directory, "..2024_01_01", archive, settings)
    for key in (launcher.PROGRAM_FILE, launcher.SETTINGS_FILE):
        (directory / key).symlink_to(f"..data/{key}")
    return directory / launcher.PROGRAM_FILE


def swap(directory: Path, name: str, archive: bytes, settings: dict[str, object]) -> None:
    """The kubelet's update of a ConfigMap volume: the new files in a new directory, `..data`
    replaced by a link to it at once, the old directory removed."""
    (directory / name).mkdir()
    (directory / name / launcher.PROGRAM_FILE).write_bytes(archive)
    (directory / name / launcher.SETTINGS_FILE).write_text(launcher.settings_text(settings))
    old = (directory / "..data").resolve() if (directory / "..data").exists() else None
    (directory / "..data_tmp").symlink_to(name)
    os.replace(directory / "..data_tmp", directory / "..data")
    if old is not None:
        shutil.rmtree(old)


def start_launcher(python: str, program: Path, state: Path, command: str
                   ) -> subprocess.Popen[str]:
    """The container's command, with this machine's `python`; the settings are the ones beside
    the zip (no `--settings`)."""
    return subprocess.Popen(
        [python, str(program), f"--state={state}", f"--account={state / 'no-account'}",
         "--role=worker", "--", "sh", "-c", command],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        env={**os.environ, "TASK_INDEX": "0", "TFCOMPILE_REVISION": "0123456789ab"})


def wait_for(path: Path, process: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.1)


def stopped(process: subprocess.Popen[str]) -> str:
    """SIGTERM as the kubelet sends it: an idle launcher exits 0; its output."""
    process.send_signal(signal.SIGTERM)
    try:
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return process.stdout.read() if process.stdout else ""


def test_this_machine_has_a_python_to_run_the_zip_with(pythons: list[str]) -> None:
    assert any(os.path.samefile(sys.executable, python) for python in pythons)


def test_the_zip_prints_its_usage_without_a_command(pythons: list[str], tmp_path: Path) -> None:
    program = tmp_path / launcher.PROGRAM_FILE
    program.write_bytes(shipped_launcher().archive)
    for python in pythons:
        completed = subprocess.run([python, str(program), "--role=worker"], capture_output=True,
                                   text=True, timeout=60, check=False)
        assert completed.returncode == 2, (python, completed.stderr)
        assert "usage: tfcompile-launcher.pyz --role=ROLE" in completed.stderr, python


def test_the_zip_trains_records_success_and_idles(pythons: list[str], tmp_path: Path) -> None:
    for number, python in enumerate(pythons):
        pod = tmp_path / str(number)
        state = pod / "state"
        state.mkdir(parents=True)
        program = mounted(pod / "launcher", shipped_launcher().archive, settings_of(pod))
        process = start_launcher(python, program, state, "echo trained")
        wait_for(state / launcher.SUCCEEDED, process)
        output = stopped(process)
        assert "trained" in output and "training succeeded; idling" in output, python


def test_every_python_builds_the_same_bytes(pythons: list[str], tmp_path: Path) -> None:
    """`launcher_archive` as it is, run by each Python on the same modules."""
    source = inspect.getsource(launcher_archive).replace(" -> bytes", "").replace(
        ": tuple[tuple[str, str], ...]", "")
    (tmp_path / "modules.json").write_text(json.dumps(launcher_modules()))
    (tmp_path / "build.py").write_text(
        "import hashlib, io, json, sys, zipfile\n"
        f"TIMESTAMP = {launcher_zip.TIMESTAMP!r}\nFILE_MODE = {launcher_zip.FILE_MODE!r}\n"
        f"UNIX = {launcher_zip.UNIX!r}\n{source}\n"
        "modules = tuple(tuple(item) for item in json.load(open(sys.argv[1])))\n"
        "print(hashlib.sha256(launcher_archive(modules)).hexdigest())\n")
    for python in pythons:
        completed = subprocess.run(
            [python, str(tmp_path / "build.py"), str(tmp_path / "modules.json")],
            capture_output=True, text=True, timeout=60, check=True)
        assert completed.stdout.strip() == shipped_launcher().digest(), python


def test_two_builds_are_the_same_bytes() -> None:
    assert launcher_archive(launcher_modules()) == launcher_archive(launcher_modules()) == (
        shipped_launcher().archive)
    assert hashlib.sha256(shipped_launcher().archive).hexdigest() == shipped_launcher().digest()


def test_a_zip_replaced_under_a_running_launcher_is_not_read(tmp_path: Path) -> None:
    """The same protocol's new zip, put in place by the kubelet while the training runs: the
    running launcher records its success with the modules it imported at its start (the new
    zip's modules would fail at once, and its entries lie at other offsets)."""
    state = tmp_path / "state"
    state.mkdir()
    settings = settings_of(tmp_path)
    program = mounted(tmp_path / "launcher", shipped_launcher().archive, settings)
    go, training = tmp_path / "go", tmp_path / "training"
    process = start_launcher(sys.executable, program, state,
                             f"touch {training}; while [ ! -e {go} ]; do sleep 0.1; done; "
                             "echo trained")
    wait_for(training, process)  # started, past the revision gate, training
    broken = launcher_program(tuple(
        (name, "# padding that moves every entry\n" * 50
         + (f"raise SystemExit('the new zip was read: {name}')\n")) for name, _ in
        launcher_modules()))
    swap(tmp_path / "launcher", "..2024_01_02", broken.archive, settings)
    assert program.read_bytes() == broken.archive
    go.touch()
    wait_for(state / launcher.SUCCEEDED, process)
    output = stopped(process)
    assert "training succeeded; idling" in output and "new zip" not in output
    # A launcher that starts now runs the new zip.
    completed = subprocess.run([sys.executable, str(program), "--role=worker"],
                               capture_output=True, text=True, timeout=60, check=False)
    assert "the new zip was read: __main__.py" in completed.stderr
