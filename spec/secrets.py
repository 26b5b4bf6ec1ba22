"""Literal credentials written into a job spec, found wherever they sit, named by place only.

A job spec lives in git, its compiled output in the cluster and in CI logs, so a credential
written into it is leaked the moment it is pushed. Two detectors run over every string of the
loaded document (keys included), whatever field it is in:

- values shaped like well-known credentials (`credential_shapes`): cloud keys (AWS access key ids
  and secret access keys, Azure storage account keys, Google Cloud service-account keys), GitHub,
  GitLab, Slack, Hugging Face and other tokens, private-key blocks, JSON Web Tokens, passwords in
  URLs and in image references, under any name;
- names that mean a secret (`is_secret_name`: PASSWORD, PASSPHRASE, SECRET, TOKEN, API_KEY,
  STORAGE_KEY, … as whole words) given a literal value: an `env` entry, a label or annotation, a
  `--flag=value`, `--flag value` or `NAME=value` in `args`, `command` or any other string.

A name can only *look* secret (a tokenizer's `PAD_TOKEN`): `spec.notSecret` lists such names, one
reviewed place in the spec; it silences the name detector for them and never the value detector.
A problem names the field (and the option or variable name) and never the value.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from .credential_shapes import (
    AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY,
    GOOGLE_SERVICE_ACCOUNT,
    IMAGE_CREDENTIALS,
    VALUE_DETECTORS,
    aws_secret_candidates,
    credentials_in_text,
    is_literal,
)
from .problems import FieldPath, Problem, escape_text
from .shipped_script import Script

SECRET_WORDS = frozenset({
    "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "SECRET", "SECRETS", "TOKEN", "APIKEY",
    "CREDENTIAL", "CREDENTIALS", "PRIVATEKEY", "ACCESSKEY", "SECRETKEY", "AUTHTOKEN", "PWD",
})
"""Words that make a name secret. Whole words only: `TOKENS` (MAX_TOKENS) is a count and
`TOKENIZER` (TOKENIZER_PATH) a model part, so neither is a secret. `PWD` counts only with
another word (`DB_PWD`): alone it is the shell's working directory."""

