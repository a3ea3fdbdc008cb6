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
FOLDERS = {
    "simulation": "eosim.simulation",
    "analysis": "eosim.analysis",
    "real": "eosim.real",
    "eosim": "eosim",
}


def _installed_name(init: Path) -> str:
    top, *rest = init.parent.relative_to(ROOT).parts
    return ".".join([FOLDERS[top], *rest])


# Folders installed for their data only (no __init__.py): the shipped scenarios.
DATA_PACKAGES = {"eosim.scenarios": "scenarios"}


def test_every_package_folder_is_installed_under_eosim() -> None:
    """The explicit package list in pyproject.toml names every folder with an __init__.py
    (a new subpackage left out would be missing from a wheel, not from a source checkout),
    and the data-only scenarios folder."""
    folders = sorted(
        _installed_name(init) for top in FOLDERS for init in (ROOT / top).rglob("__init__.py")
    )
    assert sorted(PYPROJECT["tool"]["setuptools"]["packages"]) == sorted([*folders, *DATA_PACKAGES])
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {
        "eosim.simulation": "simulation",
        "eosim.analysis": "analysis",
        "eosim.real": "real",
        **DATA_PACKAGES,
    }
    assert PYPROJECT["tool"]["setuptools"]["package-data"]["eosim.scenarios"] == ["*.yaml"]


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
                if n.split(".")[0] in ("simulation", "analysis", "real")
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
    # Installed (editable, as the README installs it), alone and with the checkout also on
    # PYTHONPATH. eosim no longer extends its own __path__ to serve an uninstalled checkout.
    for env in (_clean_env() | {"PYTHONPATH": str(ROOT)}, _clean_env()):
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        if "No module named 'eosim" in out.stderr:
            pytest.skip("eosim is not installed for this interpreter")
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


# What a source tree has that a wheel must not be built from.
NOT_SOURCE = {".git", "build", "dist", "results", "__pycache__", ".pytest_cache", ".ruff_cache"}
NOT_SOURCE |= {".hypothesis", ".venv"}


def _build_wheel(tmp: Path, **env: str) -> Path:
    """eosim built as a wheel by pip (in its own build environment, as a user's install
    builds it), from a copy of the source tree (without extensions built in place)."""

    def ignore(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in NOT_SOURCE or n.endswith((".egg-info", ".so", ".pyd"))}

    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=ignore)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp), str(source)],
        capture_output=True,
        text=True,
        env={**_clean_env(), **env},
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (path,) = tmp.glob("eosim-*.whl")
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def _c_scanners(wheel: Path) -> list[str]:
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    return [
        n
        for n in names
        if n.startswith("eosim/analysis/_jsonl_scan.") and n.endswith((".so", ".pyd"))
    ]


def test_the_wheel_carries_the_c_scanner_where_a_compiler_is(wheel: Path) -> None:
    if not _c_scanners(wheel) and os.environ.get("EOSIM_REQUIRE_COMPILED") != "1":
        pytest.skip("no C compiler here: the wheel was built without eosim's C scanner")
    assert _c_scanners(wheel)


def test_without_a_compiler_the_wheel_is_built_and_reads_histories(tmp_path: Path) -> None:
    """The C scanner is optional (setup.py): with no working compiler the build goes on
    without it, and the installed eosim reads JSON Lines histories with the Arrow scanner."""
    import zipfile

    built = _build_wheel(tmp_path, CC="false")
    assert _c_scanners(built) == []
    site = tmp_path / "site"
    zipfile.ZipFile(built).extractall(site)
    history = tmp_path / "h.jsonl"
    send = (
        '{"kind":"op","id":%d,"type":"%s","f":"send","process":"p","time":1,'
        '"value":{"topic":"t","partition":0,"key":null,"value":"v%d"%s}}'
    )
    lines = [send % (i, "invoke", i, "") for i in range(100)]
    lines += [send % (i, "ok", i, f',"offset":{i}') for i in range(100)]
    history.write_text("\n".join(lines) + "\n")
    code = (
        # Not this checkout's editable install, which finds the extension built in place.
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in repr(f)]\n"
        "import eosim\n"
        f"assert eosim.__file__.startswith({str(site)!r}), eosim.__file__\n"
        "from eosim.analysis import jsonl_reader\n"
        "from eosim.analysis.history import load_history\n"
        f"history = load_history({str(history)!r})\n"
        "print(jsonl_reader.SCANNER, type(history.sends).__name__, len(history.sends))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**_clean_env(), "PYTHONPATH": str(site)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["arrow", "ReadSendTable", "100"]


def test_the_wheel_ships_the_scenarios_and_every_data_file(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = sorted(p.name for p in (ROOT / "scenarios").glob("*.yaml"))
    assert (
        shipped
        and sorted(n.split("/")[-1] for n in names if n.startswith("eosim/scenarios/")) == shipped
    )
    for data in (
        "eosim/scenario.schema.json",
        "eosim/analysis/sweep/log4j2.properties",
        "eosim/analysis/report/templates/report.html",
        "eosim/analysis/report/templates/report.css",
    ):
        assert data in names, data


def test_an_installed_eosim_runs_its_scenarios_by_name(wheel: Path, tmp_path: Path) -> None:
    """From the wheel alone (unpacked as pip installs it, away from the source tree): the
    scenarios are listed, taken by name, and copied out."""
    import zipfile

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def eosim(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eosim.cli", *argv],
            cwd=elsewhere,
            env=_clean_env() | {"PYTHONPATH": str(site)},
            capture_output=True,
            text=True,
        )

    listed = eosim("scenarios")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
    ok = eosim("validate", "idempotent")
    assert ok.returncode == 0 and ok.stdout.startswith("idempotent: ok"), ok.stderr
    unknown = eosim("validate", "idempotnt")
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "close name: idempotent" in unknown.stderr.replace("names", "name")
    copied = eosim("scenarios", "copy", "at-most-once", "mine")
    assert copied.returncode == 0, copied.stderr
    copy = elsewhere / "mine" / "at-most-once.yaml"
    assert copy.read_bytes() == (ROOT / "scenarios" / "at-most-once.yaml").read_bytes()
    # The copy is a path that exists: it wins over the shipped scenario of the same name.
    copy.write_text(copy.read_text().replace("name: at-most-once", "name: my-copy"))
    ok = eosim("validate", "mine/at-most-once.yaml")
    assert ok.returncode == 0 and "(my-copy:" in ok.stdout, ok.stderr
