"""Pure functions that build one kind of Kubernetes object each from a job spec.

Each returns a plain dict in the key order a reviewer expects (apiVersion, kind, metadata, spec),
with every map that came from the user sorted, so that output is stable across edits.
"""
