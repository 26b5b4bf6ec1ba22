"""`tfcompile convert`: a Kubeflow TFJob (kubeflow.org/v1) written out as a job spec.

A user moving off the TFJob operator has manifests that ran; retyping them invites mistakes,
so convert does the field-by-field mapping docs/migrating-from-tfjob.md describes and says, per
field and at its line, what has no equivalent and why. It sits beside `scaffold` and
`checking`: it reads the TFJob through the spec's hostile-input reader, maps it with pure
functions (`mapping`, `replicas`, `run_policy`), holds the result to the spec's own models and
rules (`checking`: what `build` would refuse is refused here, at the TFJob's line), and writes
it with the one YAML writer (`writing`).
"""
