"""Addresses and hosts-file names of a local run."""

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


NETWORK = ipaddress.IPv4Network("10.89.3.0/24")


def test_addresses_follow_the_gateway_of_the_runs_network_in_pod_order() -> None:
    plan = addressing.plan_addresses([pod("a-0", "a"), pod("b-0", "b")], NETWORK)
    assert [str(entry.address) for entry in plan] == ["10.89.3.2", "10.89.3.3"]


def test_a_network_holds_as_many_pods_as_it_has_free_addresses() -> None:
    small = ipaddress.IPv4Network("10.89.3.0/29")  # 8 addresses: network, gateway, broadcast
    assert addressing.capacity(small) == 5
    assert len(addressing.plan_addresses([pod(f"a-{i}", "a") for i in range(5)], small)) == 5
    with pytest.raises(ValueError, match="holds at most 5 pods, not 6"):
        addressing.plan_addresses([pod(f"a-{i}", "a") for i in range(6)], small)


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


def test_the_hosts_file_answers_every_pod_and_the_own_hostname() -> None:
    plan = addressing.plan_addresses([pod("j-worker-0", "j-worker"), pod("j-ps-0", "j-ps"),
                                      pod("j-board", None)], NETWORK)
    entries = [(name, str(address))
               for name, address in addressing.host_entries(plan[1], plan, "cluster.local")]
    assert entries == [
        ("j-worker-0.j-worker.ml.svc.cluster.local", "10.89.3.2"),
        ("j-worker-0.j-worker.ml.svc", "10.89.3.2"),
        ("j-worker-0.j-worker.ml", "10.89.3.2"),
        ("j-worker-0.j-worker", "10.89.3.2"),
        ("j-ps-0.j-ps.ml.svc.cluster.local", "10.89.3.3"),
        ("j-ps-0.j-ps.ml.svc", "10.89.3.3"),
        ("j-ps-0.j-ps.ml", "10.89.3.3"),
        ("j-ps-0.j-ps", "10.89.3.3"),
        ("j-ps-0", "10.89.3.3"),
    ]
    own_board = addressing.host_entries(plan[2], plan, "cluster.local")
    assert ("j-board", ipaddress.IPv4Address("10.89.3.4")) in own_board
