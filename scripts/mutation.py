"""How strong the tests are: realistic bugs put into the code one at a time, and which test fails.

A general mutation tool (mutmut, cosmic-ray) mutates every operator of every module and runs the
whole suite for each: over spec/ and compiler/ that is thousands of mutants, days on two cores,
and most of them are noise (a changed docstring, an equivalent `<=` on a value that is never
equal). So the mutants here are curated: each is a bug someone could write or a review could
miss (an off-by-one, an inverted condition, a wrong order, a dropped check, a wrong constant or
key), in the modules whose mistakes reach users: the spec's rules (`spec/`), the compiler proper
(`compiler/objects/`), the launcher (`compiler/launcher/`), `diff` (`compiler/checking/diff/`),
the secret rules (`spec/secrets.py`, `spec/credential_shapes.py`) and the component conflicts of
`validate`. Each names the tests that cover its module (the fast tier there, plus the slow tests
of those files), so a mutant takes seconds, not the whole suite.

The working tree is never touched: the files git knows (and new ones not ignored) are copied once
into a temporary directory, each mutant is written into that copy, its tests run there (the
copy's modules imported through its `.typing/tfcompile` links, no bytecode written, so no stale
cache of another mutant is read), and the file is restored before the next. Each selection of
tests first runs once unmutated: a selection that fails without a mutant kills nothing, and its
mutants are shown as not measured.

It measures and never gates: it prints a table (mutant, killed or survived, the first test that
failed, seconds) and the kill rate, and exits 0. Run:
`.venv/bin/python scripts/mutation.py [--only TEXT]` (TEXT: part of a mutant's name or file).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
MARKERS = "not end_to_end and not cluster and not gitops and not node"
"""The fast tier and the slow one: the others need root, a cluster or real TensorFlow."""
TIMEOUT_SECONDS = 600.0
"""A mutant whose tests run longer (a loop that never ends) counts as killed by the timeout."""

SECRET_TESTS = ("tests/test_secret_rules.py", "tests/test_spec_errors.py", "-k",
                "secret or credential or script")
LAUNCHER_TESTS = ("tests/test_launcher_decisions.py", "tests/test_launcher_from_inside.py",
                  "tests/test_launcher.py")
SWEEP_TESTS = ("tests/test_sweep.py",)
NAME_TESTS = ("tests/test_names_and_topology.py", "tests/test_compiled_objects.py",
              "tests/test_golden.py")
DIFF_TESTS = ("tests/test_diff.py", "tests/test_replicas_diff.py")
COMPONENT_TESTS = ("tests/test_component_conflicts.py", "tests/test_component_reach.py")
LIFECYCLE_TESTS = ("tests/test_lifecycle_fields.py", "tests/test_spec_errors.py", "-k",
                   "deadline or lifecycle or failure")
LIMIT_TESTS = ("tests/test_hostile_yaml.py", "tests/test_worst_shapes.py", "-k",
               "hostile or reach_the_limits")
"""The worst shapes' timings (under two seconds on an idle machine) are left out: on a loaded
machine they fail without a mutant."""


@dataclass(frozen=True)
class Mutant:
    """One bug: `original` (exactly once in `path`) replaced by `replacement`."""

    name: str
    path: str
    original: str
    replacement: str
    bug: str
    tests: tuple[str, ...]


def secret(name: str, path: str, original: str, replacement: str, bug: str) -> Mutant:
    return Mutant(name, path, original, replacement, bug, SECRET_TESTS)


def launcher(name: str, path: str, original: str, replacement: str, bug: str) -> Mutant:
    return Mutant(name, "compiler/launcher/" + path, original, replacement, bug, LAUNCHER_TESTS)


MUTANTS = (
    # The secret rules: names that mean a secret, and credentials by their shape.
    secret("db-pass", "spec/secrets.py", 'if words[-1] == "PASS" and len(words) > 1:',
           'if words[-1] == "PASSES" and len(words) > 1:',
           "wrong constant: DB_PASS is no longer a secret name"),
    secret("pwd-alone", "spec/secrets.py", 'if words == ("PWD",):', 'if words[-1] == "PWD":',
           "wrong condition: DB_PWD is taken for the working directory"),
    secret("storage-key", "spec/secrets.py", '"SESSION", "AUTH", "STORAGE",', '"SESSION", "AUTH",',
           "dropped word: AZURE_STORAGE_KEY is no longer a secret name"),
    secret("last-word", "spec/secrets.py", "if not words or words[-1] in NOT_THE_SECRET:",
           "if not words or words[0] in NOT_THE_SECRET:",
           "wrong index: PASSWORD_FILE is taken for a password"),
    secret("key-pair-words", "spec/secrets.py",
           'first in KEY_QUALIFIERS and second == "KEY"',
           'first in KEY_QUALIFIERS or second == "KEY"',
           "inverted condition: any name with ACCESS, STORAGE, ... is a secret"),
    secret("empty-value", "spec/secrets.py",
           "if isinstance(literal, str) and is_literal(literal) and self.secret_name(name):",
           "if isinstance(literal, str) and self.secret_name(name):",
           "dropped check: an empty or $(VAR) value of a secret name is refused"),
    secret("flag-then-flag", "spec/secrets.py",
           'and not value.startswith("-") and is_literal(value)', "and is_literal(value)",
           "dropped check: `--use-token --epochs` takes the next flag for a token"),
    secret("kubernetes-env-list", "spec/secrets.py",
           'listed_environment = bool(path) and str(path[-1]) == "env"',
           'listed_environment = bool(path) and str(path[-1]) == "envFrom"',
           "wrong key: env in Kubernetes' list form ({name, value}) is not checked"),
    secret("image-field", "spec/secrets.py", 'str(path[-1]) == "image":',
           'str(path[-1]) == "images":', "wrong key: a password in an image reference passes"),
    secret("paired-aws-secret", "spec/secrets.py", "if not self.aws_key_id_seen:",
           "if self.aws_key_id_seen:",
           "inverted condition: a plain AWS secret beside its key id passes"),
    secret("aws-key-id-length", "spec/credential_shapes.py",
           "(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}", "(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{17}",
           "off by one: an AWS access key id of 20 characters is not found"),
    secret("hugging-face-cases", "spec/credential_shapes.py",
           '(?![A-Za-z0-9_])"), _both_cases),', '(?![A-Za-z0-9_])")),',
           "dropped check: a folder such as hf_... is taken for a Hugging Face token"),
    secret("entropy-threshold", "spec/credential_shapes.py",
           "RANDOM_BITS_PER_CHARACTER = 4.5", "RANDOM_BITS_PER_CHARACTER = 4.0",
           "wrong constant: ordinary 40-character values are taken for AWS secrets"),
    secret("path-separators", "spec/credential_shapes.py", "PATH_SEPARATORS = 3",
           "PATH_SEPARATORS = 4", "off by one: a path of four parts is taken for an AWS secret"),
    secret("slack-digits", "spec/credential_shapes.py", "xox[abposr]-[0-9]|", "xox[abposr]-|",
           "dropped check: the placeholder xoxb-your-token is taken for a token"),
    secret("sha512-digest", "spec/credential_shapes.py",
           "if _DIGEST_BEFORE.search(", "if False and _DIGEST_BEFORE.search(",
           "dropped check: a SHA-512 integrity digest is taken for an Azure key"),
    secret("azure-key-bytes", "spec/credential_shapes.py", "return len(decoded) == 64 and",
           "return len(decoded) == 66 and",
           "wrong constant: an Azure storage account key is not found"),
    secret("script-key-pair", "spec/credential_shapes.py",
           "if candidate.random_alone or key_id_found:", "if candidate.random_alone:",
           "dropped case: a script's plain AWS secret beside its key id passes"),
    secret("image-digest", "spec/credential_shapes.py", "@(?!sha[0-9]+:)", "@",
           "dropped check: an image pinned by digest is taken for user:password@registry"),
    # The launcher: release order, failure counting, deadline, gate, result.
    launcher("own-last", "program.py",
             "return ([name for name in statefulsets if not name.endswith(own)]\n"
             "            + [name for name in statefulsets if name.endswith(own)])",
             "return ([name for name in statefulsets if name.endswith(own)]\n"
             "            + [name for name in statefulsets if not name.endswith(own)])",
             "wrong order: a pod scales its own StatefulSet first and loses its token"),
    launcher("evaluator-first", "program.py", "names += last", "names = last + names",
             "wrong order: the evaluator is scaled before the others"),
    launcher("evaluator-early", "program.py",
             'if state.succeeded(settings["evaluatorTasks"]):', "if True:",
             "dropped check: the evaluator is scaled before its final evaluation"),
    launcher("release-before-success", "program.py",
             'if not state.succeeded(settings["successTasks"]):\n        return',
             'if not state.succeeded(settings["successTasks"]):\n        pass',
             "dropped check: one worker's success releases the whole job"),
    launcher("failure-release-order", "program.py",
             'release(state, own_last(settings["releaseFirst"] + settings["releaseLast"], '
             "state.role))",
             'release(state, settings["releaseFirst"] + settings["releaseLast"])',
             "wrong order: on failure a pod scales its own StatefulSet before the others"),
    launcher("max-restarts", "program.py", 'failures > policy["maxRestarts"]',
             'failures >= policy["maxRestarts"]',
             "off by one: the job gives up one restart early"),
    launcher("restarts-said", "program.py", '" after " + str(failures - 1) + " restarts"',
             '" after " + str(failures) + " restarts"',
             "off by one: the record says one restart more than there were"),
    launcher("do-not-retry", "program.py", 'final = status in policy["doNotRetryExitCodes"]',
             "final = False", "dropped check: an exit code that means do not retry is retried"),
    launcher("peer-stopped", "program.py", "if stops > before.get(task, 0)]",
             "if stops >= before.get(task, 0)]",
             "off by one: every failure beside a peer is excused as the peer's stop"),
    launcher("deadline-from-now", "program.py",
             'until = None if deadline is None else started + float(deadline["seconds"])',
             'until = None if deadline is None else time.time() + float(deadline["seconds"])',
             "wrong value: a restart starts the deadline's clock again"),
    launcher("succeeded-any", "records.py",
             'return all(self.records.get(task, "").startswith(wanted) for task in tasks)',
             'return any(self.records.get(task, "").startswith(wanted) for task in tasks)',
             "wrong quantifier: one task's success (or none) counts as all"),
    launcher("failure-count", "records.py", "count = self.failures() + 1",
             "count = self.failures()", "off by one: a failure is not counted"),
    launcher("other-revision-outcome", "records.py",
             "if len(recorded) >= 2 and recorded[1] == self.revision and recorded[0] in (",
             "if len(recorded) >= 2 and recorded[0] in (",
             "dropped check: a new revision idles on the old revision's success"),
    launcher("future-clock", "records.py", "return min(seconds, now), stops",
             "return seconds, stops", "dropped bound: a clock from the future never expires"),
    launcher("result-size", "results.py", "if len(data) > RESULT_MAXIMUM_BYTES:",
             "if len(data) >= RESULT_MAXIMUM_BYTES:",
             "off by one: a result of exactly the maximum size is refused"),
    launcher("result-boolean", "results.py",
             "if isinstance(value, bool) or not isinstance(value, (int, float)):",
             "if not isinstance(value, (int, float)):",
             "dropped check: true and false are recorded as numbers"),
    launcher("gate-self", "gate.py", 'if role != task.get("type") or index != task.get("index"):',
             'if role != task.get("type") and index != task.get("index"):',
             "inverted condition: tasks sharing the role or the index are no peers"),
    launcher("gate-no-answer", "gate.py", "if answer is not None and answer != self.revision:",
             "if answer != self.revision:",
             "dropped check: a restarting peer (no answer) stops a training as superseded"),
    launcher("gate-deadline", "gate.py",
             "if until is not None and time.time() >= until:\n                return False",
             "if until is not None and time.time() >= until:\n                pass",
             "dropped check: a task waiting at the gate waits past its deadline"),
    launcher("failed-task-key", "records.py", "entries[FAILED_TASK_KEY] = self.task",
             "entries[FAILED_REVISION_KEY] = self.task",
             "wrong key: the failed task overwrites the failed revision"),
    # The compiler proper: names, TF_CONFIG, labels, the launcher's settings.
    Mutant("trial-digest-form", "compiler/objects/names.py", 'separators=(",", ":")',
           'separators=(", ", ": ")',
           "wrong form: every trial of every sweep is renamed (and restarts)", SWEEP_TESTS),
    Mutant("trial-digits", "compiler/objects/names.py", "TRIAL_DIGITS = 8", "TRIAL_DIGITS = 7",
           "wrong constant: trial names change length", SWEEP_TESTS),
    Mutant("statefulset-name-limit", "compiler/objects/names.py",
           "if len(statefulset) > STATEFULSET_NAME_MAXIMUM:",
           "if len(statefulset) >= STATEFULSET_NAME_MAXIMUM:",
           "off by one: a StatefulSet name of exactly 52 characters is refused", NAME_TESTS),
    Mutant("last-pod-index", "compiler/objects/names.py",
           "last_pod = pod_name(name, role_key, max(role.replicas - 1, 0))",
           "last_pod = pod_name(name, role_key, 0)",
           "wrong value: the first pod's name is checked, not the longest", NAME_TESTS),
    Mutant("single-pod-tf-config", "compiler/objects/topology.py",
           "return total_pods(job) > 1", "return total_pods(job) >= 1",
           "off by one: a job of one pod gets a TF_CONFIG", NAME_TESTS),
    Mutant("roles-sorted", "compiler/objects/topology.py", "return dict(sorted(hosts.items()))",
           "return dict(hosts.items())",
           "wrong order: TF_CONFIG's roles follow the spec's order", NAME_TESTS),
    Mutant("role-selector", "compiler/objects/labels.py",
           "return {JOB_LABEL: job, ROLE_LABEL: role.value}", "return {JOB_LABEL: job}",
           "dropped key: every role's Service selects every pod of the job", NAME_TESTS),
    Mutant("release-last-role", "compiler/objects/builders/launcher_config_map.py",
           "if role is RoleName.EVALUATOR],", "if role is RoleName.CHIEF],",
           "wrong constant: the chief, not the evaluator, is released last", LAUNCHER_TESTS),
    # The spec's rules.
    Mutant("sweep-maximum", "spec/sweep.py", "if count > MAXIMUM_TRIALS:",
           "if count >= MAXIMUM_TRIALS:",
           "off by one: a grid of exactly the maximum trials is refused", SWEEP_TESTS),
    Mutant("deadline-bounds", "spec/lifecycle_rules.py",
           "not 1 <= seconds <= LONGEST_DEADLINE_SECONDS",
           "not 1 <= seconds < LONGEST_DEADLINE_SECONDS",
           "off by one: the longest deadline allowed is refused", LIFECYCLE_TESTS),
    Mutant("depth-limit", "spec/yaml_limits.py", "if depth > MAXIMUM_DEPTH:",
           "if depth > MAXIMUM_DEPTH + 1:",
           "off by one: one level deeper than the limit is read", LIMIT_TESTS),
    # diff: what merging a change does to a running job.
    Mutant("tf-config-as-env", "compiler/checking/diff/pod_template.py",
           "if variables_before.pop(TF_CONFIG, None) != variables_after.pop(TF_CONFIG, None):",
           "if variables_before.get(TF_CONFIG) != variables_after.get(TF_CONFIG):",
           "wrong value: a TF_CONFIG change is also reported as an env change", DIFF_TESTS),
    Mutant("resources-reason", "compiler/checking/diff/pod_template.py",
           'reasons.add("resources")', 'reasons.add("pod settings")',
           "wrong constant: a resources change is reported as pod settings", DIFF_TESTS),
    Mutant("recreated-reason", "compiler/checking/diff/comparison.py",
           "if name in recreated and not reasons:", "if False:",
           "dropped case: a StatefulSet recreated for an immutable field is no restart",
           DIFF_TESTS),
    Mutant("added-removed", "compiler/checking/diff/comparison.py",
           'what = "added" if key not in before else "removed"',
           'what = "removed" if key not in before else "added"',
           "swapped: an added object is reported as removed", DIFF_TESTS),
    Mutant("job-changed", "compiler/checking/diff/comparison.py",
           "job_changed = set(sets_before) != set(sets_after) or any(own.values())",
           "job_changed = any(own.values())",
           "dropped case: a role added is not what restarts the others", DIFF_TESTS),
    Mutant("immutable-fields", "compiler/checking/diff/comparison.py",
           "if spec_before.get(f) != spec_after.get(f))",
           "if spec_before.get(f) == spec_after.get(f))",
           "inverted condition: unchanged immutable fields recreate the StatefulSet",
           DIFF_TESTS),
    # validate: components that undo what the job or an earlier component set.
    Mutant("restored-later", "compiler/checking/validation/component_conflicts.py",
           "if new == value or final[key].get(fact, _ABSENT) == value:", "if new == value:",
           "dropped check: a setting a later component restores is reported", COMPONENT_TESTS),
    Mutant("origin-component", "compiler/checking/validation/component_conflicts.py",
           "origin = (steps.base if first == 0", "origin = (steps.base if first <= 1",
           "off by one: what the first component added is blamed on the job", COMPONENT_TESTS),
    Mutant("reach-overlap", "compiler/checking/validation/component_reach.py",
           "if changed is None or changed & seen:", "if changed is None:",
           "dropped check: two components patching one kind have their steps told",
           COMPONENT_TESTS),
    Mutant("reach-ahead", "compiler/checking/validation/component_reach.py",
           "ahead |= changed", "ahead = set(changed)",
           "wrong update: a step told forgets the components before the last",
           COMPONENT_TESTS),
    Mutant("reach-identity", "compiler/checking/validation/component_reach.py",
           'segments[1] in {"name", "namespace", "generateName"})',
           'segments[1] in {"name", "generateName"})',
           "dropped case: a JSON patch moving an object's namespace has its steps told",
           COMPONENT_TESTS),
)


@dataclass(frozen=True)
class Outcome:
    """What the tests made of one run: `killed` with the first test that failed (or why the
    run ended), or survived."""

    killed: bool
    by: str
    seconds: float


def copy_repository(destination: Path) -> None:
    """The files git knows, and new ones it does not ignore, as they are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPOSITORY, capture_output=True, check=True).stdout.decode().split("\0")
    for relative in filter(None, listed):
        source = REPOSITORY / relative
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)


