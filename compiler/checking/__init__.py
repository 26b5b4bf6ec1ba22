"""What a cluster would make of the compiled output: `validate`, `status` and `diff`.

`validation` judges the rendered manifests (after kustomize and every component) against
Kubernetes' schemas, the TensorFlow topology and the limits, offline or with a server-side dry
run; `status` reads what a cluster runs. Both read manifests through `rendering`, never the
compiler's intent. `diff` compares `output/` at a git revision with the working tree and says
what merging the change does to each job; it reads the files `build` wrote, not rendered ones,
since a revision's components are not checked out.
"""
