"""How fast tfcompile is, as a user meets it: whole `tfcompile` processes, side by side with a peer.

Every case runs the real command in a fresh process, repeatedly; runs are interleaved (tfcompile,
then its peer, then the import floor, round after round) so that load on the machine affects all
alike, and the medians are printed with their ratios. The peer is `helm template` of the
hand-written chart in `benchmark_chart/`, which renders the same objects (a headless Service and a
StatefulSet per role, TF_CONFIG built with Go templates); the floor is Python importing pydantic
and ruamel.yaml and validating with a one-field pydantic model, which tfcompile cannot go below.
`validate` (of 100 jobs without components, 100 with the GPU and Azure components, and one large
job) is shown next to `kubectl kustomize` (or `kustomize build`) alone, the part of its time
that is Kustomize's; `validate` of the 100-job fleets is also shown next to what a CI without
tfcompile would run: Kustomize on each job, one after the other, and one strict kubeconform over
all they render (the goal: at most half of that). Builds keep their up-to-date records in the
benchmark's own temporary directory; the rows marked "no record" run without one, as a fresh
clone in CI does, and the "fresh output" rows build into a new directory each round, where no
record can help. Python's bytecode
cache is written and used, as in an installed tfcompile (`PYTHONDONTWRITEBYTECODE` is removed from
the environment, and every command runs once before it is measured). After the table, the peak
memory of fresh builds of 1, 100 and 400 jobs shows how memory grows with the number of jobs.
With `tfcompile-kustomize` on PATH (Kustomize's library in one process,
`compiler/rendering/render_server.py`), tfcompile renders with it and the peer with the
kustomize command; the first line says which. Prints numbers, asserts nothing. Run:
`.venv/bin/python scripts/benchmark.py [--rounds N] [--only TEXT]` (`--only "vs kustomize"`:
the two `validate` rows beside Kustomize and kubeconform); with the server,
`PATH=$(dirname $(bash scripts/control-plane.sh kustomize-server-binary)):$PATH` before it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tfcompile.compiler.kubernetes_versions import DEFAULT_KUBERNETES_VERSION, kubeconform_version

REPOSITORY = Path(__file__).resolve().parent.parent
CHART = Path(__file__).resolve().parent / "benchmark_chart"
FLEET_SIZE = 100
MEMORY_FLEETS = (1, 100, 400)
LARGE_WORKERS = 2000

JOB = """\
apiVersion: tfcompile.dev/v1alpha1
kind: TrainingJob
metadata: {{name: {name}}}
spec:
  image: tensorflow/tensorflow:2.16.1
  command: [python, train.py]
  roles:
    chief: {{replicas: 1}}
    worker: {{replicas: {workers}}}
    ps: {{replicas: 1}}
    evaluator: {{replicas: 1}}
"""

COMPONENTS_JOB = """\
apiVersion: tfcompile.dev/v1alpha1
kind: TrainingJob
metadata: {{name: {name}}}
spec:
  image: tensorflow/tensorflow:2.16.1
  command: [python, train.py]
  overlays: [gpu, azure]
  storage:
    shared: {{mountPath: /mnt/shared, size: 10Gi}}
  roles:
    chief: {{replicas: 1}}
    worker: {{replicas: {workers}, gpus: 1}}
    ps: {{replicas: 1}}
    evaluator: {{replicas: 1}}
"""
"""The same job on GPU nodes with Azure storage: `validate` also checks what each component
changes."""

FLOOR = ("from pydantic import BaseModel; from ruamel.yaml import YAML; "
         "type('Floor', (BaseModel,), {'__annotations__': {'x': int}})(x=1)")
"""Python importing pydantic and ruamel.yaml and validating with one one-field model: pydantic
imports its schema builder (and its plugin lookup) only when the first model is defined."""


@dataclass
class Measured:
    """Wall-clock seconds, CPU seconds and peak memory (KiB) of each run of one command."""

    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    peak_kib: list[int] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_seconds)


def run(command: Sequence[str], cwd: Path) -> tuple[float, float, int]:
    """Run `command` to its end; its wall-clock seconds, CPU seconds (user and system: less
    sensitive than wall-clock time to other work on the machine) and peak memory in KiB."""
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    assert process.stderr is not None
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit(f"benchmark: {' '.join(command)} failed ({process.returncode}):\n"
                 f"{error.decode(errors='replace')}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def tfcompile_command() -> list[str]:
    script = Path(sys.executable).parent / "tfcompile"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tfcompile.compiler.cli"]


def find_helm() -> str | None:
    """`helm` on PATH, else in Go's bin directory (`go install helm.sh/helm/v3/cmd/helm@...`)."""
    found = shutil.which("helm")
    if found is not None:
        return found
    go = shutil.which("go")
    if go is None:
        return None
    gopath = subprocess.run([go, "env", "GOPATH"], capture_output=True, text=True,
                            check=False).stdout.strip()
    candidate = Path(gopath.split(os.pathsep)[0] if gopath else "") / "bin" / "helm"
    return str(candidate) if gopath and candidate.is_file() else None


