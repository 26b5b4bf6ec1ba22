"""The `tfcompile` command: a thin shell that parses arguments and reports results.

Exit status: 0 success; 1 a check failed (stale output, invalid manifests) or an internal error;
2 the input has problems (each printed as `file:line:col: field: message`) or the usage is wrong.

Each command imports what it runs inside its function: `build` runs in pre-commit hooks and CI
on every change, and must not pay for loading the validator, the renderer or the local runner.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from tfcompile.spec.problems import SpecError

from .kubernetes_versions import DEFAULT_KUBERNETES_VERSION, OLDEST_KUBERNETES_VERSION

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _build(arguments: argparse.Namespace) -> int:
    from .build import BuildSettings, build_plan
    from .immutable_fields import immutable_changes
    from .output_tree import unified_diff, write

    settings = BuildSettings(
        inputs=[Path(p) for p in arguments.paths] or [Path(".")],
        output=Path(arguments.output),
        overlays=Path(arguments.overlays),
    )
    changes = build_plan(settings)
    refused = [] if arguments.allow_recreate else immutable_changes(changes)
    for change in refused:
        print(f"tfcompile: {change.explain()}", file=sys.stderr)
    if refused:
        print("tfcompile: nothing was written", file=sys.stderr)
        return EXIT_FAILED
    if arguments.check:
        difference = unified_diff(changes)
        if difference:
            sys.stdout.write(difference)
            print(
                f"tfcompile: {settings.output} is stale ({len(changes.changed)} files differ); "
                "run `tfcompile build` and commit the result",
                file=sys.stderr,
            )
            return EXIT_FAILED
        print(f"tfcompile: {settings.output} is up to date", file=sys.stderr)
        return EXIT_OK
    changed = write(changes)
    jobs = sorted({path.split("/", 1)[0] for path in changes.writes})
    print(
        f"tfcompile: built {len(jobs)} job(s) into {settings.output} "
        f"({len(changed)} file(s) changed)",
        file=sys.stderr,
    )
    return EXIT_OK


def _job_directories(paths: Sequence[str], output: Path) -> list[Path]:
    """The directories named, or every compiled job under `output`."""
    if paths:
        return [Path(path) for path in paths]
    if not output.is_dir():
        return []
    return sorted(p for p in output.iterdir() if (p / "kustomization.yaml").is_file())


def _validate(arguments: argparse.Namespace) -> int:
    from .rendering.kustomize import RenderingError
    from .validation.validator import validate
    from .validation.versions import KubernetesVersionError

    directories = _job_directories(arguments.directories, Path(arguments.output))
    if not directories:
        print(f"tfcompile: no compiled job under {arguments.output}; run `tfcompile build` "
              "first or name a directory", file=sys.stderr)
        return EXIT_USAGE
    failed = 0
    for directory in directories:
        try:
            report = validate(directory, arguments.kubernetes_version)
        except KubernetesVersionError as error:
            print(f"tfcompile: {error}", file=sys.stderr)
            return EXIT_USAGE
        except RenderingError as error:
            print(f"{directory}: cannot render: {error}", file=sys.stderr)
            failed += 1
            continue
        print(report.to_text())
        failed += 0 if report.ok else 1
    if failed:
        print(f"tfcompile: {failed} of {len(directories)} job(s) failed validation",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _render(arguments: argparse.Namespace) -> int:
    from .rendering.kustomize import RenderingError, render

    try:
        sys.stdout.write(render(Path(arguments.directory)))
    except RenderingError as error:
        print(f"{arguments.directory}: cannot render: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _init(arguments: argparse.Namespace) -> int:
    from .build import BuildSettings, build_plan
    from .output_tree import write
    from .scaffold import ScaffoldError, write_scaffold

    directory = Path(arguments.directory)
    try:
        written = write_scaffold(directory)
    except ScaffoldError as error:
        print(f"tfcompile: {error}", file=sys.stderr)
        return EXIT_USAGE
    changes = build_plan(BuildSettings(inputs=[directory / "jobs"], output=directory / "output",
                                       overlays=directory / "overlays"))
    compiled = write(changes)
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


def _schema(arguments: argparse.Namespace) -> int:
    from tfcompile.spec.schema import schema_text

    sys.stdout.write(schema_text())
    return EXIT_OK


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
                       help="job files, or directories searched for kind: TrainingJob "
                            "(default: the current directory)")
    build.add_argument("-o", "--output", default="output",
                       help="output directory (default: output)")
    build.add_argument("--overlays", default="overlays",
                       help="directory of Kustomize Components named by `overlays:` "
                            "(default: overlays)")
    build.add_argument("--check", action="store_true",
                       help="write nothing; print a diff and exit 1 when the output is stale")
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
    validate_command.set_defaults(handler=_validate)

    render_command = commands.add_parser(
        "render", help="print the final manifests of a compiled job (kustomize build)"
    )
    render_command.add_argument("directory", metavar="DIRECTORY")
    render_command.set_defaults(handler=_render)

    run_local = commands.add_parser(
        "run-local", help="run every pod of a job on this machine as a cluster would (root)"
    )
    run_local.add_argument("job", metavar="JOB.yaml")
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
    run_local.set_defaults(handler=_run_local)

    init = commands.add_parser("init", help="scaffold a GitOps repository for training jobs")
    init.add_argument("directory", nargs="?", default=".", metavar="DIRECTORY")
    init.set_defaults(handler=_init)

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
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        print("tfcompile: internal error (a bug in tfcompile, not in your spec); please report it",
              file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
