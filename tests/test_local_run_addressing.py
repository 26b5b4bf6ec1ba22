"""Addresses, link names and hosts files of a local run."""

from __future__ import annotations

import ipaddress

import pytest

from tfcompile.compiler.local_run import addressing
from tfcompile.compiler.rendering.pods import Pod


def pod(name: str, subdomain: str | None, namespace: str | None = "ml") -> Pod:
    return Pod(name=name, namespace=namespace, owner_kind="StatefulSet", owner_name="x", index=0,
               hostname=name, subdomain=subdomain, labels={}, annotations={}, containers=[],
               init_containers=[], volumes=[], restart_policy="Always",
               termination_grace_period_seconds=30)


def test_addresses_are_in_the_private_range_in_pod_order() -> None:
    plan = addressing.plan_addresses([pod("a-0", "a"), pod("b-0", "b")])
    assert [str(entry.address) for entry in plan] == ["10.244.0.2", "10.244.0.3"]
    assert all(entry.address in ipaddress.IPv4Network("10.244.0.0/16") for entry in plan)
    assert addressing.NETWORK.is_private


def test_link_names_fit_the_kernel_limit() -> None:
    assert addressing.bridge_name("a1b2c3") == "tfca1b2c3br"
    assert addressing.bridge_side_link_name("a1b2c3", addressing.MAXIMUM_PODS - 1) \
        == "tfca1b2c3p65532"
    with pytest.raises(ValueError, match="longer than 15"):
        addressing.bridge_side_link_name("a1b2c3", 100000)


def test_dns_names_follow_cluster_dns() -> None:
    assert addressing.dns_names(pod("mnist-worker-0", "mnist-worker"), "cluster.local") == [
        "mnist-worker-0.mnist-worker.ml.svc.cluster.local",
        "mnist-worker-0.mnist-worker.ml.svc",
        "mnist-worker-0.mnist-worker.ml",
        "mnist-worker-0.mnist-worker",
    ]
    assert addressing.dns_names(pod("m-0", "m", namespace=None), "example.org")[0] \
        == "m-0.m.default.svc.example.org"
    assert addressing.dns_names(pod("tensorboard-0", None), "cluster.local") == []


def test_hosts_file_answers_every_pod_and_the_own_hostname() -> None:
    plan = addressing.plan_addresses([pod("j-worker-0", "j-worker"), pod("j-ps-0", "j-ps"),
                                      pod("j-board", None)])
    text = addressing.hosts_file(plan[1], plan, "cluster.local")
    lines = text.splitlines()
    assert "127.0.0.1\tlocalhost" in lines
    assert ("10.244.0.2\tj-worker-0.j-worker.ml.svc.cluster.local j-worker-0.j-worker.ml.svc "
            "j-worker-0.j-worker.ml j-worker-0.j-worker") in lines
    assert ("10.244.0.3\tj-ps-0.j-ps.ml.svc.cluster.local j-ps-0.j-ps.ml.svc j-ps-0.j-ps.ml "
            "j-ps-0.j-ps j-ps-0") in lines
    assert not any("j-board" in line for line in lines)
    own_board = addressing.hosts_file(plan[2], plan, "cluster.local").splitlines()
    assert "10.244.0.4\tj-board" in own_board


def test_hosts_file_adds_the_names_of_services() -> None:
    plan = addressing.plan_addresses([pod("j-worker-0", "j-worker")])
    names = ["kubernetes.default.svc.cluster.local", "kubernetes.default.svc",
             "kubernetes.default"]
    lines = addressing.hosts_file(plan[0], plan, "cluster.local",
                                  [("10.0.0.1", names)]).splitlines()
    assert lines[-1] == ("10.0.0.1\tkubernetes.default.svc.cluster.local "
                         "kubernetes.default.svc kubernetes.default")
    assert str(addressing.GATEWAY) == "10.244.0.1"
    assert addressing.GATEWAY not in [entry.address for entry in plan]
