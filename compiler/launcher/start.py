"""Starts the launcher in a pod: `python tfcompile-launcher.py --role=ROLE -- COMMAND...`.

The job's launcher ConfigMap is mounted as a directory that is a package (its `__init__.py` is
there): this file, shipped beside the modules as `tfcompile-launcher.py`, makes the directory's
parent importable and runs the package's program, whose relative imports work under whatever
name the directory has. It uses no name of tfcompile's, so it runs in any TensorFlow image.
"""

import importlib
import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[0] = os.path.dirname(here)
    program = importlib.import_module(os.path.basename(here) + ".program")
    sys.exit(program.main(sys.argv[1:]))
