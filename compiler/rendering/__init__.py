"""Read rendered manifests the way a cluster would: kustomize output, pods, kubelet environment.

Shared by `tfcompile validate` and `tfcompile run-local`, so that both judge the same thing:
what Kubernetes would actually run, not what the compiler meant to emit.
"""
