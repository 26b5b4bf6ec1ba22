#!/usr/bin/env bash
# The main job on an example, from a fresh machine: compile every example into output/,
# validate each rendered job, then train examples/mnist locally: two workers, each in the image
# its job names, with podman (needs root). No registry is needed: the image is built on this
# machine from the public image's recipe (scripts/node-images.sh, cached) and loaded into a
# podman image store of the project's own (scripts/podman.sh); the first time takes minutes.
source "$(dirname "$0")/setup.sh"
tfcompile build examples -o output
tfcompile validate
bash scripts/podman.sh load tensorflow
eval "$(bash scripts/podman.sh environment)"
tfcompile run-local examples/mnist/job.yaml --timeout 600
