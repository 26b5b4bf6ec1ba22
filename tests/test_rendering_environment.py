"""The kubelet's environment rules: `$(VAR)` expansion, envFrom/env order, valueFrom sources."""

from __future__ import annotations

from typing import Any

import pytest

from tfcompile.compiler.rendering.environment import (
    DownwardApi,
    EnvironmentReference,
    EnvironmentSources,
    build_environment,
    expand,
    expand_arguments,
    is_environment_variable_name,
    service_link_variables,
)
from tfcompile.compiler.rendering.quantities import parse_quantity

CONTEXT = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$(VAR_A)", "A"),
        ("$(VAR_A)-$(VAR_A)", "A-A"),
        ("___$(VAR_B)___", "___B___"),
        ("$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
        ("$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
        ("$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
        ("f000-$$VAR_A", "f000-$VAR_A"),
        ("foo\\$(VAR_C)bar", "foo\\Cbar"),
        ("$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
        ("$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
        ("$(VAR_REF)", "$(VAR_A)"),
        ("foo$(VAR_EMPTY)bar", "foobar"),
        ("foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
        ("$?_boo_$!", "$?_boo_$!"),
        ("$VAR_A", "$VAR_A"),
        ("${VAR_A}", "${VAR_A}"),
        ("$(UNKNOWN)", "$(UNKNOWN)"),
        ("$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
        ("$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
        ("$$$$$$$(VAR_A)", "$$$A"),
        ("$(VAR_B)_______$(A", "B_______$(A"),
        ("$(VAR_C)_______$(", "C_______$("),
        ("$(VAR_A)foobarzab$", "Afoobarzab$"),
        ("--$($($($($--", "--$($($($($--"),
        ("$(foo$$var)", "$(foo$$var)"),
        ("$()", "$()"),
        ("$é$(VAR_A)", "$éA"),
        ("", ""),
    ],
)
def test_expansion_follows_kubernetes_rules(text: str, expected: str) -> None:
    assert expand(text, CONTEXT) == expected


def test_expansion_looks_contexts_up_in_order() -> None:
    assert expand("$(X)", {"X": "first"}, {"X": "second"}) == "first"
    assert expand("$(Y)", {"X": "first"}, {"Y": "second"}) == "second"


def downward_api(**overrides: Any) -> DownwardApi:
    values: dict[str, Any] = {
        "name": "mnist-worker-1",
        "namespace": "ml",
        "labels": {"apps.kubernetes.io/pod-index": "1", "tfcompile.dev/role": "worker"},
        "annotations": {"tfcompile.dev/revision": "abc"},
    }
    values.update(overrides)
    return DownwardApi(**values)


def environment_of(
    container: dict[str, Any],
    sources: EnvironmentSources | None = None,
    api: DownwardApi | None = None,
    **options: Any,
) -> tuple[dict[str, str], list[EnvironmentReference]]:
    built = build_environment(
        container, api or downward_api(), sources or EnvironmentSources(), **options
    )
    return built.variables, built.unresolved


def test_only_variables_defined_earlier_expand() -> None:
    variables, _ = environment_of(
        {
            "env": [
                {"name": "BEFORE", "value": "$(LATER)-x"},
                {"name": "LATER", "value": "late"},
                {"name": "AFTER", "value": "$(LATER)-y"},
            ]
        }
    )
    assert variables == {"BEFORE": "$(LATER)-x", "LATER": "late", "AFTER": "late-y"}


def test_task_index_from_pod_index_label_expands_into_tf_config() -> None:
    variables, unresolved = environment_of(
        {
            "env": [
                {
                    "name": "TASK_INDEX",
                    "valueFrom": {
                        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
                    },
                },
                {"name": "TF_CONFIG", "value": '{"task":{"type":"worker","index":$(TASK_INDEX)}}'},
            ]
        }
    )
    assert variables["TF_CONFIG"] == '{"task":{"type":"worker","index":1}}'
    assert unresolved == []


def test_redefinition_keeps_first_position_and_takes_last_value() -> None:
    variables, _ = environment_of(
        {
            "env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "$(A)"},
                {"name": "A", "value": "2"},
                {"name": "C", "value": "$(A)"},
            ]
        }
    )
    assert list(variables) == ["A", "B", "C"]
    assert variables == {"A": "2", "B": "1", "C": "2"}


def test_env_from_comes_first_with_prefix_and_env_overrides_it() -> None:
    sources = EnvironmentSources(
        config_maps={"settings": {"MODE": "fast", "LEVEL": "3"}},
        secrets={("s3-credentials", "SECRET"): "hunter2"},
    )
    variables, unresolved = environment_of(
        {
            "envFrom": [
                {"configMapRef": {"name": "settings"}},
                {"secretRef": {"name": "s3-credentials"}, "prefix": "AWS_"},
            ],
            "env": [{"name": "MODE", "value": "$(MODE)-slow"}, {"name": "X", "value": "$(LEVEL)"}],
        },
        sources,
    )
    assert variables == {"LEVEL": "3", "MODE": "fast-slow", "AWS_SECRET": "hunter2", "X": "3"}
    assert unresolved == []


def test_later_env_from_source_overrides_earlier_one() -> None:
    sources = EnvironmentSources(config_maps={"one": {"K": "1"}, "two": {"K": "2"}})
    variables, _ = environment_of(
        {"envFrom": [{"configMapRef": {"name": "one"}}, {"configMapRef": {"name": "two"}}]},
        sources,
    )
    assert variables == {"K": "2"}


def test_env_from_keys_that_are_not_names_are_skipped_under_strict_rules() -> None:
    sources = EnvironmentSources(config_maps={"settings": {"1bad": "x", "good.key-1": "y"}})
    container = {"envFrom": [{"configMapRef": {"name": "settings"}}]}
    strict = build_environment(container, downward_api(), sources, strict_names=True)
    assert strict.variables == {"good.key-1": "y"}
    assert strict.skipped_names == ["1bad"]
    relaxed = build_environment(container, downward_api(), sources)
    assert relaxed.variables == {"1bad": "x", "good.key-1": "y"}
    assert relaxed.skipped_names == []


def test_name_rules() -> None:
    assert is_environment_variable_name("MY_VAR.1-x", strict=True)
    assert not is_environment_variable_name("1abc", strict=True)
    assert is_environment_variable_name("1abc")
    assert not is_environment_variable_name("A=B")
    assert not is_environment_variable_name("")
    assert not is_environment_variable_name("tab\there")


def test_missing_secret_is_recorded_not_invented() -> None:
    variables, unresolved = environment_of(
        {
            "env": [
                {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "secret"}}},
                {"name": "USES", "value": "[$(KEY)]"},
            ]
        }
    )
    assert "KEY" not in variables
    assert variables["USES"] == "[$(KEY)]"
    assert unresolved == [EnvironmentReference("Secret", "s3", "secret", optional=False)]


def test_supplied_secret_value_is_used() -> None:
    variables, unresolved = environment_of(
        {"env": [{"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "secret"}}}]},
        EnvironmentSources(secrets={("s3", "secret"): "hunter2"}),
    )
    assert variables == {"KEY": "hunter2"}
    assert unresolved == []


def test_optional_missing_reference_keeps_earlier_value() -> None:
    sources = EnvironmentSources(config_maps={"settings": {"MODE": "fast"}})
    variables, unresolved = environment_of(
        {
            "envFrom": [{"configMapRef": {"name": "settings"}}],
            "env": [
                {
                    "name": "MODE",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "settings", "key": "absent", "optional": True}
                    },
                },
            ],
        },
        sources,
    )
    assert variables == {"MODE": "fast"}
    assert unresolved == [EnvironmentReference("ConfigMap", "settings", "absent", optional=True)]


def test_missing_env_from_source_is_recorded_with_optional_flag() -> None:
    _, unresolved = environment_of(
        {
            "envFrom": [
                {"secretRef": {"name": "tokens", "optional": True}},
                {"configMapRef": {"name": "settings"}},
            ]
        }
    )
    assert unresolved == [
        EnvironmentReference("Secret", "tokens", None, optional=True),
        EnvironmentReference("ConfigMap", "settings", None, optional=False),
    ]


def test_config_map_key_reference() -> None:
    variables, _ = environment_of(
        {"env": [{"name": "M", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "mode"}}}]},
        EnvironmentSources(config_maps={"c": {"mode": "fast"}}),
    )
    assert variables == {"M": "fast"}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("metadata.name", "mnist-worker-1"),
        ("metadata.namespace", "ml"),
        ("metadata.labels['tfcompile.dev/role']", "worker"),
        ("metadata.labels['absent']", ""),
        ("metadata.annotations['tfcompile.dev/revision']", "abc"),
        ("spec.serviceAccountName", "default"),
        ("status.podIP", "10.0.0.7"),
        ("spec.nodeName", "node-1"),
        ("spec.host", "node-1"),
    ],
)
def test_field_references(path: str, expected: str) -> None:
    api = downward_api(runtime_fields={"status.podIP": "10.0.0.7", "spec.nodeName": "node-1"})
    variables, unresolved = environment_of(
        {"env": [{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": path}}}]}, api=api
    )
    assert variables == {"V": expected}
    assert unresolved == []


def test_field_only_a_running_pod_knows_is_recorded() -> None:
    variables, unresolved = environment_of(
        {"env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}
    )
    assert variables == {}
    assert unresolved == [EnvironmentReference("Field", "status.podIP", None, optional=False)]


def test_namespace_left_to_the_applier_is_recorded() -> None:
    _, unresolved = environment_of(
        {"env": [{"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]},
        api=downward_api(namespace=None),
    )
    assert unresolved == [EnvironmentReference("Field", "metadata.namespace", None, False)]


@pytest.mark.parametrize(
    ("resource", "divisor", "expected"),
    [
        ("limits.cpu", None, "2"),
        ("requests.cpu", "1m", "1500"),
        ("requests.cpu", None, "2"),
        ("limits.memory", "1Mi", "4096"),
        ("requests.memory", None, str(4 * 2**30)),
    ],
)
def test_resource_field_references(resource: str, divisor: str | None, expected: str) -> None:
    selector: dict[str, Any] = {"resource": resource}
    if divisor is not None:
        selector["divisor"] = divisor
    variables, _ = environment_of(
        {
            "name": "tensorflow",
            "resources": {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "1500m"}},
            "env": [{"name": "V", "valueFrom": {"resourceFieldRef": selector}}],
        }
    )
    assert variables == {"V": expected}


def test_limit_without_value_needs_the_node() -> None:
    variables, unresolved = environment_of(
        {
            "name": "tensorflow",
            "env": [{"name": "V", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
        }
    )
    assert variables == {}
    assert unresolved == [EnvironmentReference("Resource", "limits.cpu", "tensorflow", False)]


def test_quantities() -> None:
    assert parse_quantity("500m") * 2 == 1
    assert parse_quantity("1Ki") == 1024
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("1.5G") == 1_500_000_000
    with pytest.raises(ValueError):
        parse_quantity("lots")


def test_service_environment_ranks_last_and_is_appended() -> None:
    variables, _ = environment_of(
        {
            "env": [
                {"name": "H", "value": "$(KUBERNETES_SERVICE_HOST)"},
                {"name": "X", "value": "1"},
            ]
        },
        service_environment={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "X": "service"},
    )
    assert variables == {"H": "10.96.0.1", "X": "1", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}


def test_empty_value_without_source_defines_an_empty_variable() -> None:
    variables, _ = environment_of({"env": [{"name": "PS_HOSTS", "value": ""}]})
    assert variables == {"PS_HOSTS": ""}


def test_command_and_args_expand_with_final_environment() -> None:
    environment = {"EPOCHS": "3", "DIR": "/mnt"}
    assert expand_arguments(["--epochs=$(EPOCHS)", "$$(DIR)", "$(NONE)", 5], environment) == [
        "--epochs=3",
        "$(DIR)",
        "$(NONE)",
        "5",
    ]
    assert expand_arguments(None, environment) == []


KUBERNETES_SERVICE = {
    "metadata": {"name": "kubernetes", "namespace": "default"},
    "spec": {"clusterIP": "10.0.0.1", "ports": [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]},
}


def test_the_kubernetes_service_gives_the_variables_every_kubelet_sets() -> None:
    assert service_link_variables(KUBERNETES_SERVICE) == {
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443",
        "KUBERNETES_PORT": "tcp://10.0.0.1:443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.0.0.1:443",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": "443",
        "KUBERNETES_PORT_443_TCP_ADDR": "10.0.0.1",
    }


def test_service_link_names_use_underscores_and_only_the_first_port_is_unnamed() -> None:
    service = {"metadata": {"name": "my-board"}, "spec": {"clusterIP": "10.0.0.9", "ports": [
        {"port": 80}, {"name": "grpc-web", "port": 81, "protocol": "UDP"}]}}
    variables = service_link_variables(service)
    assert variables["MY_BOARD_SERVICE_PORT"] == "80"
    assert variables["MY_BOARD_SERVICE_PORT_GRPC_WEB"] == "81"
    assert variables["MY_BOARD_PORT"] == "tcp://10.0.0.9:80"
    assert variables["MY_BOARD_PORT_81_UDP"] == "udp://10.0.0.9:81"
    assert variables["MY_BOARD_PORT_81_UDP_PROTO"] == "udp"


def test_a_headless_service_gives_no_variables() -> None:
    headless = {"metadata": {"name": "job-worker"},
                "spec": {"clusterIP": "None", "ports": [{"port": 2222}]}}
    assert service_link_variables(headless) == {}
