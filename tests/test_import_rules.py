"""The import rules of docs/architecture.md, checked over the project's own import statements.

Every `import` and `from ... import` in `kernels/`, `gossip/`, `node/` and `fault/` counts,
including those inside functions (a lazy import is still a dependency); only imports under
`if TYPE_CHECKING:` are skipped. A rule broken anywhere fails the test and names the module and
the line.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("kernels", "gossip", "node", "fault")
PREFIX = "swarmnode."

pytestmark = pytest.mark.timeout(60)


def module_name(path: Path, root: Path) -> str:
    """`node/train/data/shard.py` -> `swarmnode.node.train.data.shard`; a package's `__init__`
    is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return PREFIX + ".".join(parts)


def project_modules(root: Path) -> dict[str, Path]:
    return {
        module_name(p, root): p
        for folder in FOLDERS
        for p in sorted((root / folder).rglob("*.py"))
        if ".venv" not in p.parts
    }


def _in_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(
    path: Path, modules: dict[str, Path], *, type_only: bool = False
) -> Iterator[tuple[str, int]]:
    """(imported project module, line) for every import statement of the file; with
    `type_only`, those under `if TYPE_CHECKING:` too."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if not type_only and _in_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif node.level or node.module is None:
            raise AssertionError(f"{path}:{node.lineno}: relative import; write the full name")
        else:
            # `from pkg import mod` imports pkg.mod when that is a module, else a name of pkg
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                for a in node.names
            ]
        for name in names:
            if name.startswith(PREFIX) or name == PREFIX.rstrip("."):
                yield name, node.lineno


def import_graph(root: Path, *, type_only: bool = False) -> dict[str, list[tuple[str, int]]]:
    modules = project_modules(root)
    return {
        name: sorted(set(imports_of(path, modules, type_only=type_only)))
        for name, path in modules.items()
    }


def _within(module: str, package: str) -> bool:
    full = PREFIX + package
    return module == full or module.startswith(full + ".")


def _room(module: str) -> str | None:
    """`swarmnode.gossip.wire.frames` -> `wire`; None outside gossip's rooms."""
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[1] == "gossip" else None


# node/train/: rooms by concern, and at the top only what puts them together and drives them
TRAIN_ROOMS = ("data", "lr", "mixing", "model")
TRAIN_TOP = "build checkpoint config errors metrics pacing sources trainer user_code worker".split()
TRAIN_LEAVES = ("errors", "user_code")  # what a room may import from the top of node/train


def _train_room(module: str) -> str | None:
    """`swarmnode.node.train.data.shard` (or the room's front) -> `data`; None elsewhere."""
    parts = module.split(".")
    in_train = len(parts) >= 4 and parts[1:3] == ["node", "train"]
    return parts[3] if in_train and parts[3] in TRAIN_ROOMS else None