def kubeconform_schemas(cache: Path) -> str:
    """kubeconform's `-schema-location` for the schemas `validate` uses (written once, here)."""
    from tfcompile.compiler.checking.validation import kubeconform_schemas as layout

    return layout.schema_location(layout.prepare(cache, [DEFAULT_KUBERNETES_VERSION]))


def find_kubeconform() -> str | None:
    """kubeconform in the virtualenv beside this Python (where `scripts/setup.sh` puts it), else
    on PATH."""
    beside = Path(sys.executable).parent / "kubeconform"
    return str(beside) if beside.is_file() else shutil.which("kubeconform")


def find_kustomize() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


def write_jobs(directory: Path, names: Sequence[str], workers: int, text: str = JOB) -> None:
    for name in names:
        (directory / name).mkdir(parents=True)
        (directory / name / "job.yaml").write_text(text.format(name=name, workers=workers))


@dataclass
class Case:
    """One line of the table: tfcompile's command and, when there is one, its peer's."""

    title: str
    tfcompile: Callable[[int], list[list[str]]]  # round -> commands run for one measurement
    peer: Callable[[], list[list[str]]] | None = None
    goal: str = ""
    prepare: Callable[[int], None] | None = None  # round -> work before it, not measured
    results: dict[str, Measured] = field(default_factory=dict)


def measure(cases: list[Case], rounds: int, cwd: Path) -> None:
    for number in range(rounds):
        for case in cases:
            if case.prepare is not None:
                case.prepare(number)
            for column, commands in (
                ("tfcompile", case.tfcompile(number)),
                ("peer", case.peer() if case.peer else []),
                ("floor", [[sys.executable, "-c", FLOOR]]),
            ):
                if not commands:
                    continue
                seconds, cpu_seconds, peak = 0.0, 0.0, 0
                for command in commands:
                    elapsed, cpu, used = run(command, cwd)
                    seconds += elapsed
                    cpu_seconds += cpu
                    peak = max(peak, used)
                measured = case.results.setdefault(column, Measured())
                measured.seconds.append(seconds)
                measured.cpu_seconds.append(cpu_seconds)
                measured.peak_kib.append(peak)


def milliseconds(value: float) -> str:
    return f"{value * 1000:8.0f} ms"


