"""The `tfcompile` command: a thin shell that parses arguments and reports results.

Exit status: 0 success; 1 a check failed (stale output, invalid manifests) or an internal error;
2 the input has problems (each printed as `file:line:col: field: message`) or the usage is wrong.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from tfcompile.spec.problems import SpecError
from tfcompile.spec.schema import schema_text

from .build import BuildSettings, build_plan
from .immutable_fields import immutable_changes
from .output_tree import unified_diff, write

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _build(arguments: argparse.Namespace) -> int:
    settings = BuildSettings(
        inputs=[Path(p) for p in arguments.paths] or [Path("examples")],
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
                f"tfcompile: {settings.output} is stale ({len(changes.changed())} files differ); "
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


def _schema(arguments: argparse.Namespace) -> int:
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
                            "(default: examples)")
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
