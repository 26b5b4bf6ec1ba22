#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, linters, type checks, layering, tests.
source "$(dirname "$0")/setup.sh"
ruff check .
mypy -p tfcompile.spec -p tfcompile.compiler -p tests
PYTHONPATH=.typing lint-imports
python -m pytest "$@"
