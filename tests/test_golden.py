"""The examples are golden tests: compiling examples/ must give exactly the committed output/.

The comparison is `tfcompile build --check`, which diffs the whole tree as text (files added,
changed and removed). Regenerate with `pytest tests/test_golden.py --regenerate-golden`; that is
refused under CI, where a stale output/ must fail instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.conftest import EXAMPLES, OUTPUT, Result, in_ci


def test_output_matches_the_examples(
    request: pytest.FixtureRequest, run_cli: Callable[..., Result]
) -> None:
    if request.config.getoption("--regenerate-golden"):
        if in_ci():
            pytest.fail("--regenerate-golden is refused under CI: a stale output/ must fail")
        result = run_cli("build", "examples", "-o", "output")
        assert result.status == 0, result.stderr
        return
    result = run_cli("build", "examples", "-o", "output", "--check")
    assert result.status == 0, (
        "output/ is stale; run `tfcompile build` (or pytest --regenerate-golden):\n"
        + result.stdout
    )


def test_every_example_has_an_output_directory() -> None:
    """One directory per job: an example's own, or one per trial of the sweep's 3 x 3 grid."""
    examples = sorted(p.parent.name for p in EXAMPLES.glob("*/job.yaml"))
    assert examples == ["mnist", "parameter-server", "sweep", "tensorflow1", "tf-spawner"]
    directories = sorted(p.name for p in OUTPUT.iterdir() if p.is_dir())
    trials = [name for name in directories if name.startswith("sweep-")]
    assert len(trials) == 9
    assert all(re.fullmatch(r"sweep-[0-9a-f]{8}", name) for name in trials), trials
    assert [name for name in directories if name not in trials] == [
        name for name in examples if name != "sweep"]
