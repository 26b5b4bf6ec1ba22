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
    """Text that is not valid YAML, or a value its tag cannot hold: the message says where
    (`line L, column C: …`) and what, never quoting the input."""


_CONSTRUCTION_ERRORS = (ValueError, TypeError, ArithmeticError, LookupError, AttributeError)
"""What ruamel's constructors raise for a value their tag cannot hold (`!!int x`, `!!bool maybe`,
an empty `!<tag:yaml.org,2002:int>`, a list as a mapping's key), where the parser would have
raised a YAMLError."""


class _UnreadableValue(Exception):
    """A value its tag cannot hold, at the node's line and column (from 1); the value itself
    is not repeated."""

    def __init__(self, failure: Exception, line: int, column: int) -> None:
        super().__init__(f"line {line}, column {column}: a value its tag cannot hold "
                         f"({type(failure).__name__})")


def _construction_problem(failure: Exception) -> str:
    return f"a value its tag cannot hold ({type(failure).__name__})"


def _yaml_problem(failure: Exception) -> str:
    """What the parser found wrong and where, without the input it quotes (a tag, a key, the
    line itself), as the spec's loader says it."""
    from ruamel.yaml.error import MarkedYAMLError

    from tfcompile.spec.yaml_limits import describe_yaml_error

    if not isinstance(failure, MarkedYAMLError):
        return "not valid YAML"
    mark = failure.problem_mark or failure.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + describe_yaml_error(failure)


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
        raise YamlInputError(_yaml_problem(failure)) from None
    except _UnreadableValue as failure:
        raise YamlInputError(str(failure)) from None
    except _CONSTRUCTION_ERRORS as failure:
        raise YamlInputError(_construction_problem(failure)) from None


def _every(text: str, loader: Any) -> list[Any]:
    from ruamel.yaml.error import YAMLError

    try:
        return list(loader.load_all(text))
    except YAMLError as failure:
        raise YamlInputError(_yaml_problem(failure)) from None
    except _UnreadableValue as failure:
        raise YamlInputError(str(failure)) from None
    except _CONSTRUCTION_ERRORS as failure:
        raise YamlInputError(_construction_problem(failure)) from None


def _loader(*, pure: bool) -> Any:
    """A new safe loader (ruamel's loaders keep state between documents: one per read)."""
    from ruamel.yaml import YAML

    loader = YAML(typ="safe", pure=pure)
    loader.Constructor = _locating_constructor()
    if not pure:
        loader.Resolver = _c_parser_resolver()
    return loader


@functools.cache
def _c_parser_resolver() -> type:
    from ruamel.yaml.nodes import ScalarNode
    from ruamel.yaml.resolver import VersionedResolver

    class CParserResolver(VersionedResolver):
        """ruamel's resolver, which the C parser asks for the tag of every node, at half the
        time a rendering takes to read: it looks up the YAML version to read by each time,
        then tries the patterns of that version's tags on the value. Under the C parser the
        version is always the loader's (the C parser reports no `%YAML` directive: YAML 1.2,
        whatever a document says), so it is looked up once per read; and a plain scalar's tag
        then depends on its text alone (a quoted one is always a string), so each text is
        resolved once per read. The safe loader has no path resolvers, which would depend on
        where a node is."""

        @property
        def processing_version(self) -> Any:
            try:
                return self.__dict__["_version_of_this_read"]
            except KeyError:
                version = super().processing_version
                self.__dict__["_version_of_this_read"] = version
                return version

        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            if kind is not ScalarNode or self.yaml_path_resolvers:
                return super().resolve(kind, value, implicit)
            if not implicit[0]:
                return self.DEFAULT_SCALAR_TAG
            tags: dict[str, Any] = self.__dict__.setdefault("_tags_of_this_read", {})
            try:
                return tags[value]
            except KeyError:
                tag = tags[value] = super().resolve(kind, value, implicit)
                return tag

    return CParserResolver


@functools.cache
def _locating_constructor() -> type:
    from ruamel.yaml.constructor import SafeConstructor

    class LocatingConstructor(SafeConstructor):
        """The safe constructor, saying where a value its tag cannot hold is."""

        def construct_non_recursive_object(self, node: Any, tag: str | None = None) -> Any:
            try:
                return super().construct_non_recursive_object(node, tag)
            except _CONSTRUCTION_ERRORS as failure:
                mark = node.start_mark
                raise _UnreadableValue(failure, mark.line + 1, mark.column + 1) from None

    return LocatingConstructor


@functools.cache
def _kubernetes_constructor() -> type:
    from ruamel.yaml.nodes import ScalarNode

    class KubernetesConstructor(_locating_constructor()):  # type: ignore[misc]
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
