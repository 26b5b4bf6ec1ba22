"""The compiler proper: a loaded job spec in, plain Kubernetes objects out.

Pure functions only: nothing here reads or writes files, runs a program, opens a socket or
touches a YAML library (import-linter holds it to that). The names of everything come from
`names`, the labels from `labels`, `TF_CONFIG` from `topology`, each kind of object from one
module of `builders`, and `compile` puts them together in a fixed order with the revision that
rolls a job. Turning objects into files is `output`'s work.
"""
