"""What a cluster would make of the compiled output: `validate` and `status`.

`validation` judges the rendered manifests (after kustomize and every component) against
Kubernetes' schemas, the TensorFlow topology and the limits, offline or with a server-side dry
run; `status` reads what a cluster runs. Both read manifests through `rendering`, never the
compiler's intent.
"""
