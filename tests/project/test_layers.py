"""The layers of docs/design.md ("Layers"), kept true: every import of the product's packages
points down, never up or sideways; the store is used only through its front, which holds what
the product uses, and what only tests and benches use is in store.testing, which the product
never imports; no modules import one another in a circle; ingest imports neither the CLI nor
the dashboard, and the server none of the CLI's commands; and no module reaches a private name
of another package. A failure names the file, the line and the import, or the circle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import store
import store.testing
from tests.support.paths import REPO

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


@pytest.mark.slow
def test_every_import_points_down() -> None:
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in sorted((REPO / package).rglob("*.py")):
            for line, target in imports(path):
                if target in PACKAGES and target != package and target not in allowed:
                    wrong.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not wrong, "imports against docs/design.md's layers:\n" + "\n".join(wrong)


def test_the_walk_sees_the_product() -> None:
    """A walk that found nothing would pass: it must see each package's imports of store."""
    for package in ("queries", "ingest", "dashboard", "budgetscope"):
        targets = {t for p in (REPO / package).rglob("*.py") for _, t in imports(p)}
        assert "store" in targets, package


def test_the_layers_are_the_drawing() -> None:
    """The table above and the one in docs/design.md name the same packages."""
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    section = design.split("### Layers", 1)[1].split("\n## ", 1)[0]
    for package in ALLOWED:
        if package != "sample_traces":
            assert package in section, package


# ---- only through the front ----------------------------------------------------------------
# Outside store/, the store is used through its front, store/__init__.py: `from store import X`
# with X one of its names; tests and benches also through store.testing (`from store.testing
# import X`), the names only they use. A module of a room is imported directly only by these
# files, each a test of that room's internals, with the module it may import and why.
BELOW_THE_FRONT: dict[str, tuple[str, str]] = {
    "bench/bench_derivation_statements.py": (
        "store.derive.statements", "times each statement of the derivation as it runs (its "
        "execute_file replaced by a copy that times each one), to tell where the CPU goes"),
    "tests/dashboard/test_dashboard_pages.py": (
        "store.read.reader", "counts the opens of one page run by replacing the connect the "
        "reader module calls; the front's `reader` is the function, not the module"),
    "tests/store/test_cost_bundled_prices.py": (
        "store.prices.bundled", "compares the derivation's pricing with genai-prices' own over "
        "the price keys the room keeps of it (its QUANTITIES), and matches model names through "
        "the room's lookup as the derivation does"),
    "tests/clickhouse/test_clickhouse_usage_reads.py": (
        "store.derive.usage_reads", "compares each cast it renders for the ClickHouse derivation "
        "with ingest's own (the casts of the front's TYPED_ATTRIBUTES), value for value"),
    "tests/store/test_sql_registry.py": (
        "store.file.sql_files", "reads the registry's record of the folders it loaded, to tell "
        "that every .sql file of the store went through it"),
}


# Where store.testing may be imported from: nowhere in the product.
TESTING_FOLDERS = ("tests/", "bench/")


def _outside_the_store() -> list[Path]:
    """Every Python file of the repository outside store/ (tests and benches included)."""
    folders = [entry for entry in sorted(REPO.iterdir()) if entry.is_dir()
               and not entry.name.startswith((".", "_"))
               and entry.name not in ("store", "build", "dist")
               and not entry.name.endswith(".egg-info")]
    return [*sorted(REPO.glob("*.py")), *(p for f in folders for p in sorted(f.rglob("*.py")))]


