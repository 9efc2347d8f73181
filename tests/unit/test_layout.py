"""Layout rules of src/letterbox, checked from the source text (no import is executed):
every module is at most MAX_LINES lines, the packages of letterbox import each other
without a circle, the rooms of letterbox.broker (its sub-packages and root modules) import
each other only downward and without a circle, no two modules of the broker import each
other in a circle either, admin and standalone use the broker only through its face, a
comment names only files that exist, the broker keeps its modules and functions small,
frames leave a connection through its one outbound path and moves go through the one move
transaction. Every import counts, including
those under TYPE_CHECKING and inside functions: a lazy import hides a circle from the
interpreter, not from the design."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "letterbox"
MAX_LINES = 400
# Modules allowed over MAX_LINES for now, each with the reason. Empty this list, don't grow it.
OVERSIZE_ALLOWED: dict[str, str] = {}
# In broker/: at most BROKER_LARGE modules over BROKER_LARGE_LINES, no function over MAX_FUNCTION_LINES.
BROKER_LARGE, BROKER_LARGE_LINES, MAX_FUNCTION_LINES = 3, 350, 60
# The one place a connection writes to its transport (ServerCnx.send, flushed by flush), and
# the one move transaction of broker/moves (every append there and ack here).
OUTBOUND_PATH = "broker/connection/server_cnx.py"
MOVE_TRANSACTION = "broker/moves/move_transaction.py"
# Packages whose modules must not import each other in a circle either (the lowest layers,
# and the broker: its rooms and the modules inside each, TYPE_CHECKING imports included).
MODULE_ACYCLIC = ("storage", "protocol", "broker")
GENERATED = {"protocol/pulsar_api_pb2.py"}
# The rooms of letterbox.broker (its sub-packages, and service.py), from the top: a room
# imports only rooms after it (TYPE_CHECKING imports included). What a lower room needs of a
# higher one it names as a Protocol of its own (topics.topic_broker, moves.move_ends, ...).
BROKER_ROOMS = ("service", "connection", "topics", "redelivery", "moves", "compaction", "schemas", "policies")
# What may use the broker only through letterbox.broker (its __init__, the face).
BROKER_FACE_USERS = ("admin", "standalone")


def _modules() -> Iterator[Path]:
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).as_posix() not in GENERATED:
            yield path


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _module_name(path: Path) -> str:
    parts = ["letterbox", *path.relative_to(SRC).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Fully qualified letterbox modules (or names) imported anywhere in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("letterbox"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            if mod.startswith("letterbox"):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("letterbox"):
                out.add(str(arg.value))
    return out


def _unit(module: str) -> str | None:
    """The layout unit of a module: its subpackage (letterbox.broker.x -> broker) or, for a
    module at the package root, the module itself (letterbox.config -> config)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    if (SRC / parts[1]).is_dir():
        return parts[1]
    if (SRC / f"{parts[1]}.py").is_file():
        return parts[1]
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _edges(graph: dict[str, set[str]], cycle: list[str], why: dict[tuple[str, str], str]) -> str:
    members = set(cycle)
    return "; ".join(
        f"{a} -> {b} ({why[(a, b)]})" for a in cycle for b in sorted(graph[a] & members)
    )


def test_no_module_over_max_lines() -> None:
    sizes = {_rel(p): len(p.read_text().splitlines()) for p in _modules()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES and name not in OVERSIZE_ALLOWED}
    assert not over, f"modules over {MAX_LINES} lines (split them): {over}"
    stale = [name for name in OVERSIZE_ALLOWED if sizes.get(name, 0) <= MAX_LINES]
    assert not stale, f"remove from OVERSIZE_ALLOWED, they are small enough now: {stale}"


def test_no_import_circle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for path in _modules():
        src = _unit(_module_name(path))
        if src is None:  # letterbox/__init__.py: the package's face
            continue
        graph.setdefault(src, set())
        for target in _imports(path):
            dst = _unit(target)
            if dst is not None and dst != src and target != "letterbox":
                graph[src].add(dst)
                why.setdefault((src, dst), f"{_rel(path)} imports {target}")
    circles = _cycles(graph)
    assert not circles, "import circles between packages: " + " | ".join(
        _edges(graph, c, why) for c in circles
    )


@pytest.mark.parametrize("package", MODULE_ACYCLIC)
def test_no_import_circle_between_modules(package: str) -> None:
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    prefix = f"letterbox.{package}."
    paths = [p for p in _modules() if _rel(p).startswith(package + "/")]
    names = {_module_name(p) for p in paths}
    for path in paths:
        src = _module_name(path)
        graph.setdefault(src, set())
        for target in _imports(path):
            if target.startswith(prefix) and target != src:
                # `from .x import Name` names letterbox.<package>.x.Name: keep the module
                mod = target if target in names else target.rpartition(".")[0]
                if mod in names and mod != src and not src.endswith(".__init__") and src != f"letterbox.{package}":
                    graph[src].add(mod)
                    why.setdefault((src, mod), f"imports {target}")
    circles = _cycles(graph)
    assert not circles, f"import circles inside letterbox.{package}: " + " | ".join(
        _edges(graph, c, why) for c in circles
    )


def _broker_room(module: str) -> str | None:
    """The room of a broker module: its sub-package (letterbox.broker.topics.topic -> topics) or,
    for a module at the broker's root, the module (letterbox.broker.service -> service). The
    face itself (letterbox.broker) is no room."""
    parts = module.split(".")
    if parts[:2] != ["letterbox", "broker"] or len(parts) < 3:
        return None
    broker = SRC / "broker"
    if (broker / parts[2]).is_dir() or (broker / f"{parts[2]}.py").is_file():
        return parts[2]
    return None