# (name, rule): rule(src, dst) is True when src may import dst.
RULES = [
    (
        "kernels imports no other package",
        lambda s, d: not _within(s, "kernels") or _within(d, "kernels"),
    ),
    (
        "gossip imports only kernels",
        lambda s, d: not _within(s, "gossip") or _within(d, "gossip") or _within(d, "kernels"),
    ),
    (
        "gossip.robust and gossip.wire import no other gossip room (gossip.errors only)",
        lambda s, d: (
            not any(_within(s, f"gossip.{r}") for r in ("robust", "wire"))
            or not _within(d, "gossip")
            or _within(d, "gossip.errors")
            or _room(d) == _room(s)
        ),
    ),
    (
        "gossip.link imports only gossip.errors of gossip",
        lambda s, d: (
            not _within(s, "gossip.link")
            or not _within(d, "gossip")
            or _within(d, "gossip.errors")
            or _within(d, "gossip.link")
        ),
    ),
    (
        "gossip.exchange and gossip.membership never import each other",
        lambda s, d: {_room(s), _room(d)} != {"exchange", "membership"},
    ),
    (
        "node.train imports only kernels",
        lambda s, d: (
            not _within(s, "node.train") or _within(d, "node.train") or _within(d, "kernels")
        ),
    ),
    (
        "a room of node.train imports of node.train only errors, user_code and rooms (never the "
        "trainer, the worker or the build that drive it)",
        lambda s, d: (
            _train_room(s) is None
            or not _within(d, "node.train")
            or _train_room(d) is not None
            or any(d == f"{PREFIX}node.train.{leaf}" for leaf in TRAIN_LEAVES)
        ),
    ),
    (
        "node.net never imports node.peer or node.cli",
        lambda s, d: (
            not _within(s, "node.net") or not (_within(d, "node.peer") or _within(d, "node.cli"))
        ),
    ),
    (
        "node.web never imports node.peer or node.cli",
        lambda s, d: (
            not _within(s, "node.web") or not (_within(d, "node.peer") or _within(d, "node.cli"))
        ),
    ),
    (
        "node.settings (the table, PeerConfig, the fronts' parsers) never imports node.cli, "
        "node.peer, node.net or node.web: the settings are read before anything runs",
        lambda s, d: (
            not _within(s, "node.settings")
            or not any(_within(d, f"node.{r}") for r in ("cli", "peer", "net", "web"))
        ),
    ),
    (
        "node.peer never imports node.cli",
        lambda s, d: not _within(s, "node.peer") or not _within(d, "node.cli"),
    ),
    (
        "node.swarm (the handle of the user's own loop) sits on node.peer and node.train: it "
        "never imports node.cli, and nothing of node but itself imports it",
        lambda s, d: (
            (not _within(s, "node.swarm") or not _within(d, "node.cli"))
            and (not _within(d, "node.swarm") or not _within(s, "node") or _within(s, "node.swarm"))
        ),
    ),
    (
        "outside fault/, only the peer's wiring (node.peer) imports fault.inject",
        lambda s, d: (
            not _within(d, "fault.inject") or _within(s, "fault") or _within(s, "node.peer")
        ),
    ),
    (
        "nothing in fault imports node",
        lambda s, d: not _within(s, "fault") or not _within(d, "node"),
    ),
    (
        "fault.chaos.assertions imports of fault.chaos only its own room, record and errors "
        "(never the runner that uses it)",
        lambda s, d: (
            not _within(s, "fault.chaos.assertions")
            or not _within(d, "fault.chaos")
            or any(_within(d, f"fault.chaos.{m}") for m in ("assertions", "record", "errors"))
        ),
    ),
    (
        "fault.chaos.scenario imports of fault.chaos only its own room, errors and the "
        "assertions' front, for their validation (it parses; it never drives a process)",
        lambda s, d: (
            not _within(s, "fault.chaos.scenario")
            or not _within(d, "fault.chaos")
            or any(_within(d, f"fault.chaos.{m}") for m in ("scenario", "errors"))
            or d in (f"{PREFIX}fault.chaos.assertions", f"{PREFIX}fault.chaos.assertions.check")
        ),
    ),
    (
        "kernels, gossip and node.train never import fault",
        lambda s, d: (
            not _within(d, "fault")
            or not any(_within(s, p) for p in ("kernels", "gossip", "node.train"))
        ),
    ),
]


