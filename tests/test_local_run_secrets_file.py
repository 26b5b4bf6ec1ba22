"""The secrets file format of a local run: `secret-name/key=value` lines, errors at file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfcompile.compiler.local_run import SecretsFileError, parse_secrets_file, parse_secrets_text


def test_lines_become_name_and_key_pairs() -> None:
    text = (
        "# credentials for the bucket\n"
        "\n"
        "s3-credentials/secret=abc=def \n"
        "  s3-credentials/access_key.id=AKIA\r\n"
        "other.example/EMPTY=\n"
    )
    assert parse_secrets_text(text, "secrets.env") == {
        ("s3-credentials", "secret"): "abc=def ",
        ("s3-credentials", "access_key.id"): "AKIA",
        ("other.example", "EMPTY"): "",
    }


def test_every_problem_is_reported_at_its_line_without_the_value() -> None:
    text = (
        "hunter2-no-equals-sign\n"
        "no-slash=topsecret1\n"
        "Bad_Name/key=topsecret2\n"
        "name/bad:key=topsecret3\n"
        "/key=topsecret4\n"
        "name/=topsecret5\n"
        "name/key=first\n"
        "name/key=topsecret6\n"
    )
    with pytest.raises(SecretsFileError) as caught:
        parse_secrets_text(text, "secrets.env")
    problems = caught.value.problems
    assert [problem.split(":", 2)[1] for problem in problems] == [
        "1", "2", "3", "4", "5", "6", "8"]
    assert problems[0] == "secrets.env:1: expected `secret-name/key=value` (no `=` on this line)"
    assert problems[1] == "secrets.env:2: expected `secret-name/key=value` (no `/` before `=`)"
    assert "Secret name" in problems[2] and "key" in problems[3]
    assert problems[6] == "secrets.env:8: name/key is already given on line 7"
    message = str(caught.value)
    assert "topsecret" not in message and "hunter2" not in message and "first" not in message


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(SecretsFileError, match=r"missing\.env: cannot be read"):
        parse_secrets_file(tmp_path / "missing.env")
    binary = tmp_path / "binary.env"
    binary.write_bytes(b"name/key=\xff\xfe")
    with pytest.raises(SecretsFileError, match=r"binary\.env: is not UTF-8 text"):
        parse_secrets_file(binary)
    good = tmp_path / "good.env"
    good.write_text("name/key=value\n")
    assert parse_secrets_file(good) == {("name", "key"): "value"}
