#!/usr/bin/env bash
# The main job on an example, from a fresh machine: compile every example into output/,
# render each job with kustomize and validate it.
source "$(dirname "$0")/setup.sh"
tfcompile build examples -o output
for job in output/*/; do
  kubectl kustomize "$job" > /dev/null
done
echo "compiled and rendered: $(ls output | tr '\n' ' ')"