def _store_imports(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every import of the store in `path`, `what` dotted as imported: `store`,
    `store.connect` (from store import connect), `store.testing.to_arrow`, `store.read.reader`
    (from store.read import reader)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names
                      if alias.name.split(".")[0] == "store"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "store":
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


@pytest.mark.slow
def test_only_through_the_front() -> None:
    front = {f"store.{name}" for name in store.__all__}
    testing = {"store.testing", *(f"store.testing.{name}" for name in store.testing.__all__)}
    wrong, used = [], set()
    for path in _outside_the_store():
        relative = path.relative_to(REPO).as_posix()
        allowed = BELOW_THE_FRONT.get(relative, ("-", ""))[0]
        for line, what in _store_imports(path):
            if what == "store" or what in front:
                continue
            if what in testing and relative.startswith(TESTING_FOLDERS):
                continue
            if what == allowed or what.startswith(allowed + "."):
                used.add(relative)
            else:
                wrong.append(f"{relative}:{line} imports {what}: use a name of the front "
                             "(store/__init__.py's __all__), from a test or a bench one of "
                             "store.testing's, or list a test of a room's internals in "
                             "BELOW_THE_FRONT with why")
    assert not wrong, "imports past the store's front:\n" + "\n".join(wrong)
    assert used == set(BELOW_THE_FRONT), f"exceptions no longer used: {set(BELOW_THE_FRONT) - used}"


def test_the_front_walk_sees_the_imports() -> None:
    """A walk that found nothing would pass: it sees the benches', the tests' and the
    product's imports of the front, and the exceptions' imports below it."""
    seen = {relative: {what for _, what in _store_imports(REPO / relative)}
            for relative in ("bench/bench_queries.py", "ingest/decode/flatten.py",
                             "tests/support/fuzz_harness.py", *BELOW_THE_FRONT)}
    assert "store.SpanWriter" in seen["bench/bench_queries.py"]
    assert "store.FlatBatch" in seen["ingest/decode/flatten.py"]
    assert "store.testing.rows_to_arrow" in seen["tests/support/fuzz_harness.py"]
    assert "store.read.reader" in seen["tests/dashboard/test_dashboard_pages.py"]
    files = {path.relative_to(REPO).as_posix() for path in _outside_the_store()}
    assert {"tests/project/test_layers.py", "bench/bench_queries.py", "dashboard/data.py"} <= files
    assert not any(name.startswith(("store/", ".venv/")) for name in files)


def test_the_front_names_what_it_imports() -> None:
    """__all__ is what the front imports, at once or (ON_FIRST_USE) on first use; the names
    imported on first use are those type checkers read under TYPE_CHECKING, from the same
    modules; and each is there."""
    tree = ast.parse((REPO / "store" / "__init__.py").read_text(encoding="utf-8"))
    at_once = {alias.asname or alias.name for node in tree.body
               if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("store")
               for alias in node.names}
    (typed,) = [node for node in tree.body if isinstance(node, ast.If)
                and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    on_first_use = {}
    for node in typed.body:
        assert isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names:
            module = f"{node.module}.{alias.name}"
            imported = (module, None) if (REPO / Path(*module.split("."))).exists() or \
                (REPO / Path(*module.split("."))).with_suffix(".py").exists() else \
                (node.module, alias.name)
            on_first_use[alias.asname or alias.name] = imported
    assert on_first_use == store.ON_FIRST_USE
    assert not at_once & set(on_first_use)
    assert sorted(at_once | set(on_first_use)) == sorted(store.__all__)
    assert all(getattr(store, name) is not None for name in store.__all__)


def _front_names_used(path: Path) -> set[str]:
    """The names of the front `path` uses: `from store import X`, and `store.X` after `import
    store`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    used = {what.removeprefix("store.") for _, what in _store_imports(path)
            if what.count(".") == 1 and not what.startswith("store.testing")}
    if any(isinstance(node, ast.Import) and any(alias.name == "store" and not alias.asname
                                                 for alias in node.names)
           for node in ast.walk(tree)):
        used |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                 and isinstance(node.value, ast.Name) and node.value.id == "store"}
    return used


@pytest.mark.slow
def test_the_front_holds_what_the_product_uses() -> None:
    """Every name of the front is used by the product: a name only tests and benches use
    belongs in store.testing, which repeats none of the front's."""
    used: set[str] = set()
    for path in _outside_the_store():
        if not path.relative_to(REPO).as_posix().startswith(TESTING_FOLDERS):
            used |= _front_names_used(path)
    unused = sorted(set(store.__all__) - used)
    assert not unused, ("names of the front the product never uses (move those tests or "
                        f"benches use to store/testing.py, delete the others): {unused}")
    assert not set(store.__all__) & set(store.testing.__all__)
    assert {"connect", "FlatBatch", "Source", "clickhouse"} <= used  # the walk sees the product


@pytest.mark.slow
def test_the_product_never_imports_store_testing() -> None:
    """store.testing is the tests' and benches' own: no other module imports it, the store's
    own rooms and front included."""
    store_files = [path for path in sorted((REPO / "store").rglob("*.py"))
                   if path != REPO / "store" / "testing.py"]
    wrong, seen = [], set()
    for path in [*_outside_the_store(), *store_files]:
        relative = path.relative_to(REPO).as_posix()
        for line, what in _store_imports(path):
            if what == "store.testing" or what.startswith("store.testing."):
                if relative.startswith(TESTING_FOLDERS):
                    seen.add(relative.split("/")[0])
                else:
                    wrong.append(f"{relative}:{line} imports {what}")
    assert not wrong, ("the product imports store.testing (what the product uses belongs in "
                       "the front, store/__init__.py):\n" + "\n".join(wrong))
    assert seen == {"tests", "bench"}  # the walk sees the imports it allows


# ---- no import circles ---------------------------------------------------------------------
# The product's modules, the SDK's and the sample generator's import one another without a
# circle. Every import counts: at module level, in a function or under TYPE_CHECKING (an import
# moved into a function, or typed only, hides a circle but does not remove it); the shared
# pieces move down into a module both sides import instead.
MODULE_GROUPS: dict[str, tuple[str, ...]] = {
    "product": ("budgetscope", "dashboard", "simulation", "queries", "ingest", "store"),
    "sdk": ("sdk/budgetscope_sdk",),
    "sample generator": ("sample_traces",),
}
# Circles known and owned elsewhere, each to be removed from here when it is gone (none now).
KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset()


def module_files(root: Path, folders: tuple[str, ...]) -> dict[str, Path]:
    """module name -> file, for every .py file of `folders` (each a top-level package)."""
    found = {}
    for folder in folders:
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = [base.name, *path.relative_to(base).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def module_imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of `known` that module `name` (at `path`) imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            # `from package import module` imports that module; `from module import name` the
            # module itself
            targets |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                        for alias in node.names}
    resolved = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def import_circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The circles of `graph` (module -> the modules it imports): each set of modules that all
    reach one another (a strongly connected component of more than one module), found by
    Tarjan's algorithm without recursion."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(frozenset(component))
    return circles


def group_circles(root: Path, folders: tuple[str, ...]) -> list[frozenset[str]]:
    known = module_files(root, folders)
    return import_circles({name: module_imports(name, path, known)
                           for name, path in known.items()})


@pytest.mark.slow
def test_no_import_circles() -> None:
    found = {group: group_circles(REPO, folders) for group, folders in MODULE_GROUPS.items()}
    unknown = [f"{group}: {' <-> '.join(sorted(circle))}" for group, circles in found.items()
               for circle in circles if circle not in KNOWN_CIRCLES]
    assert not unknown, "import circles (move what both sides need down into a module both " \
                        "import):\n" + "\n".join(unknown)
    gone = KNOWN_CIRCLES - {circle for circles in found.values() for circle in circles}
    assert not gone, f"known circles that are gone: remove them from KNOWN_CIRCLES: {gone}"


def test_the_circle_check_sees_a_circle(tmp_path: Path) -> None:
    """A circle through a function-level import, a TYPE_CHECKING one, a relative one or a
    `from package import module`, and not an import of a module's own package."""
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("from pkg.inner import c\n")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from pkg.a import f\n")
    (package / "inner" / "c.py").write_text("from .. import d\n")
    (package / "inner" / "d.py").write_text("")
    (package / "d.py").write_text("import pkg.inner.c as c\n")
    circles = group_circles(tmp_path, ("pkg",))
    assert sorted(sorted(circle) for circle in circles) == [["pkg.a", "pkg.b"],
                                                            ["pkg.d", "pkg.inner.c"]]


# The store's rooms from the bottom up (docs/design.md, "The store's rooms"): each imports only
# rooms before it here, so no two import each other. Beside them, lifecycle.py stands below them
# all and imports none; the fronts (the product's, store/__init__.py, and the tests',
# store/testing.py) stand above them all.
ROOMS = ("file", "rows", "prices", "derive", "write", "retention", "declared", "clickhouse", "read")
BELOW_THE_ROOMS = ("store.lifecycle",)


def test_the_stores_rooms_stand_on_each_other_in_order() -> None:
    known = module_files(REPO, ("store",))
    imported: dict[str, set[str]] = {room: set() for room in ROOMS}
    for name, path in known.items():
        if name in ("store", "store.testing"):
            continue  # the fronts, which import the rooms
        targets = module_imports(name, path, known) - {"store", *BELOW_THE_ROOMS}
        if name in BELOW_THE_ROOMS:
            assert not targets, f"{name} stands below the rooms but imports {sorted(targets)}"
            continue
        room = name.split(".")[1]
        assert room in imported, f"{name}: a room docs/design.md and ROOMS do not list"
        imported[room] |= {target.split(".")[1] for target in targets
                           if target.split(".")[1] != room}
    wrong = [f"{room} imports {sorted(imported[room] - set(ROOMS[:ROOMS.index(room)]))}"
             for room in ROOMS if imported[room] - set(ROOMS[:ROOMS.index(room)])]
    assert not wrong, "rooms importing a room above them:\n" + "\n".join(wrong)
    assert imported["read"] >= {"file", "derive", "clickhouse"}  # the walk sees the rooms


# ---- the server wing -----------------------------------------------------------------------
# ingest receives OTLP and nothing else: what serve adds on its port (the operator pages,
# /budgets, /prices, /cli) lives in budgetscope/server/ and is handed to the receivers as
# configuration (ReceiverConfig.routes). The server runs beside the CLI's commands, which start
# it: what both need sits below both (budgetscope/fail.py, budgetscope/durations.py).
NEVER_IMPORTS: dict[str, tuple[tuple[str, ...], str]] = {
    "ingest": (("budgetscope", "dashboard"), "ingest only receives: the server composes it"),
    "budgetscope.server": (("budgetscope.commands", "budgetscope.cli"),
                           "the CLI starts the server: what both need sits below both"),
}


def _never_imported(group: str, forbidden: tuple[str, ...]) -> list[str]:
    known = module_files(REPO, ("budgetscope", "dashboard", "simulation", "queries", "ingest",
                                "store"))
    wrong = []
    for name, path in known.items():
        if name == group or name.startswith(group + "."):
            for target in sorted(module_imports(name, path, known)):
                if any(target == f or target.startswith(f + ".") for f in forbidden):
                    wrong.append(f"{path.relative_to(REPO)} imports {target}")
    return wrong


@pytest.mark.parametrize("group", sorted(NEVER_IMPORTS))
def test_the_server_wing_stands_apart(group: str) -> None:
    forbidden, why = NEVER_IMPORTS[group]
    wrong = _never_imported(group, forbidden)
    assert not wrong, f"{group} imports {', '.join(forbidden)} ({why}):\n" + "\n".join(wrong)


def test_the_wing_rule_sees_an_import() -> None:
    """A rule that found nothing would pass: the CLI's serve imports the server, and the server
    imports ingest's receivers."""
    assert _never_imported("budgetscope.commands", ("budgetscope.server",))
    assert _never_imported("budgetscope.server", ("ingest",))


# ---- no reach into another package's private names -------------------------------------------
# A `_name` belongs to the package (the folder) that defines it: no module of another folder
# imports it, reads it from a module of ours, or reads it as an attribute (`thing._name` where
# `_name` is defined only in other folders of the repository; `self._name` and `cls._name` are
# the class's own). Libraries' internals are another matter, listed where they are used
# (dashboard/server/ground.py). A reach a test must make into a room's internals would be listed
# here by name, with why; there is none: what tests need of a room has a public name, in
# store.testing or on the room's own class (ClickHouseConnection.frame_text).
PRIVATE_REACHES: dict[tuple[str, str], str] = {}
PRIVATE_FOLDERS = ("budgetscope", "dashboard", "simulation", "queries", "ingest", "store", "sdk",
                   "sample_traces", "tests", "bench", "docs")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name != "_"


def _python_files() -> list[Path]:
    return [*sorted(REPO.glob("*.py")),
            *(path for folder in PRIVATE_FOLDERS for path in sorted((REPO / folder).rglob("*.py"))
              if "real_fixtures" not in path.parts)]


def _folder(path: Path) -> str:
    return path.parent.relative_to(REPO).as_posix()


def _private_definitions(files: list[Path]) -> dict[str, set[str]]:
    """_name -> the folders that define it (a function, a class, or a name or attribute
    assigned)."""
    defined: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                # a name, or an attribute of the class's own (`self._x = …`): setting one
                # on another package's object defines nothing
                names = [part.id if isinstance(part, ast.Name) else part.attr
                         for target in targets for part in ast.walk(target)
                         if isinstance(part, ast.Name) or isinstance(part, ast.Attribute)
                         and isinstance(part.value, ast.Name)
                         and part.value.id in ("self", "cls")]
            for name in names:
                if _is_private(name):
                    defined.setdefault(name, set()).add(_folder(path))
    return defined


def _module_folder(module: str) -> str | None:
    """The folder of one of our modules (`store.write.writer` -> store/write), or None."""
    base = REPO / Path(*module.split("."))
    if base.is_dir() and (base / "__init__.py").exists():
        return base.relative_to(REPO).as_posix()
    if base.with_suffix(".py").exists():
        return base.parent.relative_to(REPO).as_posix()
    sdk = REPO / "sdk" / Path(*module.split("."))  # budgetscope_sdk ships from sdk/
    if module.split(".")[0] == "budgetscope_sdk" and (sdk.is_dir() or sdk.with_suffix(".py")
                                                      .exists()):
        return (sdk if sdk.is_dir() else sdk.parent).relative_to(REPO).as_posix()
    return None


def private_reaches(path: Path, defined: dict[str, set[str]], text: str | None = None
                    ) -> list[tuple[int, str, str]]:
    """(line, _name, the folder it belongs to) of every reach from `path` (its `text`, read
    from it unless given) into a private name of another folder of ours."""
    own = _folder(path)
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    modules: dict[str, str] = {}  # local name -> the folder of the module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                folder = _module_folder(alias.name)
                if folder is not None and alias.asname:
                    modules[alias.asname] = folder
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for alias in node.names:
                folder = _module_folder(f"{base}.{alias.name}")
                if folder is not None:
                    modules[alias.asname or alias.name] = folder
                    continue
                owner = _module_folder(base)
                if owner is not None and owner != own and _is_private(alias.name):
                    found.append((node.lineno, alias.name, owner))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in ("self", "cls"):
            continue
        if isinstance(value, ast.Name) and value.id in modules:
            if modules[value.id] != own:
                found.append((node.lineno, node.attr, modules[value.id]))
            continue
        owners = defined.get(node.attr, set())
        if owners and own not in owners:
            found.append((node.lineno, node.attr, ", ".join(sorted(owners))))
    return found


@pytest.mark.slow
def test_no_reach_into_another_packages_private_names() -> None:
    """Every exception (none now) must still be reached."""
    files = _python_files()
    defined = _private_definitions(files)
    wrong, used = [], set()
    for path in files:
        relative = path.relative_to(REPO).as_posix()
        for line, name, owner in private_reaches(path, defined):
            key = (owner, name)
            if key in PRIVATE_REACHES and relative.startswith("tests/"):
                used.add(key)
            else:
                wrong.append(f"{relative}:{line} reaches {name} of {owner}/")
    assert not wrong, ("private names reached from another package (give them a public name, "
                       "or list a test of a room's internals in PRIVATE_REACHES with why):\n"
                       + "\n".join(wrong))
    assert used == set(PRIVATE_REACHES), f"exceptions no longer used: {set(PRIVATE_REACHES) - used}"


def test_the_private_walk_sees_each_kind_of_reach() -> None:
    """With no exception left to be reached, a walk that found nothing would pass: it sees an
    import of a private name, a module's private name and an object's private attribute
    defined in another folder, and not an object's own."""
    text = ("from store.write.writer import _hidden\n"
            "from store.derive import statements\n"
            "statements._hidden_too\n"
            "con._defined_elsewhere\n"
            "self._own\n")
    found = private_reaches(REPO / "tests" / "example.py",
                            {"_defined_elsewhere": {"store/clickhouse"}, "_own": {"store"}}, text)
    assert sorted(found) == [(1, "_hidden", "store/write"), (3, "_hidden_too", "store/derive"),
                             (4, "_defined_elsewhere", "store/clickhouse")]
