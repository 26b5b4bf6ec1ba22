"""`tfcompile init`: a new GitOps repository, and the CI in it that installs this tfcompile.

`repository` lays out the files (templates in `files/`, the Kustomize Components shipped with
the package, the JSON Schema); `installation` finds how this tfcompile was installed, so that
the CI `init` writes installs exactly the same one.
"""