COMPOUND_ENDINGS = ("PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "TOKEN", "APIKEY")
"""A word run together with one of these (`PGPASSWORD`, `GHTOKEN`) is a secret too."""

KEY_QUALIFIERS = frozenset({
    "API", "ACCESS", "PRIVATE", "SECRET", "SIGNING", "ENCRYPTION", "CLIENT", "MASTER", "ACCOUNT",
    "LICENSE", "SERVICE", "SESSION", "AUTH", "STORAGE",
})
"""`<word>_KEY` is a secret for these words (API_KEY, ACCESS_KEY, AZURE_STORAGE_KEY: the Azure
CLI's own variable for a storage account key, …); KEY alone is not."""

NOT_THE_SECRET = frozenset({
    "FILE", "FILES", "PATH", "DIR", "DIRECTORY", "FILENAME", "NAME", "REF", "ID", "URL", "URI",
    "ENDPOINT", "LENGTH", "LEN", "SIZE", "LIMIT", "COUNT", "TTL", "TIMEOUT", "EXPIRY", "TYPE",
    "MODE", "HEADER", "ENABLED", "MOUNT", "KEYREF", "PREFIX", "FIELD",
})
"""A secret word followed last by one of these names something about a secret, not the secret
itself: `PASSWORD_FILE`, `TOKEN_URL`, `SECRET_NAME`, `TOKEN_LIMIT`."""

_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> tuple[str, ...]:
    """`dbPassword`, `DB_PASSWORD`, `db-password`, `example.com/db.password` -> (DB, PASSWORD)."""
    words: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", name):
        words.extend(word.upper() for word in _NAME_PARTS.findall(part))
    return tuple(words)


def normalized_name(name: str) -> str:
    """The form names are compared in (`spec.notSecret`): upper-case words joined by `_`."""
    return "_".join(name_words(name))


def is_secret_name(name: str) -> bool:
    """Whether a name says its value is a secret: a secret word (or `<qualifier>_KEY`) among
    its words, and the last word not one that names something about a secret (`_FILE`)."""
    words = name_words(name)
    if not words or words[-1] in NOT_THE_SECRET:
        return False
    if words == ("PWD",):
        return False
    if any(word in SECRET_WORDS or word.endswith(COMPOUND_ENDINGS) for word in words):
        return True
    if words[-1] == "PASS" and len(words) > 1:
        return True
    return any(first in KEY_QUALIFIERS and second == "KEY"
               for first, second in itertools.pairwise(words))


_ASSIGNMENT = re.compile(
    r"(?:^|(?<=[\s;&,?\"'(]))(-{0,2}[A-Za-z_][A-Za-z0-9_.-]*)="
    r"(\$\([A-Za-z_][A-Za-z0-9_.-]*\)|\"[^\"]*\"|'[^']*'|[^\s;&,\"']*)")
_SPACED_FLAG = re.compile(r"(?:^|(?<=\s))(--?[A-Za-z][A-Za-z0-9_.-]*)\s+([^\s-]\S*)")
_FLAG_ALONE = re.compile(r"--?[A-Za-z][A-Za-z0-9_.-]*")

NAMED_MAPPINGS = {"env": "variable", "labels": "label", "annotations": "annotation"}
"""Mappings whose keys name their values: a secret name there must not hold a literal."""


def shape_problem(path: FieldPath, what: str, *, key: bool = False) -> Problem:
    """A value (or key) at `path` shaped like the credential `what`: never the value itself."""
    return Problem(
        path,
        f"{'the key ' if key else ''}holds what looks like {what}; credentials never belong in "
        "a spec (it is in git, in the cluster and in CI logs): keep it in a Secret and use "
        "secretKeyRef or envFrom",
        key=key,
        hidden_key=key,
    )


class _Finder:
    def __init__(self, not_secret: frozenset[str]) -> None:
        self.not_secret = not_secret
        self.exempted: set[str] = set()
        self.problems: list[Problem] = []
        self.aws_key_id_seen = False
        self.aws_secrets_if_paired: list[FieldPath] = []
        """Values shaped like an AWS secret access key that are taken only when the document
        holds an AWS access key id too (`credential_shapes`)."""

    def secret_name(self, name: str) -> bool:
        if not is_secret_name(name):
            return False
        if normalized_name(name) in self.not_secret:
            self.exempted.add(normalized_name(name))
            return False
        return True

    def walk(self, value: Any, path: FieldPath) -> None:
        if isinstance(value, dict):
            if value.get("type") == "service_account" and "private_key" in value:
                self.problems.append(shape_problem(path, GOOGLE_SERVICE_ACCOUNT))
            named = NAMED_MAPPINGS.get(str(path[-1])) if path else None
            for key, item in value.items():
                child = (*path, str(key))
                if isinstance(key, str):
                    self.shaped(key, child, key=True)
                if named is not None and isinstance(key, str):
                    self.named_entry(key, item, child, named)
                self.walk(item, child)
        elif isinstance(value, list):
            listed_environment = bool(path) and str(path[-1]) == "env"
            for index, item in enumerate(value):
                # A container's env in Kubernetes' own form: [{name, value}, ...].
                if (listed_environment and isinstance(item, dict)
                        and isinstance(item.get("name"), str)):
                    self.named_entry(item["name"], item, (*path, index), "variable")
                self.walk(item, (*path, index))
            self.spaced_flags_in_list(value, path)
        elif isinstance(value, str) and not self.shaped(value, path, key=False):
            self.assignments(value, path)

    def shaped(self, text: str, path: FieldPath, *, key: bool) -> bool:
        detectors = [*VALUE_DETECTORS]
        if not key and path and str(path[-1]) == "image":
            detectors.append(IMAGE_CREDENTIALS)
        for detector in detectors:
            if detector.found(text):
                self.aws_key_id_seen |= detector.what == AWS_ACCESS_KEY_ID
                self.problems.append(shape_problem(path, detector.what, key=key))
                return True
        if key:
            return False
        candidates = list(aws_secret_candidates(text))
        if any(candidate.random_alone for candidate in candidates):
            self.problems.append(shape_problem(path, AWS_SECRET_ACCESS_KEY))
            return True
        if candidates:
            self.aws_secrets_if_paired.append(path)
        return False

    def paired_aws_secrets(self) -> None:
        """The values shaped like an AWS secret access key, in a document that also holds an
        AWS access key id: together they are a key pair, however plain the secret looks."""
        if not self.aws_key_id_seen:
            return
        reported = {problem.path for problem in self.problems}
        self.problems.extend(
            shape_problem(path, f"{AWS_SECRET_ACCESS_KEY} (the job also holds an AWS access "
                          "key id)")
            for path in self.aws_secrets_if_paired if path not in reported)

    def named_entry(self, name: str, item: Any, path: FieldPath, kind: str) -> None:
        literal = item if isinstance(item, str) else (
            item.get("value") if isinstance(item, dict) else None)
        if isinstance(literal, str) and is_literal(literal) and self.secret_name(name):
            where = (*path, "value") if isinstance(item, dict) else path
            self.problems.append(Problem(
                where,
                f"the {kind}'s name says it is a secret, and its value is written here; secret "
                "values never belong in git: use {secretKeyRef: {name: <existing Secret>, key: "
                "<key>}} (or, if it is no secret, list the name in spec.notSecret)"
                if kind == "variable" else
                f"the {kind}'s key says it is a secret, and its value is written here; secret "
                "values never belong in git (or, if it is no secret, list the key in "
                "spec.notSecret)",
            ))

    def assignments(self, text: str, path: FieldPath) -> None:
        found = [(match.group(1), match.group(2)) for match in _ASSIGNMENT.finditer(text)]
        found += [(match.group(1), match.group(2)) for match in _SPACED_FLAG.finditer(text)]
        for name, value in found:
            if is_literal(value) and self.secret_name(name):
                self.problems.append(_option_problem(path, name))
                return

    def spaced_flags_in_list(self, items: list[Any], path: FieldPath) -> None:
        for index, (flag, value) in enumerate(itertools.pairwise(items)):
            if (isinstance(flag, str) and isinstance(value, str) and _FLAG_ALONE.fullmatch(flag)
                    and not value.startswith("-") and is_literal(value)
                    and self.secret_name(flag)):
                self.problems.append(_option_problem((*path, index + 1), flag))


def _option_problem(path: FieldPath, name: str) -> Problem:
    return Problem(
        path,
        f"passes a literal value to {escape_text(name)}, whose name says it is a secret; pass "
        "it from a Secret instead (an env variable with secretKeyRef, then $(VARIABLE) here), "
        "or list the name in spec.notSecret if it is no secret",
    )


def _not_secret_names(data: Any) -> list[tuple[int, str]]:
    spec = data.get("spec") if isinstance(data, dict) else None
    names = spec.get("notSecret") if isinstance(spec, dict) else None
    if not isinstance(names, list):
        return []
    return [(index, name) for index, name in enumerate(names) if isinstance(name, str)]


def find_literal_secrets(data: Any) -> Iterator[Problem]:
    """Every literal credential in a loaded document (plain dicts and lists), by place."""
    listed = _not_secret_names(data)
    finder = _Finder(frozenset(normalized_name(name) for _, name in listed))
    finder.walk(data, ())
    finder.paired_aws_secrets()
    yield from finder.problems
    for index, name in listed:
        where = ("spec", "notSecret", index)
        if not is_secret_name(name):
            yield Problem(where, "this name does not look secret, so it needs no exception; "
                          "remove it")
        elif normalized_name(name) not in finder.exempted:
            yield Problem(where, "no name with a literal value in this job matches it; remove "
                          "it (names match by their words: DB_TOKEN = db-token = dbToken)")


def find_script_credentials(script: Script, where: FieldPath) -> Iterator[Problem]:
    """Credentials, by shape, in the files of a job's script, which tfcompile copies into a
    ConfigMap (readable by whoever may read the job's ConfigMaps) and into the output in git:
    one problem per file and kind, at the `script:` field, naming the file and line only."""
    for item in script.files:
        for what, start in credentials_in_text(item.text):
            line = item.text.count("\n", 0, start) + 1
            yield Problem(
                where,
                f"file {escape_text(item.path)}, line {line}, holds what looks like {what}; "
                "the script is shipped in a ConfigMap and into the output in git: keep the "
                "credential in a Secret and read it in the script from an env variable "
                "(secretKeyRef or envFrom) or a mounted Secret",
            )