def run_tests(copy: Path, tests: tuple[str, ...]) -> Outcome:
    """The tests, in the copy, stopping at the first failure."""
    environment = {**os.environ, "PYTHONPATH": str(copy / ".typing"),
                   "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
               "--durations=0", "--durations-min=1000", "-m", MARKERS, *tests]
    started = time.monotonic()
    try:
        completed = subprocess.run(command, cwd=copy, env=environment, capture_output=True,
                                   text=True, timeout=TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return Outcome(True, f"timeout ({TIMEOUT_SECONDS:.0f} s)", time.monotonic() - started)
    seconds = time.monotonic() - started
    if completed.returncode == 0:
        return Outcome(False, "", seconds)
    failed = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", completed.stdout, re.MULTILINE)
    if failed:
        return Outcome(True, failed.group(1), seconds)
    return Outcome(True, f"pytest exit {completed.returncode}", seconds)


def mutate(copy: Path, mutant: Mutant) -> str:
    """Write the mutant into the copy; the original text of the file (to restore)."""
    path = copy / mutant.path
    text = path.read_text()
    count = text.count(mutant.original)
    if count != 1:
        raise SystemExit(f"mutant {mutant.name}: its original text occurs {count} times in "
                         f"{mutant.path}, not once")
    path.write_text(text.replace(mutant.original, mutant.replacement))
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", default="", help="mutants whose name or file holds this")
    arguments = parser.parse_args()
    # Stopped with SIGTERM, it still removes its copy (the temporary directory's cleanup).
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(143))
    chosen = [mutant for mutant in MUTANTS
              if arguments.only in mutant.name or arguments.only in mutant.path]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tfcompile-mutation-") as directory:
        copy = Path(directory)
        copy_repository(copy)
        baseline: dict[tuple[str, ...], Outcome] = {}
        for tests in dict.fromkeys(mutant.tests for mutant in chosen):
            baseline[tests] = run_tests(copy, tests)
            state = "FAILS" if baseline[tests].killed else "passes"
            print(f"unmutated: {' '.join(tests)} {state} ({baseline[tests].seconds:.1f} s)"
                  + (f": {baseline[tests].by}" if baseline[tests].killed else ""), flush=True)
        rows: list[tuple[Mutant, Outcome | None]] = []
        for mutant in chosen:
            if baseline[mutant.tests].killed:
                rows.append((mutant, None))
                continue
            original = mutate(copy, mutant)
            try:
                outcome = run_tests(copy, mutant.tests)
            finally:
                (copy / mutant.path).write_text(original)
            rows.append((mutant, outcome))
            result = "killed" if outcome.killed else "SURVIVED"
            print(f"{mutant.name:24} {result:8} {outcome.seconds:6.1f} s  {outcome.by}",
                  flush=True)
    print_table(rows, time.monotonic() - started)
    return 0


def print_table(rows: list[tuple[Mutant, Outcome | None]], seconds: float) -> None:
    print()
    print("| mutant | file | bug | result | first failing test | s |")
    print("|---|---|---|---|---|---|")
    for mutant, outcome in rows:
        if outcome is None:
            result, by, took = "not measured (tests fail unmutated)", "", ""
        else:
            result = "killed" if outcome.killed else "**survived**"
            by, took = outcome.by, f"{outcome.seconds:.1f}"
        print(f"| {mutant.name} | {mutant.path} | {mutant.bug} | {result} | {by} | {took} |")
    measured = [outcome for _, outcome in rows if outcome is not None]
    killed = sum(outcome.killed for outcome in measured)
    rate = 100.0 * killed / len(measured) if measured else 0.0
    print()
    print(f"{len(rows)} mutants, {len(measured)} measured, {killed} killed, "
          f"{len(measured) - killed} survived: kill rate {rate:.1f}% in {seconds:.0f} s")
    survivors = [mutant.name for mutant, outcome in rows if outcome and not outcome.killed]
    if survivors:
        print("survivors: " + ", ".join(survivors))


if __name__ == "__main__":
    sys.exit(main())
