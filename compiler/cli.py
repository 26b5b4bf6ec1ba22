"""The `tfcompile` command: a thin shell that parses arguments and reports results.

Exit status: 0 success; 1 a check failed (stale output, invalid manifests), the machine refused
(disk full, read-only, permission denied: one line with the path and the reason) or an internal
error; 2 the input has problems (each printed as `file:line:col: field: message`), the output tree
holds something tfcompile will not overwrite or follow, or the usage is wrong.

Each command imports what it runs inside its function: `build` runs in pre-commit hooks and CI
on every change, and must not pay for loading the validator, the renderer or the local runner.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tfcompile.compiler.output.errors import OutputEnvironmentError, OutputRefused
from tfcompile.spec.problems import SpecError, UnreadableInput

from .kubernetes_versions import DEFAULT_KUBERNETES_VERSION, OLDEST_KUBERNETES_VERSION

if TYPE_CHECKING:
    from tfcompile.compiler.output.build import Prune

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _build(arguments: argparse.Namespace) -> int:
    from tfcompile.compiler.output.build import BuildSettings, Result, build

    settings = BuildSettings(
        inputs=[Path(p) for p in arguments.paths] or [Path(".")],
        output=Path(arguments.output),
        overlays=Path(arguments.overlays),
    )
    outcome = build(settings, check=arguments.check, allow_recreate=arguments.allow_recreate)
    for note in outcome.notes:
        print(f"tfcompile: note: {note}", file=sys.stderr)
    if outcome.result is Result.NO_JOBS:
        from tfcompile.spec.loading import display_path

        shown = ", ".join(display_path(path) for path in outcome.inputs)
        print(f"tfcompile: no job spec (kind: TrainingJob) found in {shown}; nothing to build "
              f"and nothing to prune in {settings.output}", file=sys.stderr)
        if outcome.changed_files:
            print(f"tfcompile: wrote {settings.output / 'README.md'}, which keeps the "
                  "directory in git with no job in it (the path Flux reads)", file=sys.stderr)
        return EXIT_OK
    if outcome.result is Result.REFUSED:
        for refusal in outcome.refusals:
            print(f"tfcompile: {refusal}", file=sys.stderr)
        print("tfcompile: nothing was written", file=sys.stderr)
        return EXIT_FAILED
    if outcome.result is Result.UP_TO_DATE:
        print(f"tfcompile: {settings.output} is up to date", file=sys.stderr)
        return EXIT_OK
    if outcome.result is Result.STALE:
        sys.stdout.write(outcome.difference)
        _report_prunes(outcome.prunes, "would prune")
        if outcome.difference:
            print(
                f"tfcompile: {settings.output} is stale ({outcome.changed_files} files differ); "
                "run `tfcompile build` and commit the result",
                file=sys.stderr,
            )
        for entry in outcome.foreign:
            print(f"tfcompile: {entry}", file=sys.stderr)
        if outcome.foreign:
            print(f"tfcompile: {settings.output} holds {len(outcome.foreign)} file(s) or "
                  "folder(s) tfcompile did not write; the tree Argo CD and Flux sync holds only "
                  "what tfcompile writes: move them out of it", file=sys.stderr)
        return EXIT_FAILED
    _report_prunes(outcome.prunes, "pruned")
    print(
        f"tfcompile: built {outcome.jobs} job(s) into {settings.output} "
        f"({outcome.changed_files} file(s) changed)",
        file=sys.stderr,
    )
    return EXIT_OK


def _report_prunes(prunes: Sequence[Prune], verb: str) -> None:
    for prune in prunes:
        also = f"; kept what tfcompile did not write: {', '.join(prune.kept)}" if prune.kept else ""
        print(f"tfcompile: {verb} {prune.directory} ({prune.reason}){also}", file=sys.stderr)


def _job_directories(paths: Sequence[str], output: Path) -> list[Path]:
    """The directories named, or every compiled job under `output`."""
    if paths:
        return [Path(path) for path in paths]
    if not output.is_dir():
        return []
    # Dot-directories are a killed build's leftovers (removed by the next build), never jobs.
    return sorted(p for p in output.iterdir()
                  if not p.name.startswith(".") and (p / "kustomization.yaml").is_file())


def _validate(arguments: argparse.Namespace) -> int:
    import itertools
    from contextlib import nullcontext

    from tfcompile.compiler.checking.validation.many_jobs import validate_many
    from tfcompile.compiler.kubernetes_versions import KubernetesVersionError

    # Only `--server` talks to a cluster: its modules (the launcher policy's objects, and the
    # spec's models they name) are not imported otherwise, 0.17 s of every validate's start.
    if arguments.server:
        from tfcompile.compiler.checking.launcher_policy_check import launcher_policy_notes
        from tfcompile.compiler.checking.validation.server import (
            ClusterError,
            launcher_policy_lookup,
            server_session,
            with_server_checks,
        )
    cluster_errors: tuple[type[Exception], ...] = (ClusterError,) if arguments.server else ()

    directories = _job_directories(arguments.directories, Path(arguments.output))
    if not directories:
        print(f"tfcompile: no compiled job under {arguments.output}; run `tfcompile build` "
              "first or name a directory", file=sys.stderr)
        return EXIT_USAGE
    failed = 0
    try:
        with server_session() if arguments.server else nullcontext() as session:
            try:
                outcomes = validate_many(directories, arguments.kubernetes_version,
                                         allow_remote=arguments.allow_remote)
                first = next(outcomes, None)
            except KubernetesVersionError as error:
                print(f"tfcompile: {error}", file=sys.stderr)
                return EXIT_USAGE
            for outcome in itertools.chain([first] if first is not None else [], outcomes):
                report = outcome.report
                if report is None:
                    print(f"{outcome.directory}: cannot render: {outcome.render_error}",
                          file=sys.stderr)
                    failed += 1
                    continue
                if session is not None:
                    report = with_server_checks(report, session)
                print(report.to_text())
                failed += 0 if report.ok else 1
            if session is not None:  # what the jobs' pods may do there, once for the cluster
                for note in launcher_policy_notes(launcher_policy_lookup(session)):
                    print(f"tfcompile: warning: {note}", file=sys.stderr)
    except cluster_errors as error:
        print(f"tfcompile: validate --server: {error}", file=sys.stderr)
        return EXIT_FAILED
    if failed:
        print(f"tfcompile: {failed} of {len(directories)} job(s) failed validation",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _render(arguments: argparse.Namespace) -> int:
    from .rendering.kustomize import RenderingError, render

    try:
        sys.stdout.write(render(Path(arguments.directory), allow_remote=arguments.allow_remote))
    except RenderingError as error:
        print(f"{arguments.directory}: cannot render: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _init(arguments: argparse.Namespace) -> int:
    from tfcompile.compiler.output.compilation import BuildSettings, build_plan
    from tfcompile.compiler.output.lock import locked
    from tfcompile.compiler.output.writing import write
    from tfcompile.compiler.scaffold.installation import InstallationError, tfcompile_requirement
    from tfcompile.compiler.scaffold.repository import ScaffoldError, write_scaffold

    directory = Path(arguments.directory)
    try:
        requirement = tfcompile_requirement(arguments.tfcompile_requirement)
        written = write_scaffold(directory, requirement.text)
    except InstallationError as error:
        print(f"tfcompile: {error}; nothing was written", file=sys.stderr)
        return EXIT_USAGE
    except ScaffoldError as error:
        for reason in error.reasons:
            print(f"tfcompile: {reason}", file=sys.stderr)
        print("tfcompile: nothing was written", file=sys.stderr)
        return EXIT_USAGE
    if requirement.note:
        print(f"tfcompile: {requirement.note}", file=sys.stderr)
    settings = BuildSettings(inputs=[directory / "jobs"], output=directory / "output",
                             overlays=directory / "overlays")
    with locked(settings.output, exclusive=True) as location:
        compiled = write(build_plan(settings, location))
    print(f"tfcompile: wrote {len(written)} files and compiled {len(compiled)} into {directory}; "
          "next: put your repository URL into deploy/, commit, and read "
          "jobs/example/job.yaml", file=sys.stderr)
    return EXIT_OK


def _run_local(arguments: argparse.Namespace) -> int:
    from .local_run import LocalRunOptions, SecretsFileError
    from .local_run.job import LocalJobError, LocalJobSettings, run_job
    from .rendering.kustomize import RenderingError

    options = LocalRunOptions(
        restart_limit=arguments.restart_limit,
        backoff_initial_seconds=arguments.backoff,
        backoff_maximum_seconds=max(arguments.backoff, 300.0),
        timeout_seconds=arguments.timeout,
        claims_directory=Path(arguments.claims_directory) if arguments.claims_directory else None,
    )
    settings = LocalJobSettings(
        job_file=Path(arguments.job),
        overlays=Path(arguments.overlays),
        secrets_file=Path(arguments.secrets) if arguments.secrets else None,
        options=options,
        allow_remote=arguments.allow_remote,
        job=arguments.job_name,
    )
    try:
        outcome = run_job(settings)
    except SecretsFileError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    except (LocalJobError, RenderingError) as error:
        print(f"tfcompile: {error}", file=sys.stderr)
        return EXIT_USAGE
    return outcome.exit_code


def _status(arguments: argparse.Namespace) -> int:
    from tfcompile.compiler.checking.status import StatusError, as_json, as_text, read_status

    try:
        statuses = read_status(arguments.jobs, Path(arguments.output), arguments.namespace,
                               arguments.all_namespaces)
    except StatusError as error:
        print(f"tfcompile: status: {error}", file=sys.stderr)
        return EXIT_FAILED
    sys.stdout.write(as_json(statuses) if arguments.json else as_text(statuses))
    if not statuses:
        print("tfcompile: no job in the cluster or under the output directory", file=sys.stderr)
        return EXIT_OK
    from tfcompile.compiler.checking.launcher_policy_check import (
        kubectl_lookup,
        launcher_policy_notes,
    )

    for note in launcher_policy_notes(kubectl_lookup(timeout_seconds=60)):
        print(f"tfcompile: warning: {note}", file=sys.stderr)
    return EXIT_OK


def _diff(arguments: argparse.Namespace) -> int:
    from tfcompile.compiler.checking.diff.comparison import compare
    from tfcompile.compiler.checking.diff.git_tree import read_revision
    from tfcompile.compiler.checking.diff.report import as_markdown, as_text
    from tfcompile.compiler.checking.diff.trees import DiffInputError
    from tfcompile.compiler.checking.diff.working_tree import read_working_tree

    output = Path(arguments.output)
    try:
        commit, base = read_revision(arguments.base, output, Path.cwd())
        changes = compare(base, read_working_tree(output))
    except DiffInputError as error:
        print(f"tfcompile: diff: {error}", file=sys.stderr)
        return EXIT_USAGE
    write = as_markdown if arguments.format == "markdown" else as_text
    sys.stdout.flush()
    sys.stdout.buffer.write(write(arguments.base, commit, changes).encode("utf-8"))
    sys.stdout.buffer.flush()
    return EXIT_OK


def _convert(arguments: argparse.Namespace) -> int:
    from tfcompile.compiler.conversion.convert import convert_file
    from tfcompile.compiler.conversion.writing import ConversionRefused, write_job

    conversion = convert_file(Path(arguments.tfjob))
    for note in conversion.notes:
        print(note, file=sys.stderr)
    if arguments.output is None:
        sys.stdout.write(conversion.text)
        return EXIT_OK
    try:
        written = write_job(Path(arguments.output), conversion.text)
    except ConversionRefused as error:
        print(f"tfcompile: {error}; nothing was written", file=sys.stderr)
        return EXIT_USAGE
    print(f"tfcompile: wrote {written} ({len(conversion.notes)} note(s) above, also at the top "
          "of the file); next: `tfcompile build` it", file=sys.stderr)
    return EXIT_OK


def _schema(arguments: argparse.Namespace) -> int:
    from tfcompile.spec.schema import schema_text

    sys.stdout.write(schema_text())
    return EXIT_OK


def _add_allow_remote(command: argparse.ArgumentParser) -> None:
    command.add_argument("--allow-remote", action="store_true",
                         help="let kustomize fetch resources named by URL or git repository "
                              "(refused by default)")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="tfcompile",
        description="Compile TensorFlow training job specs into plain Kubernetes YAML.",
    )
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    build = commands.add_parser(
        "build", help="compile job specs into output/<job>/ (a kustomization per job)"
    )
    build.add_argument("paths", nargs="*", metavar="PATH",
                       help="job files, or directories searched for job specs (YAML files "
                            "with tfcompile's apiVersion or a kind at or near TrainingJob) "
                            "(default: the current directory)")
    build.add_argument("-o", "--output", default="output",
                       help="output directory (default: output)")
    build.add_argument("--overlays", default="overlays",
                       help="directory of Kustomize Components named by `overlays:` "
                            "(default: overlays)")
    build.add_argument("--check", action="store_true",
                       help="write nothing; print a diff and exit 1 when the output is stale "
                            "or holds what tfcompile did not write")
    build.add_argument("--allow-recreate", action="store_true",
                       help="write even when a StatefulSet's immutable fields change (after "
                            "you deleted it in the cluster)")
    build.set_defaults(handler=_build)

    validate_command = commands.add_parser(
        "validate", help="render compiled jobs with kustomize and check what a cluster would run"
    )
    validate_command.add_argument("directories", nargs="*", metavar="DIRECTORY",
                                  help="kustomization directories (default: every job under "
                                       "--output)")
    validate_command.add_argument("-o", "--output", default="output",
                                  help="where compiled jobs are (default: output)")
    validate_command.add_argument(
        "--kubernetes-version", default=DEFAULT_KUBERNETES_VERSION,
        help=f"schemas to check against (default: {DEFAULT_KUBERNETES_VERSION}; oldest: "
             f"{OLDEST_KUBERNETES_VERSION}, the first with the pod-index label)")
    _add_allow_remote(validate_command)
    validate_command.add_argument(
        "--server", action="store_true",
        help="also dry-run apply every object on the API server of the current kubeconfig "
             "context (server-side apply, nothing is persisted); objects without a namespace "
             "are checked in the context's namespace")
    validate_command.set_defaults(handler=_validate)

    render_command = commands.add_parser(
        "render", help="print the final manifests of a compiled job (kustomize build)"
    )
    render_command.add_argument("directory", metavar="DIRECTORY")
    _add_allow_remote(render_command)
    render_command.set_defaults(handler=_render)

    run_local = commands.add_parser(
        "run-local",
        help="run every pod of a job in its image with podman, as a cluster would (root)"
    )
    run_local.add_argument("job", metavar="JOB.yaml")
    run_local.add_argument("--job", dest="job_name", metavar="NAME",
                           help="the job to run when the file defines several (a sweep's trials: "
                                "`tfcompile build` names them)")
    run_local.add_argument("--overlays", default="overlays",
                           help="directory of the Kustomize Components (default: overlays)")
    run_local.add_argument("--secrets", metavar="FILE",
                           help="values of the Secrets the job references, one "
                                "`secret-name/key=value` a line")
    run_local.add_argument("--restart-limit", type=int, default=3,
                           help="end the run when a container needs more restarts (default: 3)")
    run_local.add_argument("--backoff", type=float, default=10.0, metavar="SECONDS",
                           help="first restart delay, doubling like the kubelet's (default: 10)")
    run_local.add_argument("--timeout", type=float, metavar="SECONDS",
                           help="end the run as failed after this long")
    run_local.add_argument("--claims-directory", metavar="DIRECTORY",
                           help="keep each claim's data in DIRECTORY/<claim> after the run")
    _add_allow_remote(run_local)
    run_local.set_defaults(handler=_run_local)

    init = commands.add_parser("init", help="scaffold a GitOps repository for training jobs")
    init.add_argument("directory", nargs="?", default=".", metavar="DIRECTORY")
    init.add_argument("--tfcompile-requirement", metavar="REQUIREMENT",
                      help="what the generated CI installs with pip (default: this tfcompile, "
                           "from what its installation records: a git URL and commit, an "
                           "archive URL, or the version on the package index)")
    init.set_defaults(handler=_init)

    status = commands.add_parser(
        "status", help="show what the cluster (current kubeconfig context) runs for each job")
    status.add_argument("jobs", nargs="*", metavar="JOB",
                        help="job names (default: every job in the cluster or under --output)")
    status.add_argument("-o", "--output", default="output",
                        help="compiled jobs, for the committed revision (default: output)")
    status.add_argument("-n", "--namespace",
                        help="read this namespace (default: each job's own, else the "
                             "context's)")
    status.add_argument("-A", "--all-namespaces", action="store_true",
                        help="read every namespace")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(handler=_status)

    diff = commands.add_parser(
        "diff", help="say per job what merging the change does: restarts and why, replicas, "
                     "GPUs, recreated StatefulSets, deleted claims")
    diff.add_argument("base", metavar="BASE",
                      help="the git revision to compare output/ with (a commit, branch or tag)")
    diff.add_argument("-o", "--output", default="output",
                      help="compiled jobs, in the working tree and at BASE (default: output)")
    diff.add_argument("--format", choices=("text", "markdown"), default="text",
                      help="text (default), or markdown for a pull request")
    diff.set_defaults(handler=_diff)

    convert = commands.add_parser(
        "convert", help="write a job.yaml from a Kubeflow TFJob (kubeflow.org/v1) and say, per "
                        "field, what has no equivalent")
    convert.add_argument("tfjob", metavar="TFJOB.yaml")
    convert.add_argument("-o", "--output", metavar="DIR",
                         help="write DIR/job.yaml (never over an existing file; default: print "
                              "the job to standard output)")
    convert.set_defaults(handler=_convert)

    schema = commands.add_parser("schema", help="print the JSON Schema of job.yaml")
    schema.set_defaults(handler=_schema)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    try:
        result: int = arguments.handler(arguments)
        return result
    except SpecError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        count = len(error.problems)
        print(f"tfcompile: {count} problem{'s' if count != 1 else ''} found; nothing was written",
              file=sys.stderr)
        return EXIT_USAGE
    except OutputRefused as error:
        for reason in error.reasons:
            print(f"tfcompile: {reason}", file=sys.stderr)
        print("tfcompile: nothing was written", file=sys.stderr)
        return EXIT_USAGE
    except (OutputEnvironmentError, UnreadableInput) as error:
        print(f"tfcompile: {error}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as error:  # the machine, not tfcompile: say what and where, in one line
        where = f"{error.filename}: " if error.filename else ""
        print(f"tfcompile: {where}{error.strerror or error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    except Exception:
        import traceback  # only here: a build that succeeds never pays for it

        traceback.print_exc()
        print("tfcompile: internal error (a bug in tfcompile, not in your spec); please report it",
              file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
