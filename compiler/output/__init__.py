"""The build and the output tree: compiled objects become files under `output/`.

Everything that touches the tree lives here: reading specs through `spec`, compiling through
`objects`, writing the YAML (`yaml_output`), planning what changes, refusing what tfcompile does
not own, swapping job directories atomically under a lock, and the up-to-date record that lets
a rebuild skip unchanged jobs. `build.build` is the one entry: it returns what happened, and the
command line prints it.
"""
