"""The session's real node: one `scripts/control-plane.sh up --node --gitops both` for every test
that runs pods (the cluster tier's node tests and the GitOps tier, marker `node`), since
kube-proxy owns the host's iptables chains and so one node runs on a machine at a time.
scripts/test.sh runs these tests in a pytest process of their own, beside the others; `down`
runs after the last of them and must leave nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # tests.conftest imports this module, and local_node imports tests.conftest
    from tests.cluster.local_node import LocalNode


@dataclass(frozen=True)
class RealNode:
    """The running node and what `up` printed (the git server's exports among it)."""

    node: LocalNode
    exports: list[str]

    def exported(self, name: str) -> str:
        values = [line.split("=", 1)[1] for line in self.exports
                  if line.startswith(f"export {name}=")]
        assert values, f"`up` printed no {name}: {self.exports}"
        return values[-1]


@pytest.fixture(scope="session")
def real_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    if os.geteuid() != 0:
        pytest.fail("the node's tests run a kubelet and a container runtime, which need root",
                    pytrace=False)
    from tests.cluster.local_node import start_local_node

    run_directory: Path = tmp_path_factory.mktemp("node") / "run"
    with start_local_node(run_directory, "--gitops", "both") as (node, lines):
        yield RealNode(node, lines)