def rule_violations(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    return [
        f"{src}:{line} imports {dst}: breaks '{name}'"
        for src, edges in graph.items()
        for dst, line in edges
        for name, allowed in RULES
        if not allowed(src, dst)
    ]


def import_cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in graph.get(v, []):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or any(d == v for d, _ in graph.get(v, [])):
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def train_room_cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Circles between node/train's rooms, each room taken as one node."""
    rooms: dict[str, set[str]] = {room: set() for room in TRAIN_ROOMS}
    for src, edges in graph.items():
        for dst, _ in edges:
            a, b = _train_room(src), _train_room(dst)
            if a is not None and b is not None and a != b:
                rooms[a].add(b)
    return import_cycles({room: [(d, 0) for d in sorted(ds)] for room, ds in rooms.items()})


def test_the_project_keeps_its_import_rules():
    violations = rule_violations(import_graph(ROOT))
    assert not violations, "import rules broken:\n" + "\n".join(violations)


def _front_names(path: Path) -> set[str]:
    """The names a package's front binds at its top (what `from pkg import name` gets)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            targets = {t.id for t in node.targets if isinstance(t, ast.Name)}
            names |= targets
            if "__all__" in targets:  # a lazy front declares what it serves
                names |= set(ast.literal_eval(node.value))
    return names


def _is_room(package: str) -> bool:
    """A room: a package inside a top-level package (`gossip.wire`, `node.train.data`). The
    top-level packages hold rooms and their shared error family (`gossip.errors`); `kernels` is
    one flat library, its modules its interface."""
    return package.count(".") >= 2


def reaches_inside(root: Path) -> list[str]:
    """Import lines from outside a room that name a module inside it instead of its front."""
    modules = project_modules(root)
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    fronts = {name: _front_names(modules[name]) for name in packages}
    out = []
    for src, path in modules.items():
        home = src if src in packages else src.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module in packages:
                front = fronts[node.module]  # a name the front binds is the front's
                targets = [
                    f"{node.module}.{a.name}"
                    for a in node.names
                    if a.name not in front and f"{node.module}.{a.name}" in modules
                ]
            elif isinstance(node, ast.ImportFrom) and node.module in modules:
                targets = [node.module]
            else:
                continue
            for dst in targets:
                room = dst.rpartition(".")[0]
                inside_it = home == room or home.startswith(room + ".")
                if dst not in packages and _is_room(room) and not inside_it:
                    out.append(
                        f"{src}:{node.lineno} imports {dst}: import its room's front, {room}"
                    )
    return out


def test_outside_a_room_only_its_front_is_imported():
    # A room's front names what it holds; its other modules may move or split without a
    # caller knowing (the code, the tests and the scripts go through the front).
    reaches = reaches_inside(ROOT)
    assert not reaches, "imports that reach inside a room:\n" + "\n".join(reaches)


def test_the_project_has_no_import_circles():
    cycles = import_cycles(import_graph(ROOT))
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_project_has_no_import_circles_counting_type_only_imports():
    # A circle hidden under `if TYPE_CHECKING:` is still two modules that each need the other
    # to be read: the shared type belongs on the lower side (or a Protocol it declares).
    cycles = import_cycles(import_graph(ROOT, type_only=True))
    assert not cycles, "import circles (type-only imports counted):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_rooms_of_node_train_import_each_other_in_no_circle():
    cycles = train_room_cycles(import_graph(ROOT))
    assert not cycles, "circles between node/train's rooms:\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_scripts_have_no_import_circles():
    graph = {}
    for path in sorted((ROOT / "scripts").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text(), str(path))
        deps = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("scripts")
            ):
                deps |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("scripts")}
        graph[name] = [(d, 0) for d in sorted(deps) if d != name]
    cycles = import_cycles(graph)
    assert not cycles, "import circles in scripts/:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_every_gossip_module_lives_in_a_room():
    # gossip/ is rooms (docs/architecture.md): only the front and the error family sit at its top.
    loose = sorted(
        p.name for p in (ROOT / "gossip").glob("*.py") if p.name not in ("__init__.py", "errors.py")
    )
    assert not loose, f"modules outside a room: {loose}"


def test_node_train_is_rooms_and_the_modules_that_drive_them():
    # node/train/ is rooms (its front, node/train/__init__.py): no module loose beside them
    train = ROOT / "node" / "train"
    loose = sorted(p.name for p in train.glob("*.py") if p.stem not in ("__init__", *TRAIN_TOP))
    assert not loose, f"modules outside a room of node/train: {loose}"
    folders = sorted(p.name for p in train.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(TRAIN_ROOMS), "a new room is listed in TRAIN_ROOMS, so rules hold"
    for room in TRAIN_ROOMS:  # each room has a front that says what it holds
        front = ast.parse((train / room / "__init__.py").read_text())
        assert ast.get_docstring(front), f"node/train/{room}/__init__.py has no docstring"


def test_the_settings_room_has_a_front_that_names_what_it_holds():
    front = ROOT / "node" / "settings" / "__init__.py"
    tree = ast.parse(front.read_text())
    assert ast.get_docstring(tree), "node/settings/__init__.py has no docstring"
    modules = sorted(p.stem for p in front.parent.glob("*.py") if p.stem != "__init__")
    doc = ast.get_docstring(tree) or ""
    unnamed = [m for m in modules if f"`{m}`" not in doc]
    assert not unnamed, f"the front of node/settings does not say what these hold: {unnamed}"


def test_fault_chaos_rooms_have_a_front():
    # fault/chaos/ holds two rooms (docs/architecture.md) beside the modules that run them
    chaos = ROOT / "fault" / "chaos"
    folders = sorted(p.name for p in chaos.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == ["assertions", "scenario"], "a new room of fault/chaos gets an import rule"
    for room in folders:
        front = ast.parse((chaos / room / "__init__.py").read_text())
        assert ast.get_docstring(front), f"fault/chaos/{room}/__init__.py has no docstring"


def test_the_benchmarks_are_rooms_whose_fronts_name_what_they_hold():
    # scripts/bench/ is rooms by what they measure (scripts/README.md): its top holds only its
    # front, and each room's front names every module in it, so a new bench lands in a room
    bench = ROOT / "scripts" / "bench"
    loose = sorted(p.name for p in bench.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"benchmarks outside a room of scripts/bench: {loose}"
    rooms = sorted(p for p in bench.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert rooms, "the scan found no room: the path is wrong"
    for room in rooms:
        doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text())) or ""
        modules = sorted(p.stem for p in room.glob("*.py") if p.stem != "__init__")
        unnamed = [m for m in modules if not re.search(rf"\b{m}\b", doc)]
        assert not unnamed, f"the front of scripts/bench/{room.name} does not name: {unnamed}"


def test_the_checker_catches_a_broken_rule_and_a_circle(tmp_path):
    # A tree that breaks rules and has circles (one through a type-only import): the checker
    # must see them all.
    for rel, text in {
        "kernels/__init__.py": "",
        "kernels/ops.py": "from swarmnode.gossip.wire import frames\n",
        "gossip/__init__.py": "",
        "gossip/wire/__init__.py": "",
        "gossip/wire/frames.py": "import swarmnode.kernels.ops\n",
        "gossip/robust/__init__.py": "",
        "gossip/robust/rules.py": "from swarmnode.gossip.wire import frames\n",
        "fault/__init__.py": "",
        "fault/chaos.py": "from swarmnode.node.peer import Node\n",
        "node/settings/table.py": "from swarmnode.node.cli import command\n",
        "node/cli/command.py": "",
        "node/__init__.py": "",
        "node/peer.py": "",
        "node/train/worker.py": "",
        "node/train/model/user_model.py": "import swarmnode.node.train.worker\n",
        "node/train/data/shard.py": "import swarmnode.node.train.mixing.mixes\n",
        "node/train/mixing/mixes.py": "import swarmnode.node.train.data.streamed\n",
        "node/train/data/streamed.py": "",
        # a circle closed only by a type-only import
        "fault/inject/record.py": "if TYPE_CHECKING:\n    from swarmnode.fault.inject.parse import T\n",
        "fault/inject/parse.py": "from swarmnode.fault.inject import record\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(tmp_path)
    violations = rule_violations(graph)
    assert any("kernels.ops:1 imports swarmnode.gossip.wire.frames" in v for v in violations)
    assert any("fault.chaos:1 imports swarmnode.node.peer" in v for v in violations)
    assert any("settings.table:1 imports swarmnode.node.cli.command" in v for v in violations)
    assert any("robust.rules:1 imports swarmnode.gossip.wire.frames" in v for v in violations)
    assert any("model.user_model:1 imports swarmnode.node.train.worker" in v for v in violations)
    assert import_cycles(graph) == [["swarmnode.gossip.wire.frames", "swarmnode.kernels.ops"]]
    assert ["swarmnode.fault.inject.parse", "swarmnode.fault.inject.record"] in import_cycles(
        import_graph(tmp_path, type_only=True)
    )
    # data.shard -> mixing.mixes -> data.streamed: no circle of modules, one of rooms
    assert train_room_cycles(graph) == [["data", "mixing"]]


def test_the_front_checker_sees_a_reach_inside_and_lets_fronts_and_rooms_be(tmp_path):
    for rel, text in {
        "gossip/__init__.py": "",
        "gossip/errors.py": "",
        "gossip/wire/__init__.py": "from swarmnode.gossip.wire.frames import encode\n",
        "gossip/wire/frames.py": "from swarmnode.gossip.errors import E\n",
        "gossip/wire/codecs.py": "from swarmnode.gossip.wire.frames import encode\n",  # inside
        "gossip/link/__init__.py": "",
        "gossip/link/a.py": "from swarmnode.gossip.wire import encode\n",  # the front's name
        "gossip/link/b.py": "from swarmnode.gossip.wire.frames import encode\n",  # reaches in
        "gossip/link/c.py": "from swarmnode.gossip.wire import codecs\n",  # a module, by name
        "kernels/__init__.py": "",
        "kernels/ops.py": "",
        "node/__init__.py": "",
        "node/x.py": "import swarmnode.kernels.ops\n",  # kernels: one flat library
        "fault/__init__.py": "",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    reaches = reaches_inside(tmp_path)
    assert [r.split(" imports ")[0] for r in reaches] == [
        "swarmnode.gossip.link.b:1",
        "swarmnode.gossip.link.c:1",
    ], reaches
