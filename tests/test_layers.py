"""The package graph: imports run one way, and the rules and the search never load torch.

Floors, bottom to top (docs/architecture.md, "The package floors"): ``game`` (the rules, the
search, records) <- ``checkerzero`` (the library the processes share: network, store, cluster,
config, run files) <- ``actors`` and ``evaluation`` (peers: neither imports the other) <-
``learner`` (the training process and the wiring of a run), the command-line front ends
(``actors.__main__``), the play server (``play``) and ``baseline_training``. A module may import
its own floor and the ones below, never one above. Every import counts, those inside functions
too; a project import inside a function must be one of ``DEFERRED``, each kept for a start-up
cost measured and stated where it is made.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("game", "checkerzero", "actors", "evaluation", "learner", "play", "baseline_training")
# Rank of each layer; the first matching prefix (longest first) names a module's layer.
LAYERS: dict[str, int] = {
    "game": 0,
    "checkerzero": 1,
    "actors": 2,
    "evaluation": 2,
    "learner": 3,
    "actors.__main__": 3,
    "play": 3,
    "baseline_training": 3,  # uses evaluation's players and the learner's trainer
}
# Layers of one rank that must not import each other.
PEERS = (("actors", "evaluation"),)
# (importer, imported) pairs allowed inside a function, each for a measured start-up cost.
DEFERRED = {
    # torch's import (1.0-1.4 s) is paid only by match workers that build a network player.
    ("evaluation.players.network", "checkerzero.network.inference"),
    # a bad command line fails before torch and Ray load (see learner/__main__.py).
    ("learner.__main__", "learner.start"),
    # the evaluator's settings bring torch (3.0 s to import at load 13, measured): checked only
    # once the config itself has passed, so a bad key is still answered before torch loads.
    ("learner.__main__", "evaluation.evaluator.settings"),
}


def layer_of(module: str) -> str | None:
    """The LAYERS key a module belongs to, None for a module outside the project."""
    matches = [k for k in LAYERS if module == k or module.startswith(k + ".")]
    return max(matches, key=len) if matches else None


def project_imports(module: str, source: str, is_package: bool) -> Iterator[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for every project import in ``source``."""
    tree = ast.parse(source)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def in_function(node: ast.AST) -> bool:
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                return True
        return False

    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from game import encoding` imports game.encoding: name the submodule when it is one.
            joined = [f"{target}.{a.name}" if target else a.name for a in node.names]
            names = [j if _is_module(j) else target for j in joined]
        else:
            continue
        for name in names:
            if layer_of(name) is not None:
                yield name, node.lineno, in_function(node)


def _is_module(name: str) -> bool:
    path = REPO_ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(sources: Mapping[str, tuple[str, bool]]) -> list[str]:
    """Every import in ``sources`` (module -> (source, is_package)) that breaks the layering."""
    found = []
    for module, (source, is_package) in sorted(sources.items()):
        own = layer_of(module)
        assert own is not None, f"{module} is in no layer: add its package to LAYERS"
        for target, line, deferred in project_imports(module, source, is_package):
            theirs = layer_of(target)
            assert theirs is not None
            where = f"{module}:{line} imports {target}"
            if LAYERS[theirs] > LAYERS[own]:
                found.append(f"{where}: upward ({own} is below {theirs})")
            own_pkg, their_pkg = own.split(".")[0], theirs.split(".")[0]
            if (own_pkg, their_pkg) in PEERS or (their_pkg, own_pkg) in PEERS:
                found.append(f"{where}: {own_pkg} and {their_pkg} are peers")
            if deferred and (module, target) not in DEFERRED and target != module:
                found.append(f"{where} inside a function: import it at the top of the module")
    return found


def project_sources() -> dict[str, tuple[str, bool]]:
    sources = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT).with_suffix("")
            parts = rel.parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            if "cpp" in parts or any(p.startswith(".") for p in parts):
                continue
            sources[name] = (path.read_text(), is_package)
    return sources


def test_the_project_has_no_upward_peer_or_hidden_import():
    sources = project_sources()
    assert {
        "game.mcts",
        "game.records",
        "checkerzero.network.inference",
        "actors.self_play",
    } <= set(sources)
    assert violations(sources) == []


@pytest.mark.parametrize(
    ("module", "source", "complaint"),
    [
        ("game.mcts", "from checkerzero.network.inference import NetworkInference\n", "upward"),
        ("checkerzero.store.live", "def f():\n    from actors import self_play\n", "upward"),
        ("checkerzero.network.model", "import evaluation.stats.elo\n", "upward"),
        ("actors.actor", "from learner.trainer import Trainer\n", "upward"),
        ("evaluation.evaluator.worker", "import learner\n", "upward"),
        ("checkerzero.store.replay", "import learner.run\n", "upward"),
        ("evaluation.match", "from actors.self_play import play_games\n", "peers"),
        ("actors.actor", "import evaluation.stats.elo\n", "peers"),
        (
            "actors.actor",
            "def f():\n    from checkerzero.store.weights import WeightsChannel\n",
            "inside",
        ),
        ("game.records", "from .. import learner\n", "upward"),
    ],
)
def test_the_check_catches_a_bad_import(module, source, complaint):
    found = violations({module: (source, False)})
    assert any(complaint in f for f in found), found


def test_downward_imports_pass_the_check():
    ok = "from game.records import GameRecord\nfrom checkerzero.store.weights import WeightsChannel"
    assert violations({"actors.actor": (ok, False), "learner.run": (ok, False)}) == []


def test_the_rules_the_search_and_self_play_load_no_torch():
    modules = (
        "game, game.mcts, game.records, game.pdn, actors.self_play, evaluation.matches.games, "
        "evaluation.matches.workers"
    )
    code = f"import sys\nimport {modules}\nprint('torch' in sys.modules, 'ray' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


# Rooms of evaluation/, bottom to top: a module may import its own room and the ones below it.
# The command lines (evaluation.match, .rate_ladder, .calibration) and the book's builder sit on
# top of every room.
EVALUATION_ROOMS: dict[str, int] = {
    "evaluation.stats": 0,  # Elo, its fit, the SPRT
    "evaluation.players": 1,  # the players, their spec grammar, defaults, the book they read
    "evaluation.matches": 2,  # games, pairs, matches, their records and journal, the gate's match
    "evaluation.ladder": 3,  # the rungs, the rated table, the plan, the ratings' files
    "evaluation.evaluator": 4,  # the rating and gating process
    "evaluation.value_head_wdl": 2,
    "evaluation.book": 5,
    "evaluation.match": 5,
    "evaluation.rate_ladder": 5,
    "evaluation.calibration": 5,
}


def room_of(module: str) -> str | None:
    matches = [k for k in EVALUATION_ROOMS if module == k or module.startswith(k + ".")]
    return max(matches, key=len) if matches else None


def room_violations(sources: Mapping[str, tuple[str, bool]]) -> list[str]:
    """Imports inside evaluation/ that run from a lower room to a higher one."""
    found = []
    for module, (source, is_package) in sorted(sources.items()):
        if not module.startswith("evaluation.") or module == "evaluation":
            continue
        own = room_of(module)
        assert own is not None, f"{module} is in no room of evaluation/: add it to EVALUATION_ROOMS"
        for target, line, _ in project_imports(module, source, is_package):
            theirs = room_of(target)
            if theirs is not None and EVALUATION_ROOMS[theirs] > EVALUATION_ROOMS[own]:
                found.append(f"{module}:{line} imports {target}: {own} is below {theirs}")
    return found


def import_cycles(sources: Mapping[str, tuple[str, bool]]) -> list[list[str]]:
    """Every circle of files that import each other (an import for type checking counts: it
    is a dependency a reader must follow), each as the modules around it."""
    graph = {
        module: {t for t, _, _ in project_imports(module, source, is_package) if t in sources}
        for module, (source, is_package) in sources.items()
    }
    # A package's __init__ importing its own modules is how packages are built, not a circle.
    for module in graph:
        graph[module] = {t for t in graph[module] if not module.startswith(t + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_imports_inside_evaluation_go_one_way_room_by_room():
    assert room_violations(project_sources()) == []


def test_no_circle_of_files_imports_itself_anywhere_in_the_project():
    assert import_cycles(project_sources()) == []


def test_the_checks_catch_a_circle_and_a_room_upward():
    circle = {
        "evaluation.evaluator.worker": ("from evaluation.evaluator import gate\n", False),
        "evaluation.evaluator.gate": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from evaluation.evaluator.worker import EvaluatorWorker\n",
            False,
        ),
    }
    assert import_cycles(circle) == [["evaluation.evaluator.gate", "evaluation.evaluator.worker"]]
    upward = {"evaluation.players.network": ("from evaluation.matches import games\n", False)}
    assert room_violations(upward)
