"""The kubelet's restart back-off for containers that exit, as one small state machine.

The kubelet waits 10 s before the first restart and doubles the wait on each further restart up to
300 s; a container that ran for 10 minutes before exiting starts again from 10 s. The durations are
parameters so that tests can use fractions of a second.
"""

from __future__ import annotations


class RestartBackoff:
    """Delays before successive restarts of one container."""

    def __init__(self, initial_seconds: float, maximum_seconds: float,
                 reset_after_seconds: float) -> None:
        self.initial_seconds = initial_seconds
        self.maximum_seconds = maximum_seconds
        self.reset_after_seconds = reset_after_seconds
        self._previous: float | None = None

    def next_delay(self, ran_for_seconds: float) -> float:
        """The wait before restarting a container that just exited after running this long."""
        if self._previous is None or ran_for_seconds >= self.reset_after_seconds:
            delay = self.initial_seconds
        else:
            delay = min(self._previous * 2, self.maximum_seconds)
        self._previous = delay
        return delay
