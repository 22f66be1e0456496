"""Every search parameter is declared once (game.search_parameters): its default, its range and its
doc line. Each place that names one agrees with that declaration: conf/mcts/default.yaml, the C++
MctsConfig, the config schema, make_config, and the players' spec options."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from checkerzero.config import ConfigError
from checkerzero.config_schema import SCHEMA
from evaluation.players.spec import _POLICY_ONLY, OPTIONS, _integer, _number, _switch, parse_spec
from game import _core
from game.mcts import make_config, new_search
from game.search_parameters import SEARCH_PARAMETERS, SearchParameter, yaml_text

CONF_MCTS = Path(__file__).resolve().parents[1] / "conf" / "mcts" / "default.yaml"


def edge_values(p: SearchParameter) -> tuple[list, list]:
    """``(allowed, refused)``: values at and just past each end of the parameter's range."""
    if p.kind is bool:
        return [True, False], [1, "yes", None]
    if p.kind is str:
        return list(p.choices), [p.choices[0].upper(), "", 1]
    step = 1 if p.kind is int else 1e-3
    lo = p.lo + step if p.open_lo else p.lo
    allowed = [p.kind(lo), p.kind(p.hi), p.default]
    refused = [p.kind(p.lo if p.open_lo else p.lo - step), p.kind(p.hi + step), True, "1"]
    if p.kind is float:
        refused += [math.nan, math.inf]
    else:
        refused += [float(p.default)]  # 100.0 is no visit count
    return allowed, refused


def test_conf_mcts_is_the_declaration_written_out():
    """Each key of conf/mcts/default.yaml has its declared default and its doc line as comment,
    in the declared order, and the file has no other key."""
    assert CONF_MCTS.read_text() == yaml_text(), (
        "conf/mcts/default.yaml differs from game/search_parameters.py: change the declaration "
        "and run python -m game.search_parameters > conf/mcts/default.yaml"
    )


def test_the_composed_mcts_group_holds_the_declared_defaults(config):
    cfg = config().mcts
    assert list(cfg) == list(SEARCH_PARAMETERS)
    for name, p in SEARCH_PARAMETERS.items():
        assert cfg[name] == p.default and p.ok(cfg[name]), name


def test_the_declaration_holds_the_cpp_configs_fields_and_defaults():
    """A field added on one side only (the struct, the declaration) fails here, naming it; so does
    a C++ default that differs from the declared one."""
    made = _core.MctsConfig()
    fields = {
        name for name in dir(made) if not name.startswith("_") and not callable(getattr(made, name))
    }
    assert set(SEARCH_PARAMETERS) == fields, (
        f"only in C++: {sorted(fields - set(SEARCH_PARAMETERS))}, "
        f"only in game.search_parameters: {sorted(set(SEARCH_PARAMETERS) - fields)}"
    )
    for name, p in SEARCH_PARAMETERS.items():
        assert getattr(made, name) == pytest.approx(p.default), name
        assert p.ok(p.default), name
        assert p.doc and "\n" not in p.doc, name


@pytest.mark.parametrize("name", list(SEARCH_PARAMETERS))
def test_make_config_and_the_core_take_the_ends_of_each_range(name):
    """What the declaration allows the C++ search takes (its own check is only a floor below the
    declared range); what it refuses make_config refuses with one line naming the key."""
    p = SEARCH_PARAMETERS[name]
    allowed, refused = edge_values(p)
    for value in allowed:
        made = make_config({name: value})
        assert getattr(made, name) == pytest.approx(value)
        new_search(1, 6, {name: value})  # the core's check_config accepts it
    for value in refused:
        with pytest.raises(ValueError, match=rf"^mcts\.{name}={re.escape(repr(value))}: ") as err:
            make_config({name: value})
        assert "\n" not in str(err.value)
        assert str(err.value).endswith(p.allowed)


@pytest.mark.parametrize("name", list(SEARCH_PARAMETERS))
def test_the_schema_checks_each_search_key_with_its_declared_range(name):
    p = SEARCH_PARAMETERS[name]
    rule = SCHEMA[f"mcts.{name}"]
    allowed, refused = edge_values(p)
    for value in allowed:
        assert rule.problem(value) is None, value
    for value in refused:
        assert rule.problem(value) == p.allowed, value


def test_the_evaluation_groups_search_keys_share_the_declared_ranges():
    shared = {
        "evaluation.simulations": "simulations",
        "evaluation.leaves_per_game": "leaves_per_game",
        "evaluation.timed_leaves_per_game": "leaves_per_game",
        "evaluation.root_policy": "root_policy",
        "learner.reanalysis.simulations": "simulations",
    }
    for key, name in shared.items():
        p = SEARCH_PARAMETERS[name]
        allowed, refused = edge_values(p)
        assert all(SCHEMA[key].problem(v) is None for v in allowed), key
        assert all(SCHEMA[key].problem(v) == p.allowed for v in refused), key


def test_a_composed_config_refuses_what_make_config_refuses(config):
    """The same value is refused by both, each naming the key in one line (the two range rules
    that once disagreed: mcts.simulations=0 passed make_config and failed the schema)."""
    for key, value in (("simulations", 0), ("gumbel_m", 0), ("forced_playouts_k", -1)):
        allowed = SEARCH_PARAMETERS[key].allowed
        with pytest.raises(ValueError, match=rf"mcts\.{key}={value}: {re.escape(allowed)}$"):
            make_config({key: value})
        with pytest.raises(ConfigError, match=rf"mcts\.{key}={value}: {re.escape(allowed)}$"):
            config(f"mcts.{key}={value}")


# Spec option -> the declared kind its value converts to.
_CONVERTS = {_integer: int, _number: float, _switch: bool, str: str}


def test_the_players_search_options_take_the_declared_kinds_and_ranges():
    """Each spec option that sets a search key parses its value to the key's kind and refuses
    a value outside the key's range, naming the option; sims=0 stays the network's policy."""
    search_options = {k: t for k, t in OPTIONS.items() if t[0] in SEARCH_PARAMETERS}
    assert {"sims", "leaves", "cpuct", "fpu", "pst", "solver", "root"} <= set(search_options)
    for option, (target, convert) in search_options.items():
        p = SEARCH_PARAMETERS[target]
        assert _CONVERTS[convert] is p.kind, option
        allowed, refused = edge_values(p)
        for value in allowed:
            text = _spec_text(value)
            assert parse_spec(f"net.safetensors:{option}={text}").options[target] == value, option
        for value in refused:
            if type(value) is not p.kind or (target, value) == _POLICY_ONLY:
                continue  # a value of another kind is refused by its conversion already
            text = _spec_text(value)
            with pytest.raises(ValueError, match=rf"option {option}={re.escape(text)}: "):
                parse_spec(f"net.safetensors:{option}={text}")
    assert parse_spec("net.safetensors:sims=0").options["simulations"] == 0  # the policy alone


def _spec_text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return repr(value) if isinstance(value, float) else str(value)
