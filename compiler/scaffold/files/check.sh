#!/usr/bin/env sh
# What CI checks on every pull request (the GitHub and GitLab workflows both run this):
# the committed output/ is what job.yaml compiles to, it renders and validates, and kubeconform
# accepts every rendered object in strict mode, both for the same Kubernetes version.
#   TFCOMPILE_KUBERNETES_VERSION  the version to check against (default: KUBERNETES_VERSION_DEFAULT)
#   KUBECONFORM_SCHEMA_LOCATION   where kubeconform reads its schemas (default: it downloads
#                                 them); for an offline directory see tfcompile's docs/gitops.md
set -eu
kubernetes_version=${TFCOMPILE_KUBERNETES_VERSION:-KUBERNETES_VERSION_DEFAULT}
tfcompile build jobs --check
tfcompile validate --kubernetes-version "$kubernetes_version"
if ! command -v kubeconform >/dev/null 2>&1; then
  echo "kubeconform is not installed; install it as the CI files do" >&2
  exit 1
fi
rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT
for job in output/*/; do
  tfcompile render "$job" >"$rendered"
  echo "kubeconform: $job"
  kubeconform -strict -summary -kubernetes-version "$kubernetes_version" \
    -schema-location "${KUBECONFORM_SCHEMA_LOCATION:-default}" - <"$rendered"
done
