"""How eosim installs: one top-level package, ``eosim``, whose model and checker keep their
folders (``simulation/``, ``analysis/``) but are imported as ``eosim.simulation`` and
``eosim.analysis``; and the layers of that package, held by import-linter."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FOLDERS = {"simulation": "eosim.simulation", "analysis": "eosim.analysis", "eosim": "eosim"}


def _installed_name(init: Path) -> str:
    top, *rest = init.parent.relative_to(ROOT).parts
    return ".".join([FOLDERS[top], *rest])


def test_every_package_folder_is_installed_under_eosim() -> None:
    """The explicit package list in pyproject.toml names every folder with an __init__.py
    (a new subpackage left out would be missing from a wheel, not from a source checkout)."""
    folders = sorted(
        _installed_name(init) for top in FOLDERS for init in (ROOT / top).rglob("__init__.py")
    )
    assert sorted(PYPROJECT["tool"]["setuptools"]["packages"]) == folders
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {
        "eosim.simulation": "simulation",
        "eosim.analysis": "analysis",
    }


def test_no_module_imports_the_bare_folder_names() -> None:
    """Every import names ``eosim.simulation``/``eosim.analysis``: the bare names are not
    installed, so such an import works in a checkout and fails for every user."""
    offenders = []
    for path in sorted(ROOT.glob("**/*.py")):
        if any(p.startswith(".") or p in ("build", "results") for p in path.parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                for n in names
                if n.split(".")[0] in ("simulation", "analysis")
            ]
    assert offenders == []


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def test_eosim_imports_beside_a_users_own_analysis_and_simulation_modules(
    tmp_path: Path,
) -> None:
    """A folder holding the user's own analysis.py and simulation.py: both stay theirs, and
    eosim's API still imports (the issue: ``import eosim.api`` failed in such a folder)."""
    (tmp_path / "analysis.py").write_text("MINE = 'analysis'\n")
    (tmp_path / "simulation.py").write_text("MINE = 'simulation'\n")
    code = (
        "import analysis, simulation, eosim.api, eosim.analysis.checks;"
        "print(analysis.MINE, simulation.MINE, eosim.api.run.__module__)"
    )
    # From a source tree on PYTHONPATH, as helpers and Spark workers on a checkout run it.
    for env in (_clean_env() | {"PYTHONPATH": str(ROOT)}, _clean_env()):
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        if env.get("PYTHONPATH") is None and "No module named 'eosim'" in out.stderr:
            continue  # eosim is not installed here (a bare checkout): the first case covers it
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["analysis", "simulation", "eosim.analysis.outcome"]


def _installed_layout(target: Path) -> Path:
    """The package as a wheel lays it out: eosim/ with simulation/ and analysis/ inside."""
    package = target / "eosim"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "eosim", package, ignore=ignore)
    for folder, name in FOLDERS.items():
        if folder != "eosim":
            shutil.copytree(ROOT / folder, package / name.split(".")[1], ignore=ignore)
    return target


# `lint-imports`, run by this interpreter (the console script may belong to another one).
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"


def _lint_imports(site: Path, config: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("importlinter")
    return subprocess.run(
        [sys.executable, "-c", LINT_IMPORTS, "--config", str(config), "--no-cache"],
        cwd=site,
        env=_clean_env() | {"PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
    )


def test_layers_contract_holds(tmp_path: Path) -> None:
    """import-linter's layers contract (pyproject.toml): cli over api and schema, over
    analysis, over the model; nothing imports upwards."""
    site = _installed_layout(tmp_path / "site")
    out = _lint_imports(site, ROOT / "pyproject.toml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 kept, 0 broken" in out.stdout


def test_layers_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The same contract fails when analysis imports the API above it (as six analysis
    modules once did)."""
    site = _installed_layout(tmp_path / "site")
    shrink = site / "eosim" / "analysis" / "shrink.py"
    shrink.write_text(shrink.read_text() + "\nfrom eosim import api  # noqa\n")
    out = _lint_imports(site, ROOT / "pyproject.toml")
    assert out.returncode != 0
    assert "eosim.analysis.shrink -> eosim.api" in out.stdout
