"""The launcher that runs a training command inside a StatefulSet pod.

A StatefulSet cannot finish: its pods restart forever (`restartPolicy: Always`), so a script that
exits 0 would train again and again. The launcher records success in an emptyDir (which survives
container restarts) and then idles; a failure exits non-zero and the kubelet restarts the
container. It forwards SIGTERM so pods stop promptly. It is POSIX `sh`, and avoids the brace form
of variables (Flux's post-build substitution would eat it) and `$(`/`$$` (the kubelet's own
expansion would rewrite them).
"""

from __future__ import annotations

from tfcompile.spec.rules import RESERVED_MOUNT_PATH

STATE_VOLUME = "tfcompile-state"
STATE_DIRECTORY = f"{RESERVED_MOUNT_PATH}/state"
SUCCESS_MARKER = f"{STATE_DIRECTORY}/succeeded"
SCRIPT_VOLUME = "script"
SCRIPT_DIRECTORY = f"{RESERVED_MOUNT_PATH}/script"
PROGRAM_NAME = "tfcompile-launcher"

SCRIPT = f"""\
marker={SUCCESS_MARKER}
if [ -e "$marker" ]; then
  echo "tfcompile: this task already succeeded; idling (delete or suspend the job to stop)"
else
  "$@" &
  child=$!
  trap 'kill -TERM "$child" 2>/dev/null' TERM INT
  wait "$child"
  status=$?
  while kill -0 "$child" 2>/dev/null; do
    wait "$child"
    status=$?
  done
  if [ "$status" -ne 0 ]; then
    echo "tfcompile: training exited with status $status; the kubelet will restart it" >&2
    exit "$status"
  fi
  touch "$marker"
  echo "tfcompile: training succeeded; idling (delete or suspend the job to stop)"
fi
trap 'exit 0' TERM INT
while :; do
  sleep 3600 &
  wait $!
done
"""


def command() -> list[str]:
    """The container `command`; the training command follows as the container's `args`."""
    return ["/bin/sh", "-c", SCRIPT, PROGRAM_NAME]
