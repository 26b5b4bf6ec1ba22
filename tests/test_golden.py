"""The examples are golden tests: compiling examples/ must give exactly the committed output/;
so is a job without the launcher (tests/fixtures/golden/, from a ported TensorFlow 1 job).

The comparison is `tfcompile build --check`, which diffs the whole tree as text (files added,
changed and removed). Regenerate with `pytest tests/test_golden.py --regenerate-golden`; that is
refused under CI, where a stale output/ must fail instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from ruamel.yaml import YAML

from tests.conftest import EXAMPLES, OUTPUT, REPOSITORY, Result, in_ci

GOLDEN_OUTPUT = REPOSITORY / "tests" / "fixtures" / "golden"


GOLDEN = [
    pytest.param("examples", "output", id="examples"),
    # A job with `launcher: none` (TensorFlow 1.x images): no example, since the examples train
    # to success in the cluster tiers, and such a job never records a success.
    pytest.param("tests/fixtures/ported/helm-tensorflow1.yaml", "tests/fixtures/golden",
                 id="no-launcher"),
]
"""(job files, their committed output), relative to the repository."""


@pytest.mark.parametrize(("source", "output"), GOLDEN)
def test_output_matches_the_examples(
    request: pytest.FixtureRequest, run_cli: Callable[..., Result], source: str, output: str
) -> None:
    if request.config.getoption("--regenerate-golden"):
        if in_ci():
            pytest.fail("--regenerate-golden is refused under CI: a stale output/ must fail")
        result = run_cli("build", source, "-o", output)
        assert result.status == 0, result.stderr
        return
    result = run_cli("build", source, "-o", output, "--check")
    assert result.status == 0, (
        f"{output}/ is stale; run `tfcompile build {source} -o {output}` (or pytest "
        "--regenerate-golden):\n" + result.stdout
    )


def test_the_job_without_a_launcher_runs_its_command_alone() -> None:
    """The golden job with `launcher: none`: its command is the container's, with no launcher
    ConfigMap, account, rights, revision gate or token; its state ConfigMap says so."""
    directory = GOLDEN_OUTPUT / "helm-tf1"
    names = sorted(path.name for path in directory.iterdir())
    assert not [name for name in names if "launcher" in name], names
    worker = YAML(typ="safe").load((directory / "statefulset-helm-tf1-worker.yaml").read_text())
    spec = worker["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["command"] == ["python", "/app/train.py"]
    assert container["args"][0] == "--ps_hosts=$(PS_HOSTS)"
    assert [port["containerPort"] for port in container["ports"]] == [2222]
    assert "TFCOMPILE_REVISION" not in [entry["name"] for entry in container["env"]]
    assert [volume["name"] for volume in spec["volumes"]] == ["tfcompile-home", "tfcompile-tmp"]
    assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec
    state = YAML(typ="safe").load((directory / "configmap-helm-tf1-state.yaml").read_text())
    assert state["metadata"]["annotations"]["tfcompile.dev/launcher"] == "none"


def test_every_example_has_an_output_directory() -> None:
    """One directory per job: an example's own, or one per trial of the sweep's 3 x 3 grid
    and one for the sweep's TensorBoard."""
    examples = sorted(p.parent.name for p in EXAMPLES.glob("*/job.yaml"))
    assert examples == ["mnist", "parameter-server", "sweep", "tensorflow1", "tf-spawner"]
    directories = sorted(p.name for p in OUTPUT.iterdir() if p.is_dir())
    trials = [name for name in directories
              if name.startswith("sweep-") and name != "sweep-tensorboard"]
    assert len(trials) == 9
    assert all(re.fullmatch(r"sweep-[0-9a-f]{8}", name) for name in trials), trials
    assert [name for name in directories if name not in trials] == [
        "sweep-tensorboard" if name == "sweep" else name for name in examples]
