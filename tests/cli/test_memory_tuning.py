"""Every budgetscope process starts with NumPy's huge-page advice off
(budgetscope/memory_tuning.py), unless the user set it: checked in fresh interpreters, since NumPy
reads the setting once, at its import."""

from __future__ import annotations

import os
import subprocess
import sys

from budgetscope.memory_tuning import NUMPY_HUGEPAGE_ENV

# NumPy's own reading of the setting (the getter moved with numpy 2's _core).
_READ_NUMPY = """
import sys
import budgetscope.cli
import numpy
core = getattr(numpy, "_core", None) or numpy.core
print(core.multiarray._get_madvise_hugepage())
"""


def _python(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=True)
    return done.stdout.strip()


def _environment_without_the_setting() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key != NUMPY_HUGEPAGE_ENV}


def test_the_cli_imports_numpy_with_huge_pages_not_asked_for() -> None:
    assert _python(_READ_NUMPY, _environment_without_the_setting()) == "False"


def test_a_setting_the_user_made_is_kept() -> None:
    env = {**_environment_without_the_setting(), NUMPY_HUGEPAGE_ENV: "1"}
    assert _python(_READ_NUMPY, env) == "True"


def test_the_package_sets_it_before_anything_imports_numpy() -> None:
    code = ("import sys, os\nimport budgetscope\n"
            f"print('numpy' in sys.modules, os.environ[{NUMPY_HUGEPAGE_ENV!r}])")
    assert _python(code, _environment_without_the_setting()) == "False 0"
