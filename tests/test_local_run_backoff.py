"""The kubelet's restart back-off as the local runtime applies it."""

from __future__ import annotations

from tfcompile.compiler.local_run.backoff import RestartBackoff


def test_doubles_from_ten_seconds_up_to_five_minutes() -> None:
    backoff = RestartBackoff(10, 300, 600)
    assert [backoff.next_delay(1) for _ in range(7)] == [10, 20, 40, 80, 160, 300, 300]


def test_a_long_run_starts_again_from_the_initial_delay() -> None:
    backoff = RestartBackoff(0.2, 1.0, 5.0)
    assert [backoff.next_delay(0.1) for _ in range(3)] == [0.2, 0.4, 0.8]
    assert backoff.next_delay(5.0) == 0.2
    assert backoff.next_delay(0.1) == 0.4
