"""The evaluator: the gate on real games, the ladder's ratings, MCTS players, and the evaluator's
state in a real Redis surviving a restart (and, on a local Ray, the actor itself)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from checkerzero.network.checkpoint import encode_checkpoint, save_checkpoint
from checkerzero.network.inference import compute_dtype
from checkerzero.network.model import CheckersNet, ModelConfig
from checkerzero.store.keys import decisions_key, results_key
from checkerzero.store.replay import connect
from checkerzero.store.weights import WeightsChannel
from evaluation.evaluator.records import read_eval_metrics
from evaluation.evaluator.settings import EvalSettings
from evaluation.evaluator.worker import EvaluatorWorker
from evaluation.ladder.rungs import fit_all, in_process, ladder_results, pair_results, rung_results
from evaluation.matches.games import play_match
from evaluation.matches.gate import gate
from evaluation.matches.workers import run_match
from evaluation.players.make import make_player
from evaluation.players.mcts import MCTSPlayer
from evaluation.players.spec import parse_spec
from game.openings import extend_openings, load_openings, random_openings
from game.pdn import read_pdn, write_pdn
from game.position import Position

MAX_PLIES = 300
# A gate for tests: H1 far away, so a decision needs only a few dozen games.
FAST_SPRT = {
    "elo0": 0.0,
    "elo1": 100.0,
    "alpha": 0.05,
    "beta": 0.05,
    "model": "pentanomial",
    "max_games": 200,
}
TINY = ModelConfig(blocks=1, channels=8, policy_channels=4, value_channels=2, value_hidden=16)


@pytest.fixture(scope="module")
def deck():
    return load_openings()


# ----------------------------------------------------------------------------- the gate


def test_gate_promotes_a_clearly_stronger_player(deck) -> None:
    for seed in range(6):
        d = gate(
            make_player("minimax:5"),
            make_player("minimax:1"),
            deck,
            FAST_SPRT,
            seed=seed,
            max_plies=MAX_PLIES,
        )
        assert d.decision == "accept" and not d.truncated, (seed, d)
        assert d.wins > d.losses and d.llr >= d.upper_bound
        assert d.games < FAST_SPRT["max_games"]  # stopped early on a clear result


def test_gate_never_promotes_an_identical_player(deck) -> None:
    """Deterministic equals: each pair is the same game twice with colours swapped (1 point)."""
    for seed in range(4):
        d = gate(
            make_player("minimax:3"),
            make_player("minimax:3"),
            deck,
            FAST_SPRT,
            seed=seed,
            max_plies=MAX_PLIES,
        )
        assert d.decision == "reject" and d.llr <= d.lower_bound, (seed, d)
        assert d.pentanomial[2] == d.games // 2  # every pair scored exactly one point


def test_gate_promotes_equal_noisy_players_at_most_at_rate_alpha(deck) -> None:
    """Random against random over 100 seeded gates: promotions at the claimed rate alpha (5%).
    P(11 or more of 100 | 5%) is about 1%, so a sound gate passes this; a gate that promoted on
    noise (e.g. "LLR > 0 at the cap", or the approximate LLR updated pair by pair) would not."""
    trials = 100
    accepted = 0
    for t in range(trials):
        d = gate(
            make_player(f"random:{2 * t}"),
            make_player(f"random:{2 * t + 1}"),
            deck,
            FAST_SPRT,
            seed=t,
            max_plies=MAX_PLIES,
        )
        assert d.decision in ("accept", "reject")
        accepted += d.decision == "accept"
    assert accepted <= 10, accepted


def test_gate_resumes_from_played_pairs_to_the_same_decision(deck) -> None:
    args = (deck, FAST_SPRT)
    kwargs = {"seed": 3, "max_plies": MAX_PLIES}
    seen = []
    full = gate(
        make_player("minimax:4"),
        make_player("minimax:2"),
        *args,
        on_pair=lambda pair, _sprt: seen.append(pair),
        **kwargs,
    )
    stopped = gate(
        make_player("minimax:4"),
        make_player("minimax:2"),
        *args,
        should_stop=lambda: len(seen) > 0,  # stop at once: nothing new is played
        played=seen[:3],
        **kwargs,
    )
    assert stopped.decision == "continue" and stopped.games == 6
    resumed = gate(
        make_player("minimax:4"), make_player("minimax:2"), *args, played=seen[:3], **kwargs
    )
    assert resumed == full


def test_gate_plays_each_opening_at_most_once(deck) -> None:
    """A deck of 3 openings runs out before the test decides: reject, marked truncated."""
    d = gate(
        make_player("minimax:2"),
        make_player("minimax:2"),
        deck[:3],
        {**FAST_SPRT, "elo1": 30.0},
        seed=0,
        max_plies=MAX_PLIES,
    )
    assert d.games == 6 and d.decision == "reject" and d.truncated
    assert d.lower_bound < d.llr < d.upper_bound


# ----------------------------------------------------------------------------- ratings


def test_ladder_ratings_are_ordered_with_random_at_zero(deck) -> None:
    rows = rung_results(
        ["random", "minimax:1", "minimax:3"], in_process(deck, 10, seed=0, max_plies=MAX_PLIES)
    )
    rows += ladder_results(
        "minimax:3",
        make_player("minimax:3"),
        ["random"],
        10,
        deck,
        seed=1,
        max_plies=MAX_PLIES,
    )
    elo = {"anchor_player": "random", "anchor_rating": 0.0, "first_move_advantage": True}
    ratings = fit_all(rows, elo)
    assert ratings["random"].elo == 0.0 and ratings["random"].anchored
    assert ratings["minimax:3"].elo > ratings["minimax:1"].elo > ratings["random"].elo + 100
    # The rows keep colours apart: one row per first mover.
    assert {r.first_mover for r in rows if r.a == "minimax:1"} == {"minimax:1", "random"}


def test_pair_results_count_from_the_first_players_side(deck) -> None:
    match = play_match(make_player("minimax:3"), make_player("random"), deck, games=4, seed=0)
    rows = pair_results(match.pairs, "A", "B")
    assert sum(r.wins for r in rows) == match.wins
    assert sum(r.draws for r in rows) == match.draws
    assert sum(r.losses for r in rows) == match.losses
    assert all(r.wins + r.draws + r.losses == 2 for r in rows)  # 2 pairs: 2 games per colour


# ----------------------------------------------------------------------------- MCTS players


def test_uniform_mcts_beats_random_and_reuses_its_tree(deck) -> None:
    player = make_player("uniform-mcts:sims=200")
    assert isinstance(player, MCTSPlayer) and player.simulations == 200
    match = play_match(player, make_player("random"), deck, games=12, seed=0)
    assert match.score >= 0.75 and match.wins > 3 * match.losses, match.summary()
    # Every decision but a game's first starts from the subtree kept from the previous one
    # (multi-jumps of the opponent included).
    assert player.reused == player.decisions - match.num_games > 0
    again = play_match(make_player("uniform-mcts:sims=200"), make_player("random"), deck, games=12)
    assert again.pairs == match.pairs  # deterministic: no noise, temperature 0


def mcts_parts(text: str) -> tuple[str | None, dict]:
    spec = parse_spec(text)
    return spec.source, dict(spec.options)


def test_mcts_spec_parsing_and_errors(tmp_path) -> None:
    assert parse_spec("minimax:3").kind == "minimax"
    assert mcts_parts("uniform-mcts:sims=64,leaves=4") == (
        "uniform-mcts",
        {"simulations": 64, "leaves_per_game": 4},
    )
    assert mcts_parts("a/b.safetensors:sims=9:cpuct=1.5") == (
        "a/b.safetensors",
        {"simulations": 9, "c_puct": 1.5},
    )
    with pytest.raises(ValueError, match="bad option 'simz=3'"):
        make_player("uniform-mcts:simz=3")
    with pytest.raises(ValueError, match="sims must be int"):
        make_player("uniform-mcts:sims=many")
    with pytest.raises(ValueError, match="no checkpoint file at"):
        make_player(str(tmp_path / "missing.safetensors"))
    assert mcts_parts("a/b.safetensors:t200,precision=float32") == (
        "a/b.safetensors",
        {"time_ms": 200, "precision": "float32"},
    )
    with pytest.raises(ValueError, match="precision must be one of auto, float32, bfloat16"):
        make_player("uniform-mcts:precision=half")


def test_a_checkpoint_player_computes_in_the_precision_its_spec_asks(tmp_path) -> None:
    path = tmp_path / "tiny.safetensors"
    save_checkpoint(path, CheckersNet(TINY), step=0, version=1)
    default = make_player(f"{path}:sims=8")
    assert default.inference.compute_dtype == compute_dtype("auto", "cpu")
    assert default.name == "tiny.safetensors:sims=8"
    for precision in ("float32", "bfloat16"):
        player = make_player(f"{path}:sims=8,precision={precision}")
        assert str(player.inference.compute_dtype) == f"torch.{precision}"
        assert player.name == f"tiny.safetensors:sims=8,{precision}"  # tells the two apart
    tuned = make_player(f"{path}:sims=8,cpuct=2.0,precision=float32")
    assert tuned.settings["c_puct"] == 2.0
    assert tuned.name == "tiny.safetensors:sims=8,cpuct=2.0,float32"


def test_checkpoint_player_plays_legal_games_that_replay(tmp_path, deck) -> None:
    torch.manual_seed(0)
    path = tmp_path / "tiny.safetensors"
    save_checkpoint(path, CheckersNet(TINY), step=0, version=1)
    result = run_match(
        f"{path}:sims=8", "random", deck, games=2, seed=0, ray_mode="off", max_plies=120
    )
    assert result.player_a == "tiny.safetensors:sims=8"
    games = read_pdn(write_pdn(result.pdn_games()))  # replays every move in the engine
    assert len(games) == 2
    for parsed, (record, _) in zip(games, result.games(), strict=True):
        assert parsed.moves == list(record.moves) and parsed.result == record.result


def test_random_openings_are_distinct_and_seeded() -> None:
    a = random_openings(6, count=20, seed=1)
    assert len(a) == 20 and len({o.moves for o in a}) == 20
    assert a == random_openings(6, count=20, seed=1) != random_openings(6, count=20, seed=2)


def test_extended_openings_continue_the_deck_to_new_positions(deck) -> None:
    extended = extend_openings(deck, 2, seed=0)
    assert len(extended) > 0.9 * len(deck)  # a few coincide and are dropped
    by_name = {o.name: o for o in deck}
    ends = set()
    for o in deck + extended:
        pos = Position()
        for text in o.moves:
            pos.play(text)  # legal, else ValueError
        ends.add(pos.game.hash)
    assert len(ends) == len(deck) + len(extended)  # every starting position distinct
    for o in extended:
        base = by_name[o.name.removesuffix(" +2")]
        assert o.moves[:3] == base.moves and len(o.moves) == 5
    assert extended == extend_openings(deck, 2, seed=0) != extend_openings(deck, 2, seed=1)


# ----------------------------------------------------------------------------- the worker


@pytest.fixture()
def small_config(config):
    """``small_config(**evaluation)``: the real composed config, shrunk: tiny searches, a short
    ladder, a short gate."""
    return lambda **evaluation: shrunk(config, **evaluation)


def shrunk(config, **evaluation) -> dict:
    settings = {
        "every_versions": 1,
        "simulations": 8,
        "ladder": "[random,minimax:1]",
        "ladder_pairs": 1,
        "rung_pairs": 2,
        "gate.max_games": 8,
        "gating": "true",  # the laptop preset (the default) rates without gating
        "every_min": 0,  # a rating whenever the worker steps
        "early_every_min": 0,
    } | evaluation
    # evaluation=default: the rungs rated in-run, as on 6x6 (8x8 defaults to the rated table)
    overrides = ["evaluation=default", "replay.namespace=t", "game.max_plies=150"]
    overrides += [f"evaluation.{k}={v}" for k, v in settings.items()]
    return OmegaConf.to_container(config(*overrides), resolve=True)


def publish_tiny(channel: WeightsChannel, version: int) -> None:
    torch.manual_seed(version)
    channel.publish(encode_checkpoint(CheckersNet(TINY), step=version, version=version), version)


def test_config_is_read_and_checked(small_config) -> None:
    s = EvalSettings.from_config(small_config())
    assert s.mcts["simulations"] == 8 and s.mcts["dirichlet_epsilon"] == 0.0
    assert s.ladder == ("random", "minimax:1") and s.player_options["weights"]["man"] == 100
    with pytest.raises(ValueError, match=r"evaluation\.every_versions"):
        EvalSettings.from_config(small_config(every_versions=0))
    with pytest.raises(ValueError, match="anchor"):
        EvalSettings.from_config(small_config(ladder="[minimax:1,minimax:2]"))


def test_worker_records_everything_and_a_restart_loses_nothing(
    server, tmp_path, small_config
) -> None:
    cfg = small_config()
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    channel = WeightsChannel(client, namespace="t")
    for v in (1, 2, 3):
        publish_tiny(channel, v)
    worker = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path)
    assert worker.step()  # the rungs, v1 made best (and laddered), v3 gated and laddered
    assert channel.version("best") in (1, 3)
    decisions = worker.decisions()
    assert [d["version"] for d in decisions] == [1, 3]  # v2 skipped: v3 was newer
    assert decisions[0]["decision"] == "initial"
    assert decisions[1]["decision"] in ("accept", "reject") and decisions[1]["best"] == "v1"
    assert decisions[1]["promoted"] == (channel.version("best") == 3)
    rows = worker.results()
    names = {r.a for r in rows} | {r.b for r in rows}
    assert names == {"random", "minimax:1", "v1", "v3"}
    gate_games = sum(r.wins + r.draws + r.losses for r in rows if r.a == "v3" and r.b == "v1")
    assert gate_games == decisions[1]["games"]
    metrics = read_eval_metrics(client, "t")
    assert metrics["eval/version"] == 3.0 and "eval/elo" in metrics
    assert metrics["eval/elo_lower"] <= metrics["eval/elo"] <= metrics["eval/elo_upper"]
    assert metrics["eval/ladder/random"] == 0.0
    pdn = (tmp_path / "eval" / "v00003_gate.pdn").read_text()
    assert len(read_pdn(pdn)) == decisions[1]["games"]
    assert (tmp_path / "eval" / "ratings.png").is_file()

    # A restarted evaluator (a new object on the same Redis) has nothing to redo ...
    before = client.lrange(results_key("t"), 0, -1)
    again = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path)
    assert not again.step()
    assert client.lrange(results_key("t"), 0, -1) == before
    # ... and carries on with the next version, keeping every earlier result.
    publish_tiny(channel, 4)
    assert again.step()
    after = client.lrange(results_key("t"), 0, -1)
    assert after[: len(before)] == before and len(after) > len(before)
    assert [json.loads(d)["version"] for d in client.lrange(decisions_key("t"), 0, -1)] == [1, 3, 4]
    assert read_eval_metrics(client, "t")["eval/version"] == 4.0


def test_worker_stopped_mid_gate_resumes_where_it_stopped(server, tmp_path, small_config) -> None:
    cfg = small_config(rung_pairs=0, ladder_pairs=0, **{"gate.max_games": 10})
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    channel = WeightsChannel(client, namespace="t")
    publish_tiny(channel, 1)
    publish_tiny(channel, 2)

    first = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path)
    first.ensure_best()
    checks = iter(range(100))
    first.ctx.stopping = lambda: next(checks) >= 2  # type: ignore[method-assign]  # 2 pairs, then stop
    assert not first.step()
    assert first.decisions()[-1]["version"] == 1 and first.results() == []
    resumed = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path)
    assert resumed.step()
    decision = resumed.decisions()[-1]
    assert decision["version"] == 2 and decision["games"] >= 4  # the 2 pairs before the stop

    # The same gate uninterrupted, in a fresh namespace, gives the same games.
    cfg["replay"]["namespace"] = "u"
    channel_u = WeightsChannel(client, namespace="u")
    publish_tiny(channel_u, 1)
    publish_tiny(channel_u, 2)
    whole = EvaluatorWorker(EvalSettings.from_config(cfg), client, tmp_path / "u")
    assert whole.step()
    assert whole.decisions()[-1]["pentanomial"] == decision["pentanomial"]
    assert whole.results() == resumed.results()


# ----------------------------------------------------------------------------- Ray


@pytest.fixture()
def local_ray():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_evaluator_actor_on_ray(local_ray, server, tmp_path, small_config) -> None:
    """The actor evaluates published versions; killed, Ray restarts it and it carries on."""
    from evaluation.evaluator.actor import start_evaluator

    cfg = small_config(rung_pairs=1, poll_s=0.2)
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    channel = WeightsChannel(client, namespace="t")
    publish_tiny(channel, 1)
    publish_tiny(channel, 2)
    handle = start_evaluator(cfg, server.url, server.password, Path(tmp_path))
    assert handle is not None

    def wait_for_version(version: int) -> None:
        deadline = time.monotonic() + 120
        while read_eval_metrics(client, "t").get("eval/version") != float(version):
            assert time.monotonic() < deadline, f"no metrics for v{version} from the actor"
            handle.check()
            time.sleep(0.5)

    try:
        wait_for_version(2)
        before = client.lrange(results_key("t"), 0, -1)
        local_ray.kill(handle.actor, no_restart=False)  # Ray restarts it (max_restarts=-1)
        publish_tiny(channel, 3)
        wait_for_version(3)
    finally:
        handle.stop(10.0)
    assert channel.version("best") in (1, 2, 3)
    after = client.lrange(results_key("t"), 0, -1)
    assert after[: len(before)] == before and len(after) > len(before)
    assert (tmp_path / "eval" / "v00003_ladder.pdn").is_file()
    disabled = small_config(enabled=False, gating="false")
    assert start_evaluator(disabled, server.url, None, tmp_path) is None


def test_the_evaluator_asks_for_a_gpu_share_only_where_it_runs_on_a_gpu() -> None:
    from evaluation.evaluator.actor import evaluator_gpus

    assert evaluator_gpus({"device": "cpu", "gpus": 0.2}, node_gpus=1) == 0.0
    assert evaluator_gpus({"device": "auto", "gpus": 0.2}, node_gpus=0) == 0.0
    assert evaluator_gpus({"device": "auto", "gpus": 0.2}, node_gpus=1) == 0.2
    assert evaluator_gpus({"device": "cuda:0", "gpus": 0.5}, node_gpus=2) == 0.5
    assert evaluator_gpus({"device": "auto"}, node_gpus=1) == 0.2  # a config saved before gpus
    with pytest.raises(ValueError, match=r"evaluation\.device=cuda.*no GPU"):
        evaluator_gpus({"device": "cuda", "gpus": 0.2}, node_gpus=0)
    with pytest.raises(ValueError, match=r"evaluation\.gpus=0: a share of one GPU"):
        evaluator_gpus({"device": "auto", "gpus": 0}, node_gpus=1)


@pytest.fixture
def gpu_node_ray():
    """A local Ray whose node declares one GPU (a resource only: no CUDA here), as a GPU node's."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_on_a_gpu_node_the_evaluator_actor_holds_its_gpu_share(
    gpu_node_ray, server, tmp_path, small_config
) -> None:
    """Under device=auto on a node with a GPU, the actor holds evaluation.gpus of it (Ray would
    hide the GPU from an actor asking none). The declared GPU has no CUDA behind it, so the
    actor's network falls back to the CPU and still rates the candidate."""
    from evaluation.evaluator.actor import start_evaluator

    cfg = small_config(rung_pairs=1, poll_s=0.2, device="auto", gpus=0.25)
    client = connect(server.url, server.password, retries=2, backoff_s=0.05)
    publish_tiny(WeightsChannel(client, namespace="t"), 1)
    handle = start_evaluator(cfg, server.url, server.password, Path(tmp_path))
    assert handle is not None and handle.gpus == 0.25
    try:
        gpu_node_ray.get(handle.actor.where.remote(), timeout=60)  # the actor is placed
        assert gpu_node_ray.available_resources().get("GPU") == pytest.approx(0.75)
        deadline = time.monotonic() + 120
        while read_eval_metrics(client, "t").get("eval/version") != 1.0:
            assert time.monotonic() < deadline, "no rating of v1 from the actor"
            handle.check()
            time.sleep(0.5)
    finally:
        handle.stop(10.0)
