"""Kustomize Components shipped with tfcompile (copied into repositories by `tfcompile init`)."""
