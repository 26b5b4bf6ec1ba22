#!/usr/bin/env bash
# The main job on an example, from a fresh machine: compile every example into output/,
# validate each rendered job, then train examples/mnist locally: two workers, each in its own
# network namespace, with real TensorFlow (needs root).
source "$(dirname "$0")/setup.sh"
tfcompile build examples -o output
tfcompile validate
tfcompile run-local examples/mnist/job.yaml --timeout 600
