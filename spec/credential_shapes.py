"""Credentials recognised by their shape, whatever name or field holds them.

A name can hide what a value is (`AZURE_STORAGE_KEY`, `MY_VAR`, `--key`), so every string of a
job spec, and every file of its script (shipped in a ConfigMap), is also matched against the
shapes of well-known credentials. Each shape is specific enough that the values a training job
writes (paths, digests, image references, identifiers) do not take it; where a shape alone would
also fit such a value, a second test decides, and says so here:

- an Azure storage account key: 88 base64 characters ending `==` that decode to 64 bytes. A
  SHA-512 digest in base64 has that shape too: one written as a digest (`sha512-…`, `sha512:…`,
  `sha512=…`, as Subresource Integrity and package locks write them) is not taken;
- an AWS secret access key: 40 characters of base64's alphabet bounded by other characters (a
  run of 41 is not one), holding upper- and lower-case letters and a digit (a path of words such
  as `policy/AWSDataExchangeProviderFullAccess` has none), and not hexadecimal (a git commit, a
  SHA-1 digest: 40 hexadecimal characters). It is taken when the same text (a job's document,
  or one script file) holds an AWS access key id, its partner; or alone, when it is as random
  as a key and not made of words: at least 4.5 bits of Shannon entropy per character
  (detect-secrets' threshold for base64), which paths and identifiers of 40 characters rarely
  reach since they repeat their letters (`models/ResNet50/v2/checkpoints/epoch0001` has 4.1);
  not starting with `/`, holding at most two `/` and not right after a `.`
  (`python.org/cpython/file/603b4d593758/Lib/socket` reaches 4.5); and no eight lower-case
  letters in a row (a CamelCase identifier). About 7 % of random keys fail these tests alone:
  they are found beside their key id, or by their name (`AWS_SECRET_ACCESS_KEY`);
- a Google Cloud service-account key: JSON with `"type": "service_account"` and a
  `"private_key"` (or a private-key block alone);
- tokens by their documented prefixes: GitHub (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`,
  `github_pat_`), GitLab, Slack (`xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxo-`, `xapp-`,
  each followed by digits, as real ones are, so the placeholder `xoxb-your-token` is not one),
  Hugging Face (`hf_` and at least 34 letters and digits in both cases, so a folder such as
  `hf_cache` or `hf_transformers_cache` is not one), Google API keys, `sk-…` keys, JSON Web
  Tokens, passwords in URLs.

Every pattern takes time linear in the text, since a job file may hold one string of 256 KiB:
where a pattern could begin at any character of a run of its own characters (a URL's scheme, a
token's first part, a run of base64), a lookbehind lets it begin only where the run does, and
what a later part of the pattern could never give back is taken possessively (`*+`) or
atomically (`(?>…)`), so no run is read again from each of its characters. The JSON Web Token
and URL patterns find exactly the texts `eyJ…{8,}.eyJ…{8,}.…{8,}` and `scheme://user:password@`
that simpler, quadratic forms would.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_REFERENCE = re.compile(r"\$\([A-Za-z_][A-Za-z0-9_.-]*\)|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
"""A value taken from elsewhere at run time: Kubernetes `$(VAR)` expansion, a shell `$VAR`."""

BOOLEAN_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "0", "1"})
"""A flag such as `--use-token true` switches something on; it carries no secret."""


def is_literal(value: str) -> bool:
    """Whether a value is written here (not empty, not a `$(VAR)` reference, not a switch)."""
    stripped = value.strip().strip("\"'")
    return bool(stripped) and not _REFERENCE.fullmatch(stripped) and (
        stripped.lower() not in BOOLEAN_WORDS
    )


def _always(_text: str, _match: re.Match[str]) -> bool:
    return True


@dataclass(frozen=True)
class ValueDetector:
    """A credential recognised by its shape: a pattern, and a test of each match (`accept`)
    where the pattern alone would also fit ordinary values."""

    what: str
    pattern: re.Pattern[str]
    accept: Callable[[str, re.Match[str]], bool] = _always

    def found(self, text: str) -> bool:
        return self.first_position(text) is not None

    def first_position(self, text: str) -> int | None:
        """Where in `text` the first credential of this shape starts, or None."""
        for match in self.pattern.finditer(text):
            if is_literal(match.group(match.lastindex or 0)) and self.accept(text, match):
                return match.start()
        return None


_DIGEST_BEFORE = re.compile(r"sha-?512[-:=_ ]?$", re.IGNORECASE)


def _azure_account_key(text: str, match: re.Match[str]) -> bool:
    """88 characters that decode to 64 bytes (and encode back to the same text), not written
    as a SHA-512 digest."""
    if _DIGEST_BEFORE.search(text[max(0, match.start() - 8):match.start()]):
        return False
    written = match.group(0)
    try:
        decoded = base64.b64decode(written, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(decoded) == 64 and base64.b64encode(decoded).decode("ascii") == written


def _both_cases(_text: str, match: re.Match[str]) -> bool:
    token = match.group(0)
    return any(character.isupper() for character in token) and any(
        character.islower() for character in token)


AWS_ACCESS_KEY_ID = "an AWS access key id"
AWS_SECRET_ACCESS_KEY = "an AWS secret access key"

GOOGLE_SERVICE_ACCOUNT = "a Google Cloud service-account key"
_PRIVATE_KEY_FIELD = re.compile(r"\"private_key\"\s*+:")


def _holds_private_key(text: str, _match: re.Match[str]) -> bool:
    """A service account's JSON is a key only with its `private_key` (the account's e-mail
    and project alone are no credential)."""
    return _PRIVATE_KEY_FIELD.search(text) is not None


VALUE_DETECTORS = (
    ValueDetector(AWS_ACCESS_KEY_ID, re.compile(
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])")),
    ValueDetector("a GitHub token", re.compile(
        r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})")),
    ValueDetector("a GitLab token", re.compile(
        r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|ffct)-"
        r"[A-Za-z0-9_-]{20,}")),
    ValueDetector("a Slack token or webhook", re.compile(
        r"(?<![A-Za-z0-9])(?:xox[abposr]-[0-9]|xapp-[0-9]-)[A-Za-z0-9-]{9,}"
        r"|hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+")),
    ValueDetector("a Google API key", re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}")),
    ValueDetector("a Hugging Face token", re.compile(
        r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{34,}+(?![A-Za-z0-9_])"), _both_cases),
    ValueDetector("an API secret key (sk-…)", re.compile(
        r"(?<![A-Za-z0-9_-])(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}|[sr]k_live_[A-Za-z0-9]{16,})")),
    ValueDetector(GOOGLE_SERVICE_ACCOUNT, re.compile(r"\"type\"\s*+:\s*+\"service_account\""),
                  _holds_private_key),
    ValueDetector("a private key", re.compile(
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")),
    ValueDetector("a JSON Web Token", re.compile(
        r"(?<![A-Za-z0-9_-])(?=[A-Za-z0-9_-]*+\.eyJ)(?>[A-Za-z0-9_-]*?eyJ[A-Za-z0-9_-]{8,}+\.)"
        r"eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}")),
    ValueDetector("an Azure storage key or signature", re.compile(
        r"AccountKey=([A-Za-z0-9+/=]{20,})|[?&]sig=([A-Za-z0-9%+/=]{20,})")),
    ValueDetector("an Azure storage account key", re.compile(
        r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{86}==(?![A-Za-z0-9+/=])"), _azure_account_key),
    ValueDetector("a password in a URL (scheme://user:password@host)", re.compile(
        r"(?<![A-Za-z0-9+.-])[0-9+.-]*+[A-Za-z][A-Za-z0-9+.-]*+://[^\s/?#@:]*+:([^\s/?#@]++)@")),
)
"""Shapes looked for in every string of a job spec, in this order (the first that matches
names the credential)."""

SCRIPT_DETECTORS = tuple(detector for detector in VALUE_DETECTORS
                         if not detector.what.startswith("a password in a URL"))
"""Shapes looked for in a script's files. A password in a URL is left out: code builds URLs
from variables (`f"postgres://{user}:{password}@{host}"`), which that shape would take for a
written password."""

IMAGE_CREDENTIALS = ValueDetector("a password in an image reference (user:password@registry)",
                                  re.compile(r"^[^/@\s:]+:([^/@\s]+)@(?!sha[0-9]+:)"))
"""An image reference holds no credentials: `user:password@registry/image` is refused, while
`name:tag@sha256:…` (a digest) is an ordinary reference."""

_AWS_SECRET_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])")
_HEXADECIMAL = re.compile(r"[0-9a-f]{40}|[0-9A-F]{40}")

RANDOM_BITS_PER_CHARACTER = 4.5
"""Shannon entropy a lone 40-character value needs to be taken for an AWS secret access key
(detect-secrets' default for base64 strings)."""

PATH_SEPARATORS = 3
"""A lone 40-character value with this many `/` (four parts or more), one that starts with `/`,
or one right after a `.` (`python.org/a/b`) is taken for a path, not a key."""

_WORD = re.compile(r"[a-z]{8}")
"""Eight lower-case letters in a row: a word (`K8sIoApimachineryPkgApisMetaV1ObjectMeta`), which
a lone 40-character value of a key holds only once in seventy."""


def shannon_entropy(text: str) -> float:
    """Bits per character of `text`, from how often each of its characters occurs."""
    counts = Counter(text)
    return -sum(count / len(text) * math.log2(count / len(text)) for count in counts.values())


@dataclass(frozen=True)
class AwsSecretCandidate:
    """A value shaped like an AWS secret access key, at `start` of its text; `random_alone`
    when it is taken even without an AWS access key id beside it."""

    start: int
    random_alone: bool


def aws_secret_candidates(text: str) -> Iterator[AwsSecretCandidate]:
    """Each 40-character value of `text` that may be an AWS secret access key."""
    for match in _AWS_SECRET_CANDIDATE.finditer(text):
        value = match.group(0)
        if _HEXADECIMAL.fullmatch(value) or not is_literal(value):
            continue
        if not (any(character.isupper() for character in value)
                and any(character.islower() for character in value)
                and any(character.isdigit() for character in value)):
            continue
        path_or_words = (value.startswith("/") or value.count("/") >= PATH_SEPARATORS
                         or text[match.start() - 1:match.start()] == "."
                         or _WORD.search(value) is not None)
        yield AwsSecretCandidate(
            start=match.start(),
            random_alone=not path_or_words
            and shannon_entropy(value) >= RANDOM_BITS_PER_CHARACTER)


def credentials_in_text(text: str) -> Iterator[tuple[str, int]]:
    """Each kind of credential a whole text (a script's file) holds, with where the first of
    that kind starts; an AWS secret access key when it is random alone, or the text holds an
    AWS access key id too."""
    key_id_found = False
    for detector in SCRIPT_DETECTORS:
        start = detector.first_position(text)
        if start is not None:
            key_id_found |= detector.what == AWS_ACCESS_KEY_ID
            yield detector.what, start
    for candidate in aws_secret_candidates(text):
        if candidate.random_alone or key_id_found:
            yield AWS_SECRET_ACCESS_KEY, candidate.start
            return