def _broker_room_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    graph: dict[str, set[str]] = {}
    why: dict[tuple[str, str], str] = {}
    for path in _modules():
        src = _broker_room(_module_name(path))
        if src is None:
            continue
        graph.setdefault(src, set())
        for target in _imports(path):
            dst = _broker_room(target)
            if dst is not None and dst != src:
                graph[src].add(dst)
                why.setdefault((src, dst), f"{_rel(path)} imports {target}")
    return graph, why


def test_no_import_circle_between_broker_rooms() -> None:
    graph, why = _broker_room_graph()
    circles = _cycles(graph)
    assert not circles, "import circles between the rooms of letterbox.broker: " + " | ".join(
        _edges(graph, c, why) for c in circles
    )


def test_broker_rooms_import_only_downward() -> None:
    graph, why = _broker_room_graph()
    unplaced = sorted(set(graph) - set(BROKER_ROOMS))
    assert not unplaced, f"place these broker rooms in BROKER_ROOMS: {unplaced}"
    rank = {room: i for i, room in enumerate(BROKER_ROOMS)}
    upward = [why[(a, b)] for a in sorted(graph) for b in sorted(graph[a]) if rank[b] < rank[a]]
    assert not upward, f"imports running back up the broker's rooms ({' > '.join(BROKER_ROOMS)}): {upward}"


def test_admin_and_standalone_use_only_the_broker_face() -> None:
    deep = []
    for path in _modules():
        if _unit(_module_name(path)) not in BROKER_FACE_USERS:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            deep += [f"{_rel(path)}:{node.lineno} {n}" for n in names if n.startswith("letterbox.broker.")]
    assert not deep, f"import the broker through letterbox.broker, not its rooms: {deep}"


_PY_PATH = re.compile(r"(?<![\w./-])((?:[a-z_][\w-]*/)*[a-z_]\w*\.py)\b")


def _named_file_missing(path: Path, ref: str, names: set[str]) -> bool:
    """Whether `ref` (a .py path named in a comment or string of `path`) names no file: a
    path with a folder is read from the repository, src/, src/letterbox/ or a package that
    holds `path`; a bare file name from anywhere in src/letterbox or the repository root."""
    if "/" not in ref:
        return ref not in names and not (SRC.parents[1] / ref).is_file()
    bases = [SRC.parents[1], SRC.parent, *(d for d in path.parents if d.is_relative_to(SRC))]
    return not any((base / ref).is_file() for base in bases)


def test_comments_name_only_files_that_exist() -> None:
    names = {p.name for p in SRC.rglob("*.py")}
    stale = []
    for path in _modules():
        for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if tok.type not in (tokenize.COMMENT, tokenize.STRING):
                continue
            stale += [f"{_rel(path)}:{tok.start[0]} {m[1]}" for m in _PY_PATH.finditer(tok.string)
                      if _named_file_missing(path, m[1], names)]
    assert not stale, f"comments naming a file that does not exist (moved? say where it is now): {stale}"


def test_broker_modules_and_functions_stay_small() -> None:
    broker = [p for p in _modules() if _rel(p).startswith("broker/")]
    large = sorted(_rel(p) for p in broker if len(p.read_text().splitlines()) > BROKER_LARGE_LINES)
    assert len(large) <= BROKER_LARGE, f"more than {BROKER_LARGE} broker modules over {BROKER_LARGE_LINES} lines: {large}"
    long = [f"{_rel(p)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for p in broker for n in ast.walk(ast.parse(p.read_text()))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and (n.end_lineno or n.lineno) - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"broker functions over {MAX_FUNCTION_LINES} lines (name their steps): {long}"


def _calls(path: Path, attr: str) -> list[int]:
    """Lines of `path` calling a method named `attr` (x.attr(...))."""
    return [n.lineno for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr]


def test_frames_leave_through_the_one_outbound_path() -> None:
    raw = [f"{_rel(p)}:{line}" for p in _modules() if _rel(p).startswith("broker/") and _rel(p) != OUTBOUND_PATH
           for line in _calls(p, "write")]
    assert not raw, f"write frames with the connection's send() ({OUTBOUND_PATH}), not a raw write: {raw}"
    assert len(_calls(SRC / OUTBOUND_PATH, "write")) == 1, "ServerCnx writes to its transport in one place"


def test_moves_go_through_the_one_move_transaction() -> None:
    moves = [p for p in _modules() if _rel(p).startswith("broker/moves/") and _rel(p) != MOVE_TRANSACTION]
    own = [f"{_rel(p)}:{line}" for p in moves for line in _calls(p, "transaction")]
    assert not own, f"a move opens the one move transaction ({MOVE_TRANSACTION}), not a storage transaction: {own}"
    live = [p for p in _modules() if _rel(p).startswith(("broker/topics/", "broker/redelivery/", "broker/connection/"))
            or _rel(p) in ("broker/moves/dead_letter_router.py", "broker/moves/message_mover.py")]
    tool = [f"{_rel(p)} imports {m}" for p in live for m in _imports(p) if ".moves.redrive" in m]
    assert not tool, f"the live delivery path uses nothing of the redrive tool: {tool}"


def test_the_checks_see_a_circle_and_an_oversize_module() -> None:
    """The checks above can fail: a made-up graph with a circle is reported."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
