"""The mutation run's list stays runnable: each mutant's original text occurs exactly once in
its file, and its tests exist. A change that moves the text a mutant names would otherwise stop
`scripts/mutation.py` at that mutant, unnoticed until someone measures again."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import REPOSITORY


def mutation_script() -> ModuleType:
    specification = importlib.util.spec_from_file_location(
        "mutation_script", REPOSITORY / "scripts" / "mutation.py")
    assert specification is not None and specification.loader is not None
    module = importlib.util.module_from_spec(specification)
    sys.modules[specification.name] = module  # its dataclasses look their module up there
    specification.loader.exec_module(module)
    return module


def test_every_mutant_names_text_found_once_and_tests_that_exist() -> None:
    mutants = mutation_script().MUTANTS
    assert len(mutants) >= 60
    assert len({mutant.name for mutant in mutants}) == len(mutants)
    for mutant in mutants:
        text = (REPOSITORY / mutant.path).read_text(encoding="utf-8")
        assert text.count(mutant.original) == 1, (mutant.name, mutant.path)
        assert mutant.replacement != mutant.original, mutant.name
        files = [entry for entry in mutant.tests if entry.startswith("tests/")]
        assert files and all(Path(REPOSITORY, entry).is_file() for entry in files), mutant.name
