"""The Python scenarios, by name. A scenario is a function (Target, prefix) -> record, registered
with @scenario; its name is the function's name. Modules named py_*.py hold them and are imported
by test_python.py, so a new module is found without a list to keep."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from tests.conformance.targets import Scenario

SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    name = fn.__name__
    if name in SCENARIOS:
        raise ValueError(f"two Python scenarios are named {name}")
    SCENARIOS[name] = fn
    return fn


def load_all() -> dict[str, Scenario]:
    here = Path(__file__).parent
    for mod in pkgutil.iter_modules([str(here)]):
        if mod.name.startswith("py_"):
            importlib.import_module(f"tests.conformance.{mod.name}")
    return SCENARIOS
