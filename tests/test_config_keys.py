"""Every key in conf/ is read by some code: a documented key that nothing reads is a promise the
program does not keep.

The check is static, over the source of every project package (each top-level folder of the
repository with Python files, but not the tests), so it follows modules wherever they move. A
key ``... parent.leaf`` counts as read when:

- it is at the top of its group (``learner.value_weight``: the group's section is handed around
  under many names) and some code names ``leaf``; or
- one function (or class body, or a module's top level) names both ``leaf`` and ``parent``; or
- some code takes ``parent`` whole: ``dict(x.parent)``, ``f(**x.parent)``,
  ``instantiate(x.parent)``, ``Settings.from_config(x["parent"])``,
  ``OmegaConf.to_container(x.parent)``, ``x.parent.items()``.

Code "names" ``leaf`` by reading an attribute (``x.leaf``, not a method call ``x.leaf()``), a
string (``x["leaf"]``, ``x.get("leaf")``, ``"parent.leaf"``, a tuple of key names), a keyword
argument, a parameter, a dict key or a class field (a dataclass filled from the config). It names
``parent`` in those ways, by a variable such as ``parent_cfg``, or by being the module
``parent.py`` (the trainer module reads the ``trainer`` section it is given).

It is a name check, not a data-flow analysis: it reports a key whose name no code uses beside its
section's (``games_per_pair``), not one whose names code uses for something else (``time_ms`` of
a player spec beside a ``search`` call); the second test shows the rule on a small example.

A key read only by Hydra itself or by something other than Python is in ALLOWED, with the reason.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
NOT_CODE = {"tests", "build", "docs", "conf", "deploy", "docker", "dist", "runs", "outputs"}

# Keys no Python of this project reads, each with what does. A path names a key and all below it.
ALLOWED = {
    "hydra": "Hydra's own settings (run and sweep folders, job logging, the --help text)",
    "defaults": "Hydra's defaults list: which group files make up the config",
    "analysis": "conf/play/default.yaml: the move-mark thresholds, read by play/static/play.js "
    "(the server hands the section to the page whole)",
}

# Calls that take a config section whole (its keys are then read by name inside, or by Hydra).
WHOLE_CALLS = {"dict", "to_container", "to_object", "asdict", "vars", "instantiate", "from_config"}
WHOLE_METHODS = {"items", "keys", "values"}
GETTERS = {"get", "select", "pop"}
IDENT = re.compile(r"[A-Za-z_][\w.]*")


def _accessed(node: ast.AST) -> str | None:
    """The name an expression reads last: ``x.a`` -> a, ``x["a"]``, ``x.get("a")``,
    ``get("a")`` (a getter bound to a name), ``x.get("a") or {}`` -> a."""
    while isinstance(node, ast.BoolOp):
        node = node.values[0]
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return node.slice.value if isinstance(node.slice.value, str) else None
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in GETTERS and isinstance(node.args[0].value, str):
            return node.args[0].value.rsplit(".", 1)[-1]
    if isinstance(node, ast.Name):
        return node.id
    return None


class Unit:
    """What one function, class body or module's top-level code names and takes whole."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.names: set[str] = {module}
        self.whole: set[str] = set()


def _scan(nodes: Iterable[ast.AST], unit: Unit, units: list[Unit], in_class: bool) -> None:
    called: set[int] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inner = Unit(unit.module)
            args = node.args
            inner.names.update(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
            body = [node.body] if isinstance(node, ast.Lambda) else node.body
            _scan(body, inner, units, in_class=False)
            units.append(inner)
            stack.extend(getattr(node, "decorator_list", []))
            continue
        if isinstance(node, ast.ClassDef):
            inner = Unit(unit.module)
            _scan(node.body, inner, units, in_class=True)
            units.append(inner)
            continue
        if in_class and isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            unit.names.add(node.target.id)  # a field, filled from the config by name
        if isinstance(node, ast.Call):
            called.add(id(node.func))
            for kw in node.keywords:
                if kw.arg is not None:
                    unit.names.add(kw.arg)
                elif (name := _accessed(kw.value)) is not None:  # f(**section)
                    unit.whole.add(name)
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if fname in WHOLE_CALLS:
                unit.whole.update(n for a in node.args if (n := _accessed(a)) is not None)
            if (
                isinstance(func, ast.Attribute)
                and func.attr in WHOLE_METHODS
                and (name := _accessed(func.value)) is not None
            ):
                unit.whole.add(name)
        if isinstance(node, ast.Attribute) and id(node) not in called:
            unit.names.add(node.attr)
        elif isinstance(node, ast.Name):
            unit.names.add(node.id)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and IDENT.fullmatch(node.value)  # a key name, or a dotted path of them
        ):
            unit.names.update(node.value.split("."))
        stack.extend(ast.iter_child_nodes(node))


def units_of(source: str, module: str) -> list[Unit]:
    top = Unit(module)
    units: list[Unit] = []
    _scan(ast.parse(source).body, top, units, in_class=False)
    # Strings at a module's top level (tuples of key names) belong to all of its code.
    for u in units:
        u.names |= {n for n in top.names if n != module}
    return [top, *units]


# Modules that name every key without reading any: the schema declares each key's rule, and a
# declaration is no reader (with it counted, every key would pass).
DECLARES = {REPO / "checkerzero" / "config_schema.py"}


def project_sources() -> list[Path]:
    files = []
    for top in sorted(REPO.iterdir()):
        if top.is_dir() and not top.name.startswith(".") and top.name not in NOT_CODE:
            files += [p for p in sorted(top.rglob("*.py")) if p not in DECLARES]
    return files


