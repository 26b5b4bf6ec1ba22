"""A local node for a real Kubernetes control plane: the pods bound to it run as processes.

`scripts/control-plane.sh up --node` starts `python -m tests.node_agent`. It
registers a Node, runs the pods the scheduler binds to it with the runtime of `run-local`
(network namespaces on a private bridge, volumes in private mount namespaces, the environment as
the kubelet builds it, restarts with back-off), reports their status to the API server, stops the
processes of deleted pods and gives pending claims a volume. It sits above `local_run` and
`rendering` in the layers: it uses them, they know nothing of it.
"""
