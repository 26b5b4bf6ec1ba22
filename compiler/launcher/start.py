"""Starts the launcher in a pod: `python tfcompile-launcher.pyz --role=ROLE -- COMMAND...`.

The job's launcher ConfigMap carries the launcher as one zip application (its `binaryData`,
`output/launcher_zip.py` says how it is built and why): this file is its `__main__.py`, beside
the launcher's modules as the package `PACKAGE`, so Python runs the zip as it runs a script, with
the zip first on its path. Every module is imported here, before the training starts, and never
read again: a zip replaced in place while the launcher runs is not read by it. The settings are
beside the zip, in the directory the ConfigMap is mounted at. It uses no name of tfcompile's, so
it runs in any TensorFlow image.
"""

import importlib
import os
import sys

PACKAGE = "tfcompile_launcher"
"""The name of the launcher's package inside the zip."""

if __name__ == "__main__":
    program = importlib.import_module(PACKAGE + ".program")
    directory = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.exit(program.main(sys.argv[1:], directory))