def code_units() -> list[Unit]:
    units = []
    for path in project_sources():
        units += units_of(path.read_text(), path.stem)
    return units


def _package_names() -> dict[Path, list[str]]:
    """The package each conf file lands in: its group, or ``name@pkg`` from a defaults list;
    ``# @package _global_`` files and files no defaults list names (read directly) at the top."""
    packages: dict[Path, list[str]] = {}
    composed = {CONF / "config.yaml"}
    for path in CONF.rglob("*.yaml"):
        for entry in (yaml.safe_load(path.read_text()) or {}).get("defaults") or []:
            if isinstance(entry, str) and "@" in entry:
                name, pkg = entry.split("@", 1)
                packages[path.parent / f"{name}.yaml"] = pkg.split(".")
            elif isinstance(entry, dict):
                for group in entry:
                    if not str(group).startswith("override"):
                        composed |= set((CONF / str(group)).glob("*.yaml"))
    for path in CONF.rglob("*.yaml"):
        if path not in packages:
            global_ = path.read_text().startswith("# @package _global_")
            group = list(path.parent.relative_to(CONF).parts)
            packages[path] = [] if global_ or path not in composed else group
    return packages


def config_keys() -> list[tuple[str, tuple[str, ...], str]]:
    """(file, the key's path within its package, the package's last name or '') of every leaf
    key (a scalar, a list or an empty mapping)."""
    out = []

    def walk(rel: str, package: str, node: dict, path: tuple[str, ...]) -> None:
        for key, value in node.items():
            here = (*path, str(key))
            if here[0] in ALLOWED or (len(here) > 1 and here[1] in ALLOWED and not package):
                continue
            if isinstance(value, dict) and value:
                walk(rel, package, value, here)
            else:
                out.append((rel, here, package))

    for path, base in sorted(_package_names().items()):
        data = yaml.safe_load(path.read_text()) or {}
        walk(str(path.relative_to(REPO)), base[-1] if base else "", data, ())
    return out


def _names_parent(names: set[str], parent: str) -> bool:
    return parent in names or any(
        n.startswith(parent + "_") or n.endswith("_" + parent) for n in names
    )


def unread_keys(keys, units: list[Unit]) -> list[str]:
    by_name: dict[str, list[Unit]] = defaultdict(list)
    for u in units:
        for n in u.names:
            by_name[n].append(u)
    whole = set().union(*(u.whole for u in units))
    unread = []
    for rel, path, package in keys:
        leaf, parent = path[-1], (path[-2] if len(path) > 1 else "")
        if not parent and by_name.get(leaf):
            continue  # the top of a group (or of the whole config)
        if parent and parent in whole:
            continue
        if parent and any(_names_parent(u.names, parent) for u in by_name.get(leaf, [])):
            continue
        unread.append(f"{rel}: {'.'.join(path)}" + (f" (in {package})" if package else ""))
    return unread


def test_every_config_key_is_read_by_some_code():
    keys = config_keys()
    assert len(keys) > 150  # the scan found the config
    assert ("conf/evaluation/baseline.yaml", ("search", "tt_mb"), "baseline") in keys
    assert ("conf/game/small.yaml", ("game", "max_plies"), "") in keys
    unread = unread_keys(keys, code_units())
    assert unread == [], "config keys that no code reads:\n" + "\n".join(unread)


def test_the_check_finds_a_key_nothing_reads():
    """The five keys conf/evaluation/baseline.yaml once documented and nothing read are reported
    against the code that reads its other keys; the key it does read is not."""
    code = """
def minimax_options(baseline):
    options = {}
    if (baseline.get("search") or {}).get("tt_mb") is not None:
        options["tt_mb"] = int(baseline["search"]["tt_mb"])
    return options

class MinimaxPlayer:
    def __init__(self, depth=0, time_ms=0, max_plies=300):
        self.time_ms = time_ms
        self.max_plies = max_plies
"""
    keys = [
        ("b.yaml", ("search", "tt_mb"), "baseline"),
        ("b.yaml", ("search", "time_ms"), "baseline"),
        ("b.yaml", ("search", "ladder_depths"), "baseline"),
        ("b.yaml", ("match", "openings"), "baseline"),
        ("b.yaml", ("match", "max_plies"), "baseline"),
        ("b.yaml", ("match", "games_per_pair"), "baseline"),
    ]
    assert unread_keys(keys, units_of(code, "players")) == [
        f"b.yaml: {k} (in baseline)"
        for k in (
            "search.time_ms",
            "search.ladder_depths",
            "match.openings",
            "match.max_plies",
            "match.games_per_pair",
        )
    ]
    # Sections taken whole, a getter bound to a name, a module reading its own section, and
    # key names listed in a tuple at the top of a module.
    code = """
KEYS = ("elo0", "elo1")
def settings(get, cfg):
    server = ServerSettings.from_config(cfg["selfplay"]["inference_server"])
    return dict(gate=dict(get("gate")), opt=instantiate(cfg.optimizer), server=server)
def run(cfg):
    return cfg.threads, cfg.wandb_cfg.get("log_models")
"""
    keys = [
        ("e.yaml", ("gate", "elo0"), ""),
        ("l.yaml", ("optimizer", "momentum"), ""),
        ("s.yaml", ("inference_server", "capture"), "selfplay"),
        ("l.yaml", ("trainer", "threads"), ""),
        ("l.yaml", ("wandb", "log_models"), ""),
        ("l.yaml", ("trainer", "seed"), ""),
    ]
    assert unread_keys(keys, units_of(code, "trainer")) == ["l.yaml: trainer.seed"]
