"""`tfcompile diff BASE`: what merging a change does to the jobs, read from `output/`.

A reviewer of a pull request sees a text diff of YAML; what they need to know is whether
merging restarts a training and why, changes its size or its GPUs, makes Kubernetes refuse the
sync (an immutable StatefulSet field) or deletes a claim with its data. This package answers
that by comparing two output trees, not two texts:

- `trees` turns the files of one output tree into objects per job (the one reader,
  `yaml_input`), refusing what tfcompile never writes (links, resources outside a job
  directory, documents that are not objects);
- `git_tree` reads `output/` at a git revision (BASE a commit and nothing else) by object id,
  never a checkout, and `working_tree` reads it from disk without following a link; both read
  a job's kustomization and the files it lists, nothing else, within `bounds`;
- `git_objects` reads objects by id, sizes first (`cat-file --batch-check`, then `--batch`),
  and `git_command` runs git so that no setting of the repository starts a program and no
  object is fetched;
- `pod_template` says why a role's pods restart, from the differences of its pod template;
- `comparison` compares two trees job by job (pure: tested in process);
- `report` writes the result as text or as markdown for a pull request, every value from the
  files through `printable`;
- `errors` holds the one error, `DiffInputError`: one line, exit 2.
"""
