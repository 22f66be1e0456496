"""The one player-spec grammar (evaluation.players.spec): typed results, clear refusals, and the
play server taking exactly its own subset of what the match tool takes."""

from __future__ import annotations

import pytest

from evaluation.players.spec import OPTIONS, PlayerSpec, parse_spec
from play.paths import Roots
from play.players import LimitError, Players
from play.settings import load_settings


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("minimax:4", {"kind": "minimax", "depth": 4}),
        ("minimax:t200,tm", {"kind": "minimax", "time_ms": 200, "manage_time": True}),
        ("minimax+db:6", {"kind": "minimax", "depth": 6, "database": True}),
        ("ab+nn:t200,tm", {"kind": "ab+nn", "time_ms": 200, "manage_time": True}),
        (
            "ab+nn:3:w/eval.safetensors",
            {"kind": "ab+nn", "depth": 3, "nneval_path": "w/eval.safetensors"},
        ),
        ("ab+nn+db:t50", {"kind": "ab+nn", "time_ms": 50, "database": True}),
        ("random", {"kind": "random", "seed": None}),
        ("random:7", {"kind": "random", "seed": 7}),
        ("uniform-mcts:sims=64", {"kind": "uniform", "source": "uniform-mcts"}),
        ("net.safetensors:t200,cpuct=2", {"kind": "network", "source": "net.safetensors"}),
    ],
)
def test_each_form_parses_to_its_typed_fields(text, fields) -> None:
    spec = parse_spec(f"  {text} ")
    assert isinstance(spec, PlayerSpec) and spec.text == text
    for name, value in fields.items():
        assert getattr(spec, name) == value, name


def test_mcts_options_are_typed_by_their_setting_names() -> None:
    spec = parse_spec("net.safetensors:t200,cpuct=2,egdb=1,solver=off,root=gumbel")
    assert dict(spec.options) == {
        "time_ms": 200,
        "c_puct": 2.0,
        "egdb": True,
        "solver": False,
        "root_policy": "gumbel",
    }
    assert set(OPTIONS) >= {"sims", "ms", "cpuct", "egdb", "book", "tm"}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("minimax:\u0663", "malformed"),  # an Arabic-Indic three: digits are ASCII
        ("random:\u0661", "malformed"),
        ("net.safetensors:sims=\u0663", "sims must be int"),
        ("net.safetensors:cpuct=\u0661.5", "cpuct must be float"),
        ("minimax:0", "positive"),
        ("minimax:65", "at most 64"),
        ("minimax:3:file.safetensors", "malformed"),
        ("uniform-mcts:sims=0", "at least 1"),
        ("uniform-mcts:sims=5,book=1", "uniform-mcts has none"),
        ("net.safetensors:sims=5,t100", "not both"),
        ("net.safetensors:tm=1", "needs a time"),
        ("net.safetensors:simz=3", "bad option 'simz=3'"),
        ("alphazero", "unknown player spec 'alphazero'"),
        ("", "non-empty"),
    ],
)
def test_bad_specs_are_refused_naming_the_spec(text, why) -> None:
    with pytest.raises(ValueError, match=why):
        parse_spec(text)


def test_the_play_server_parses_with_the_same_grammar_and_adds_only_its_limits(tmp_path) -> None:
    (tmp_path / "models").mkdir()
    players = Players(
        load_settings({"torch_threads": 1}), Roots(tmp_path / "runs", tmp_path / "models")
    )
    assert players.parse("ab+nn:t200,tm").kind == "minimax"
    assert players.parse("random:3").seed == 3
    uniform = players.parse("uniform-mcts:t100,cpuct=1.5")
    assert uniform.budget is not None and uniform.budget.ms == 100 and uniform.c_puct == 1.5
    # What the grammar refuses, the server refuses with the same words.
    for text in ("minimax:\u0663", "net.safetensors:simz=3"):
        with pytest.raises(ValueError) as from_server:
            players.parse(text)
        with pytest.raises(ValueError) as from_grammar:
            parse_spec(text)
        assert str(from_server.value) == str(from_grammar.value)
    # What only the server refuses: files a request names, a database build, options it
    # does not serve, budgets beyond its limits.
    for text in ("ab+nn:3:/etc/passwd", "minimax+db:4", "uniform-mcts:sims=5,root=gumbel"):
        with pytest.raises(ValueError, match="server"):
            players.parse(text)
    with pytest.raises(LimitError):
        players.parse("minimax:60")
