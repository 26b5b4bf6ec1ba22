"""The one module outside `spec/` that reads YAML: committed output, rendered manifests,
kustomizations and kubeconfigs.

Job specs are read by `spec/` (round trip, every value's position, hostile-input limits). What
is read here was written by tools (tfcompile, kustomize, kubectl) or names files tfcompile
looks at, so plain data is enough: YAML 1.2 through ruamel.yaml's safe loader, with its C
parser (ruamel.yaml.clib) where installed, which reads a 2,000-task job in milliseconds where
the pure-Python one takes a large part of a second; both read YAML 1.2 the same way.

ruamel.yaml is imported on the first read, not with this module: a build whose output is
current reads no YAML and must not pay for loading it.

`read_manifests` reads as Kubernetes' Go tools (kustomize, kubectl, the API server's YAML
decoder) do in one respect YAML 1.2 does not: a plain scalar that looks like a float but
overflows one (`459292e26177`, a digest) is a string there, and so kustomize writes it
unquoted. It is read as they read it, not as infinity.
"""

from __future__ import annotations

import functools
import math
from typing import Any


class YamlInputError(ValueError):
    """Text that is not valid YAML; the message says where, as the parser put it."""


_CONSTRUCTION_ERRORS = (ValueError, TypeError, ArithmeticError)
"""What ruamel's constructors raise for a value their tag cannot hold (`!!int x`, a list as a
mapping's key), where the parser would have raised a YAMLError."""


def _construction_problem(failure: Exception) -> str:
    return f"a value its tag cannot hold ({type(failure).__name__})"


def read_document(text: str) -> Any:
    """The one document of a file people write (a kustomization, a kubeconfig), None when
    empty. The pure-Python parser reads what kustomize reads: libyaml refuses some valid YAML
    (`{image: a:1}`, a colon in a flow mapping's plain value)."""
    return _one(text, _loader(pure=True))


def read_documents(text: str) -> list[Any]:
    """Every document of a file people write, in order, empty ones as None."""
    return _every(text, _loader(pure=True))


def read_generated_document(text: str) -> Any:
    """The one document of a file a tool wrote (tfcompile's output), with the C parser."""
    return _one(text, _loader(pure=False))


def read_manifests(text: str) -> list[Any]:
    """Every document of rendered manifests (kustomize's output), with the C parser, reading
    overflowing floats as Kubernetes does."""
    loader = _loader(pure=False)
    loader.Constructor = _kubernetes_constructor()
    return _every(text, loader)


def _one(text: str, loader: Any) -> Any:
    from ruamel.yaml.error import YAMLError

    try:
        return loader.load(text)
    except YAMLError as failure:
        raise YamlInputError(str(failure)) from None
    except _CONSTRUCTION_ERRORS as failure:
        raise YamlInputError(_construction_problem(failure)) from None


def _every(text: str, loader: Any) -> list[Any]:
    from ruamel.yaml.error import YAMLError

    try:
        return list(loader.load_all(text))
    except YAMLError as failure:
        raise YamlInputError(str(failure)) from None
    except _CONSTRUCTION_ERRORS as failure:
        raise YamlInputError(_construction_problem(failure)) from None


def _loader(*, pure: bool) -> Any:
    """A new safe loader (ruamel's loaders keep state between documents: one per read)."""
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=pure)


@functools.cache
def _kubernetes_constructor() -> type:
    from ruamel.yaml.constructor import SafeConstructor
    from ruamel.yaml.nodes import ScalarNode

    class KubernetesConstructor(SafeConstructor):
        """The safe constructor, reading an overflowing plain float as Kubernetes' Go tools
        do."""

        def construct_yaml_float(self, node: ScalarNode) -> Any:
            value = super().construct_yaml_float(node)
            spelled = str(node.value).lstrip("+-").lower()
            if isinstance(value, float) and math.isinf(value) and spelled != ".inf":
                return str(node.value)
            return value

    KubernetesConstructor.add_constructor(
        "tag:yaml.org,2002:float", KubernetesConstructor.construct_yaml_float)
    return KubernetesConstructor
