#!/usr/bin/env sh
# What CI checks on every pull request (the GitHub and GitLab workflows both run this):
# the committed output/ is what job.yaml compiles to, it renders and validates, and kubeconform
# accepts every rendered object in strict mode.
set -eu
tfcompile build jobs --check
tfcompile validate
if command -v kubeconform >/dev/null 2>&1; then
  for job in output/*/; do
    tfcompile render "$job" | kubeconform -strict -summary -
  done
elif [ "${TFCOMPILE_SKIP_KUBECONFORM:-0}" = 1 ]; then
  echo "kubeconform is not installed: skipped (TFCOMPILE_SKIP_KUBECONFORM=1)"
else
  echo "kubeconform is not installed; install it, or set TFCOMPILE_SKIP_KUBECONFORM=1" >&2
  exit 1
fi
