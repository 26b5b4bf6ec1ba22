"""Measure how long tfcompile takes: build, build --check and validate, on the examples and on
a large job. Prints numbers; asserts nothing. Run: `.venv/bin/python scripts/benchmark.py`."""

from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tfcompile.compiler.cli import main

REPOSITORY = Path(__file__).resolve().parent.parent

LARGE_JOB = """\
apiVersion: tfcompile.dev/v1alpha1
kind: TrainingJob
metadata: {name: large}
spec:
  image: tensorflow/tensorflow:2.16.1
  command: [python, train.py]
  strategy: ParameterServer
  roles:
    chief: {replicas: 1}
    worker: {replicas: 1000}
    ps: {replicas: 50}
    evaluator: {replicas: 1}
"""


def timed(action: Callable[[], int], repeat: int) -> tuple[float, float]:
    """(median, best) seconds over `repeat` runs; fails loudly if the command fails."""
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            status = action()
        seconds.append(time.perf_counter() - started)
        if status != 0:
            sys.exit(f"benchmark command failed with status {status}")
    return statistics.median(seconds), min(seconds)


def report(name: str, action: Callable[[], int], repeat: int) -> None:
    median, best = timed(action, repeat)
    print(f"{name:<52} median {median * 1000:8.1f} ms   best {best * 1000:8.1f} ms   "
          f"({repeat} runs)")


def main_benchmark() -> None:
    with tempfile.TemporaryDirectory() as temporary:
        output = Path(temporary) / "output"
        examples = str(REPOSITORY / "examples")
        overlays = str(REPOSITORY / "overlays")
        report("build examples (4 jobs, 37 files)",
               lambda: main(["build", examples, "-o", str(output), "--overlays", overlays]), 10)
        report("build --check examples (up to date)",
               lambda: main(["build", examples, "-o", str(output), "--overlays", overlays,
                             "--check"]), 10)
        report("validate examples (kustomize + schemas + topology)",
               lambda: main(["validate", "-o", str(output)]), 5)
        large = Path(temporary) / "large" / "job.yaml"
        large.parent.mkdir()
        large.write_text(LARGE_JOB)
        large_output = Path(temporary) / "large-output"
        report("build one job of 1052 pods",
               lambda: main(["build", str(large), "-o", str(large_output)]), 3)
        report("validate one job of 1052 pods",
               lambda: main(["validate", "-o", str(large_output)]), 3)


if __name__ == "__main__":
    main_benchmark()