def report(cases: list[Case], peer_name: str, rounds: int) -> None:
    print(f"medians of {rounds} interleaved runs, wall clock (cpu = user + system time); "
          f"floor = python -c '{FLOOR}'")
    print(f"{'case':<50} {'tfcompile':>11} {'cpu':>11} {'peak':>7} {peer_name:>13} "
          f"{'cpu':>11} {'ratio':>6} {'floor':>11} {'cpu':>11}  goal")
    for case in cases:
        ours = case.results["tfcompile"]
        peer = case.results.get("peer")
        floor = case.results["floor"]
        peer_text = milliseconds(peer.median) if peer else "      —    "
        peer_cpu = milliseconds(peer.cpu_median) if peer else "      —    "
        ratio = f"{ours.median / peer.median:5.2f}x" if peer else "    — "
        print(f"{case.title:<50} {milliseconds(ours.median):>11} "
              f"{milliseconds(ours.cpu_median):>11} {max(ours.peak_kib) // 1024:4d} MB "
              f"{peer_text:>13} {peer_cpu:>11} {ratio:>6} {milliseconds(floor.median):>11} "
              f"{milliseconds(floor.cpu_median):>11}  {case.goal}")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main_benchmark(arguments: Sequence[str] | None = None) -> None:
    options = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    options.add_argument("--rounds", type=int, default=7, help="runs of each command (default 7)")
    options.add_argument("--only", default="", metavar="TEXT",
                         help="measure only the rows whose title contains TEXT (and no memory)")
    parsed = options.parse_args(arguments)
    rounds = parsed.rounds
    helm = find_helm()
    kustomize = find_kustomize()
    tfcompile = tfcompile_command()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    print(f"before: {load()}")
    server = shutil.which("tfcompile-kustomize")
    print("tfcompile renders with "
          + (f"tfcompile-kustomize ({server}), the peer with the kustomize command"
             if server else "the same kustomize command as the peer"))
    with tempfile.TemporaryDirectory(prefix="tfcompile-benchmark-") as temporary:
        root = Path(temporary)
        os.environ["TFCOMPILE_CACHE_DIR"] = str(root / "records")
        write_jobs(root / "one", ["job-0"], 2)
        fleet = [f"job-{number}" for number in range(FLEET_SIZE)]
        write_jobs(root / "fleet", fleet, 2)
        write_jobs(root / "edited", fleet, 2)
        write_jobs(root / "large", ["large"], LARGE_WORKERS)
        write_jobs(root / "components", fleet, 2, COMPONENTS_JOB)
        overlays = str(REPOSITORY / "overlays")

        def build(inputs: str, output: str, *extra: str) -> list[str]:
            return [*tfcompile, "build", inputs, "-o", output, "--overlays", overlays, *extra]

        def without_record(command: list[str]) -> list[str]:
            return ["env", "TFCOMPILE_CACHE_DIR=", *command]

        def edit_one_job(number: int) -> None:
            """A commit that changes one job: every round gives job-0 another worker count."""
            (root / "edited" / "job-0" / "job.yaml").write_text(
                JOB.format(name="job-0", workers=3 + number))

        for inputs, output in (("fleet", "fleet-output"), ("edited", "edited-output"),
                               ("large", "large-output"), ("one", "one-output-warm"),
                               ("components", "components-output")):
            run(build(inputs, output), root)
        run([sys.executable, "-c", FLOOR], root)

        def helm_runs(names: Sequence[str]) -> Callable[[], list[list[str]]]:
            if helm is None:
                return lambda: []
            return lambda: [[helm, "template", name, str(CHART), "--set", f"name={name}"]
                            for name in names]

        kubeconform = find_kubeconform()
        schema_location = kubeconform_schemas(root / "kubeconform-schemas")

        def kubeconform_peer(output: str) -> Callable[[], list[list[str]]] | None:
            """What a CI without tfcompile would run: Kustomize on each job, one after the
            other, and one strict kubeconform over all that they render (offline, on the
            schemas `validate` uses)."""
            if kustomize is None or kubeconform is None:
                return None
            renderings = " ".join(shlex.join([*kustomize, f"{output}/{name}"]) + "; echo ---;"
                                  for name in fleet)
            check = shlex.join([kubeconform, "-strict", "-summary", "-kubernetes-version",
                                kubeconform_version(DEFAULT_KUBERNETES_VERSION),
                                "-schema-location", schema_location, "-"])
            return lambda: [["sh", "-c", f"set -e; {{ {renderings} }} | {check}"]]

        cases = [
            Case("build: one job (chief, 2 workers, ps, evaluator)",
                 lambda number: [build("one", f"one-output-{number}")],
                 helm_runs(["job-0"]), "≤ 2x helm"),
            Case(f"build: {FLEET_SIZE} such jobs, one call (fresh output)",
                 lambda number: [build("fleet", f"fleet-output-{number}")],
                 helm_runs(fleet), "≤ 0.2x helm (≤ 0.75 s)"),
            Case(f"build: {FLEET_SIZE} jobs, no change (rebuild)",
                 lambda number: [build("fleet", "fleet-output")], helm_runs(fleet)),
            Case(f"build --check: {FLEET_SIZE} jobs, up to date",
                 lambda number: [build("fleet", "fleet-output", "--check")], helm_runs(fleet)),
            Case(f"build: {FLEET_SIZE} jobs, one spec edited",
                 lambda number: [build("edited", "edited-output")], helm_runs(fleet),
                 prepare=edit_one_job),
            Case(f"build: {FLEET_SIZE} jobs, no change, no record",
                 lambda number: [without_record(build("fleet", "fleet-output"))],
                 helm_runs(fleet)),
            Case(f"build --check: {FLEET_SIZE} jobs, up to date, no record",
                 lambda number: [without_record(build("fleet", "fleet-output", "--check"))],
                 helm_runs(fleet)),
            Case(f"validate: {FLEET_SIZE} jobs",
                 lambda number: [[*tfcompile, "validate", "-o", "fleet-output"]],
                 (lambda: [[*kustomize, f"fleet-output/{name}"] for name in fleet])
                 if kustomize else None),
            Case(f"validate: {FLEET_SIZE} jobs vs kustomize each + kubeconform all",
                 lambda number: [[*tfcompile, "validate", "-o", "fleet-output"]],
                 kubeconform_peer("fleet-output"), "≤ 0.3x peer"),
            Case(f"validate: {FLEET_SIZE} jobs with components gpu, azure",
                 lambda number: [[*tfcompile, "validate", "-o", "components-output"]],
                 (lambda: [[*kustomize, f"components-output/{name}"] for name in fleet])
                 if kustomize else None),
            Case(f"validate: {FLEET_SIZE} jobs with components vs kustomize + kubeconform",
                 lambda number: [[*tfcompile, "validate", "-o", "components-output"]],
                 kubeconform_peer("components-output"), "≤ 0.5x peer"),
            Case(f"validate: one job of {LARGE_WORKERS} workers",
                 lambda number: [[*tfcompile, "validate", "large-output/large"]],
                 (lambda: [[*kustomize, "large-output/large"]]) if kustomize else None,
                 "≤ 1 s beyond kustomize, < 200 MB"),
        ]
        if kubeconform is None:
            print("kubeconform: not on PATH (its rows have no peer); scripts/setup.sh "
                  "installs it into the virtualenv")
        if helm is None:
            print("helm: not installed (peer columns empty); "
                  "go install helm.sh/helm/v3/cmd/helm@v3.22.0")
        cases = [case for case in cases if parsed.only in case.title]
        measure(cases, rounds, root)
        memory = [] if parsed.only else memory_by_jobs(root, build, without_record)
    peer_name = "helm / kust." if helm else "kustomize"
    report(cases, peer_name, rounds)
    large = [case.results for case in cases if case.title.startswith("validate: one job")]
    validate = large[0] if large else {}
    if "peer" in validate:
        beyond = validate["tfcompile"].median - validate["peer"].median
        beyond_cpu = validate["tfcompile"].cpu_median - validate["peer"].cpu_median
        print(f"validate beyond {' '.join(kustomize or [])}: {beyond * 1000:.0f} ms "
              f"(cpu {beyond_cpu * 1000:.0f} ms; a process's cpu includes its children's)")
    if memory:
        print("peak memory of a fresh build, no record: " + ", ".join(
            f"{count} job{'s' if count > 1 else ''} {kib / 1024:.1f} MB" for count, kib in memory)
            + f"; {(memory[-1][1] - memory[1][1]) / (memory[-1][0] - memory[1][0]):.1f} KB "
            f"more per job from {memory[1][0]} to {memory[-1][0]} jobs")
    print(f"after: {load()}")


def memory_by_jobs(root: Path, build: Callable[..., list[str]],
                   without_record: Callable[[list[str]], list[str]]) -> list[tuple[int, int]]:
    """Peak memory (KiB) of one fresh build of each of `MEMORY_FLEETS` jobs (the median of
    three runs)."""
    measured = []
    for count in MEMORY_FLEETS:
        inputs = f"memory-{count}"
        write_jobs(root / inputs, [f"job-{number}" for number in range(count)], 2)
        peaks = []
        for attempt in range(3):
            output = f"memory-{count}-output-{attempt}"
            peaks.append(run(without_record(build(inputs, output)), root)[2])
            shutil.rmtree(root / output)
        measured.append((count, int(statistics.median(peaks))))
    return measured


if __name__ == "__main__":
    main_benchmark()
