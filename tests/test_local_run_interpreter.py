"""The interpreter containers run with stays visible when a pod's volume covers its folder: a
virtualenv under /tmp would otherwise vanish below the pod's /tmp emptyDir (and with it every
package the training imports)."""

from __future__ import annotations

import os
import sys

from tfcompile.compiler.local_run.filesystem_view import MountRequest
from tfcompile.compiler.local_run.runner import interpreter_mounts


def test_a_volume_above_the_interpreters_environment_binds_it_again_read_only() -> None:
    above = os.path.dirname(sys.prefix)
    mounts = [MountRequest("/volumes/tmp", above, False)]
    assert MountRequest(sys.prefix, sys.prefix, True) in interpreter_mounts(mounts)


def test_volumes_elsewhere_add_nothing() -> None:
    mounts = [MountRequest("/volumes/data", "/nowhere-near-the-interpreter", False),
              MountRequest("/volumes/hosts", "/etc/hosts", False)]
    assert interpreter_mounts(mounts) == []
