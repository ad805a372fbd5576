"""The layers of docs/design.md ("Layers"), kept true: every import of the product's packages
points down, never up or sideways. A failure names the file, the line and the import."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What each package may import of the others (docs/design.md, "Layers").
ALLOWED: dict[str, frozenset[str]] = {
    "store": frozenset(),
    "queries": frozenset({"store"}),
    "ingest": frozenset({"store"}),
    "simulation": frozenset({"queries", "store"}),
    "dashboard": frozenset({"queries", "simulation", "store"}),
    "budgetscope": frozenset({"dashboard", "simulation", "queries", "ingest", "store"}),
    "sample_traces": frozenset({"budgetscope_sdk"}),  # its simulated agents run on the SDK
}
PACKAGES = frozenset(ALLOWED) | {"sdk", "budgetscope_sdk"}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every absolute import in `path`, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def test_every_import_points_down() -> None:
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, target in imports(path):
                if target in PACKAGES and target != package and target not in allowed:
                    wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "imports against docs/design.md's layers:\n" + "\n".join(wrong)


def test_the_walk_sees_the_product() -> None:
    """A walk that found nothing would pass: it must see each package's imports of store."""
    for package in ("queries", "ingest", "dashboard", "budgetscope"):
        targets = {t for p in (ROOT / package).rglob("*.py") for _, t in imports(p)}
        assert "store" in targets, package


def test_the_layers_are_the_drawing() -> None:
    """The table above and the one in docs/design.md name the same packages."""
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = design.split("### Layers", 1)[1].split("\n## ", 1)[0]
    for package in ALLOWED:
        if package != "sample_traces":
            assert package in section, package
