"""Each secret rule, in process: a case it must catch and a near miss it must let through.

A user relies on both halves: a credential written into a spec is refused before it reaches git,
and an ordinary value (a path, a count, a placeholder, an identifier) still builds. The expected
places are written out here, never computed with the rules' own code; the values that stand near
a rule's threshold say how they were measured.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tfcompile.spec.credential_shapes import credentials_in_text
from tfcompile.spec.secrets import find_literal_secrets


def refused_at(spec: dict[str, Any]) -> list[tuple[str | int, ...]]:
    """The places the secret rules refuse in a document whose spec is `spec`."""
    return [problem.path for problem in find_literal_secrets({"spec": spec})]


# A name that means a secret, given a literal value, is refused at its place; a name that only
# looks like one (or that says something about a secret) is not.
@pytest.mark.parametrize(("caught", "passes"), [
    ("DB_PASSWORD", "DB_PASSWORD_FILE"),  # a secret word; a file that holds the secret
    ("DB_PASS", "PASS"),  # PASS as the last of several words; alone it is no secret
    ("dbPass", "PASS_RATE"),
    ("DB_PWD", "PWD"),  # PWD with another word; alone it is the working directory
    ("PGPASSWORD", "PASSWORDLESS"),  # run together with a secret word at its end
    ("API_KEY", "MODEL_KEY"),  # KEY after a qualifier; after any other word no secret
    ("AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT"),
    ("SERVICE_ACCOUNT_KEY", "ACCESS_LOG"),
    ("URL_TOKEN", "TOKEN_URL"),  # what the last word names decides
    ("API_TOKEN", "MAX_TOKENS"),  # whole words only: TOKENS is a count
    ("HF_TOKEN", "TOKENIZER_PATH"),
], ids=lambda name: str(name))
def test_a_secret_name_with_a_literal_value_is_refused_and_a_near_miss_is_not(
        caught: str, passes: str) -> None:
    assert refused_at({"env": {caught: "written-here-9"}}) == [("spec", "env", caught)]
    assert refused_at({"env": {passes: "written-here-9"}}) == []


@pytest.mark.parametrize("value", ["", "$(DB_PASSWORD)", "${DB_PASSWORD}", "true", "off"])
def test_a_secret_name_whose_value_is_no_literal_is_not_refused(value: str) -> None:
    assert refused_at({"env": {"DB_PASS": value}}) == []
    assert refused_at({"env": {"DB_PASS": "hunter2"}}) == [("spec", "env", "DB_PASS")]


def test_an_env_list_in_kubernetes_form_is_checked_by_its_names() -> None:
    """A pod template's containers list their variables as `{name, value}`."""
    container = {"name": "sidecar", "env": [
        {"name": "EPOCHS", "value": "3"},
        {"name": "DB_PASS", "value": "hunter2"},
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": "db", "key": "token"}}}]}
    assert refused_at({"podTemplate": {"spec": {"containers": [container]}}}) == [
        ("spec", "podTemplate", "spec", "containers", 0, "env", 1, "value")]


def test_a_flag_and_its_value_as_two_items_are_refused_and_a_flag_after_a_flag_is_not() -> None:
    assert refused_at({"args": ["--api-key", "hunter2"]}) == [("spec", "args", 1)]
    assert refused_at({"args": ["--use-token", "--epochs", "3"]}) == []


def test_a_name_listed_in_not_secret_silences_its_name_never_a_credentials_shape() -> None:
    assert refused_at({"notSecret": ["PAD_TOKEN"], "env": {"PAD_TOKEN": "[PAD]"}}) == []
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # `ghp_` and 36 letters and digits
    assert refused_at({"notSecret": ["PAD_TOKEN"], "env": {"PAD_TOKEN": token}}) == [
        ("spec", "env", "PAD_TOKEN")]


# Credentials by their shape, under a name that says nothing: each beside a near miss.
AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"  # AKIA and 16 upper-case letters and digits
AZURE_ACCOUNT_KEY = base64.b64encode(bytes(range(7, 71))).decode()  # 64 bytes: 88 characters
RANDOM_AWS_SECRET = "Zq8/Xw3Rt5/Yu7Io9PaSd2Fg4Hj6Kl1Mn0Bv8CxE"
"""40 characters, two `/`, 5.22 bits of Shannon entropy per character (counted by hand with
`collections.Counter`: 38 distinct characters, `/` twice)."""
REPEATED_BLOCKS = "AbCd1234AbCd5678EfGh1234EfGh5678IjKl9012"
"""40 characters of base64's alphabet in both cases and digits, no `/`, no word, but made of
repeated blocks: 4.38 bits per character (by the same count), below detect-secrets' 4.5."""
FOUR_PARTS = "Zq8/Xw3Rt5/Yu7Io9Pa/Sd2Fg4Hj6Kl1Mn0Bv8Cx"
"""RANDOM_AWS_SECRET's characters with a third `/`: 5.15 bits per character, but four parts of
a path."""


@pytest.mark.parametrize(("caught", "passes"), [
    (AWS_KEY_ID, AWS_KEY_ID + "X"),  # a 21st character: no key id
    ("xoxb-123456789012-abcdefghijKLMN", "xoxb-your-token-here"),  # Slack: digits after xoxb-
    ("hf_" + "AbCdEfGhIj" * 3 + "KlMn", "hf_" + "downloadedcheckpointsfromthehub"),
    (AZURE_ACCOUNT_KEY, "sha512-" + AZURE_ACCOUNT_KEY),  # an integrity digest, as npm writes it
    (RANDOM_AWS_SECRET, REPEATED_BLOCKS),
    (RANDOM_AWS_SECRET, FOUR_PARTS),
    ("postgres://trainer:pa55-w0rd@db:5432/runs", "postgres://trainer@db:5432/runs"),
], ids=["aws-key-id", "slack", "hugging-face", "azure-key", "aws-secret-entropy",
        "aws-secret-path", "url-password"])
def test_a_credential_shape_is_refused_and_a_near_miss_is_not(caught: str, passes: str) -> None:
    assert refused_at({"env": {"SETTING": caught}}) == [("spec", "env", "SETTING")]
    assert refused_at({"env": {"SETTING": passes}}) == []


def test_an_image_with_a_password_is_refused_and_one_pinned_by_digest_is_not() -> None:
    assert refused_at({"image": "trainer:pa55-w0rd@registry.example.com/tf:2.16"}) == [
        ("spec", "image",)]
    assert refused_at({"image": "busybox:1.36@sha256:" + "ab" * 32}) == []


def test_a_plain_aws_secret_is_refused_only_beside_its_key_id() -> None:
    plain = "Ab1" * 13 + "A"  # 40 characters of three repeated: no key alone
    assert refused_at({"env": {"SIDE": plain}}) == []
    assert refused_at({"env": {"ID": AWS_KEY_ID, "SIDE": plain}}) == [
        ("spec", "env", "ID"), ("spec", "env", "SIDE")]


def test_a_scripts_plain_aws_secret_is_found_only_beside_its_key_id() -> None:
    plain = "Ab1" * 13 + "A"
    # `KEY_ID = '` is 10 characters; the first line 32 with its newline; `SECRET = '` 10 more
    script = f"KEY_ID = '{AWS_KEY_ID}'\nSECRET = '{plain}'\n"
    assert list(credentials_in_text(script)) == [
        ("an AWS access key id", 10), ("an AWS secret access key", 42)]
    assert list(credentials_in_text(f"SECRET = '{plain}'\n")) == []
