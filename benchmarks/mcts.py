"""Search speed: the batched C++ tree against OpenSpiel's MCTS, measured in the same run.

Tree mode (default): simulations per second of `BatchedMCTS` on one core with the uniform
inference (equal priors, draw value), so the tree and the Python round trip are all that is
measured: every batch goes gather() -> inference -> expand() through Python, as in self-play.
Beside it, in the same run:

* OpenSpiel's Python MCTS (`open_spiel.python.algorithms.mcts.MCTSBot`) with a constant
  inference (uniform priors, value 0): the same work per simulation as ours, in Python.
* OpenSpiel's C++ MCTS (`pyspiel.MCTSBot`) with `RandomRolloutEvaluator(1)`: different work
  (a random playout to the end instead of a network call; no priors), the usual reference.

Self-play mode (``--selfplay``): positions/s of `actors.self_play` with the default network on
CPU (checkerzero.network.inference), and the share of the time in the network, the tree and
Python glue;
``--precision float32`` or ``bfloat16`` fixes the network's arithmetic (default: auto, bf16 on a
CPU with native bf16).

    python benchmarks/mcts.py [--games 64] [--simulations 400] [--seconds 3]
    python benchmarks/mcts.py --selfplay [--games 64] [--seconds 30]
    python benchmarks/mcts.py --selfplay --playout-cap [--seconds 30]
    python benchmarks/mcts.py --selfplay --precision float32 [--checkpoint CKPT]

With ``--playout-cap`` self-play mode measures two arms in one run, each for ``--seconds``: every
decision searched fully, then playout cap randomization (selfplay.playout_cap as configured,
full_share 0.25 with 25 of 100 simulations by default): decisions/s, and full searches/s, the
positions that train the policy.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

if "--all-cores" not in sys.argv:  # before NumPy/torch start their thread pools
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")

import numpy as np
from omegaconf import OmegaConf

from actors.self_play import StopAt, run_self_play
from checkerzero.config import compose
from game import _core
from game.mcts import Inference, UniformInference, new_search, step

TARGET_SIMS_PER_S = 500_000  # issue 4: the tree must not be what limits self-play
TARGET_TREE_GLUE_SHARE = 0.20  # issue 4: tree + glue under 20% of self-play time on CPU


def pin_one_core() -> None:
    """Runs on one core, as a self-play actor does (one per core)."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})


def ours(games: int, simulations: int, leaves: int, seconds: float) -> dict[str, float]:
    """Plays moves in `games` games (tree reuse on) until `seconds` pass; counts new visits."""
    cfg = dict(compose().mcts)
    cfg.update(simulations=simulations, leaves_per_game=leaves, dirichlet_epsilon=0.25)
    mcts = new_search(games, 8, cfg, seed=1)
    inference = UniformInference()
    sims = evals = batches = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        before = sum(mcts.root_child_visits(i) for i in range(games))
        while (n := step(mcts, inference)) > 0:
            evals += n
            batches += 1
        sims += sum(mcts.root_child_visits(i) for i in range(games)) - before
        for i in range(games):  # one move each (a fresh game when one ends)
            if mcts.done(i) or not mcts.search_done(i):
                continue
            mcts.advance(i, mcts.choose(i, 1.0))
            if mcts.done(i):
                mcts.reset(i, _core.Game(8, 300))
    dt = time.perf_counter() - t0
    return {"sims_per_s": sims / dt, "evals_per_s": evals / dt, "batch": evals / max(batches, 1)}


def openspiel_python(simulations: int, seconds: float) -> float | None:
    try:
        import pyspiel
        from open_spiel.python.algorithms import mcts as osmcts
    except ImportError:
        print("OpenSpiel: peer not installed (pip install 'checkerzero[peers]'): peers skipped")
        return None

    class Constant(osmcts.Evaluator):
        def evaluate(self, state):
            return np.zeros(2)

        def prior(self, state):
            legal = state.legal_actions()
            return [(a, 1.0 / len(legal)) for a in legal]

    game = pyspiel.load_game("checkers")
    bot = osmcts.MCTSBot(game, 1.25, simulations, Constant(), random_state=np.random.RandomState(0))
    return _time_bot(game, bot, simulations, seconds)


def openspiel_cpp(simulations: int, seconds: float) -> float | None:
    try:
        import pyspiel
    except ImportError:
        return None
    game = pyspiel.load_game("checkers")
    bot = pyspiel.MCTSBot(
        game, pyspiel.RandomRolloutEvaluator(1, 0), 2.0, simulations, 1000, False, 0, False
    )
    return _time_bot(game, bot, simulations, seconds)


def _time_bot(game, bot, simulations: int, seconds: float) -> float:
    state = game.new_initial_state()
    done = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        action = bot.step(state)
        done += simulations
        state.apply_action(action)
        if state.is_terminal():
            state = game.new_initial_state()
    return done / (time.perf_counter() - t0)


def tree_mode(args: argparse.Namespace) -> None:
    r = ours(args.games, args.simulations, args.leaves, args.seconds)
    print(
        f"checkerzero BatchedMCTS, {args.games} games x {args.simulations} simulations, "
        f"{args.leaves} leaves/game, uniform inference, one core:"
    )
    print(
        f"  {r['sims_per_s']:>12,.0f} simulations/s  ({r['evals_per_s']:,.0f} leaf evaluations/s, "
        f"mean batch {r['batch']:.0f})  target >= {TARGET_SIMS_PER_S:,}: "
        f"{'met' if r['sims_per_s'] >= TARGET_SIMS_PER_S else 'NOT met'}"
    )
    py = openspiel_python(args.peer_simulations, args.seconds)
    if py is not None:
        print(
            f"OpenSpiel Python MCTSBot, constant inference (same work):  {py:>10,.0f} sims/s  "
            f"-> ours x{r['sims_per_s'] / py:,.0f}"
        )
    cpp = openspiel_cpp(args.peer_simulations, args.seconds)
    if cpp is not None:
        print(
            f"OpenSpiel C++ MCTSBot, random rollouts (different work: a playout per "
            f"simulation): {cpp:>10,.0f} sims/s  -> ours x{r['sims_per_s'] / cpp:,.0f}"
        )


def network_inference(checkpoint: str | None, precision: str = "auto") -> tuple[Inference, str]:
    # torch only for this mode: the tree benchmark's numbers come from a process without it.
    from checkerzero.network.inference import NetworkInference, load_for_play
    from checkerzero.network.model import CheckersNet, model_config

    if checkpoint is not None:
        inference, _ = load_for_play(checkpoint, 8, dtype=precision)
        return inference, f"{checkpoint} in {_dtype_name(inference)}"
    inference = NetworkInference(CheckersNet(model_config(compose().model, 8)), dtype=precision)
    return inference, (
        f"a fresh network of the default model config (conf/model/) in {_dtype_name(inference)}"
    )


def _dtype_name(inference: Any) -> str:
    return str(inference.compute_dtype).removeprefix("torch.")


def selfplay_mode(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads((os.cpu_count() or 1) if args.all_cores else 1)
    cfg = OmegaConf.to_container(compose(), resolve=True)
    cfg["selfplay"]["games_in_parallel"] = args.games
    if args.simulations_set:
        cfg["mcts"]["simulations"] = args.simulations
    inference, name = network_inference(args.checkpoint, args.precision)
    if args.playout_cap:
        playout_cap_arms(cfg, inference, name, args)
        return
    deadline = time.perf_counter() + args.seconds
    _, st = run_self_play(
        inference, cfg, args.games, None, seed=0, observer=StopAt(deadline, time.perf_counter)
    )
    tree_glue = (st.tree_s + st.glue_s) / st.seconds
    verdict = "met" if tree_glue < TARGET_TREE_GLUE_SHARE else "NOT met"
    print(
        f"self-play with {name}, {args.games} games in parallel, "
        f"{cfg['mcts']['simulations']} simulations, {st.seconds:.0f} s ({st.games} games ended):"
    )
    print(
        f"  {st.positions / st.seconds:,.1f} positions/s, {st.evaluations / st.seconds:,.0f} "
        f"network evaluations/s, mean batch {st.evaluations / max(st.batches, 1):.0f}"
    )
    print(
        f"  time: network {st.network_s / st.seconds:.1%}, tree {st.tree_s / st.seconds:.1%}, "
        f"glue {st.glue_s / st.seconds:.1%}  (tree + glue {tree_glue:.1%}, "
        f"target < {TARGET_TREE_GLUE_SHARE:.0%}: {verdict})"
    )


def playout_cap_arms(cfg: dict, inference: Inference, name: str, args: argparse.Namespace) -> None:
    """Self-play without and with playout cap randomization, `args.seconds` each, one run."""
    cap = cfg["selfplay"]["playout_cap"]
    print(
        f"self-play with {name}, {args.games} games in parallel, {args.seconds:.0f} s an arm; "
        f"playout cap: full_share {cap['full_share']}, {cfg['mcts']['simulations']} / "
        f"{cap['fast_simulations']} simulations"
    )
    for enabled in (False, True):
        cap["enabled"] = enabled
        deadline = time.perf_counter() + args.seconds
        _, st = run_self_play(
            inference, cfg, None, None, seed=0, observer=StopAt(deadline, time.perf_counter)
        )
        print(
            f"  playout cap {'on ' if enabled else 'off'}: {st.positions / st.seconds:7,.1f} "
            f"decisions/s, {st.full_positions / st.seconds:7,.1f} full searches/s "
            f"({st.full_positions / max(st.positions, 1):.0%}), "
            f"{st.evaluations / max(st.positions, 1):5.1f} network evaluations a decision"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--selfplay", action="store_true", help="self-play profile mode")
    parser.add_argument("--games", type=int, default=64, help="games searched together")
    parser.add_argument("--simulations", type=int, default=400)
    parser.add_argument("--leaves", type=int, default=8, help="leaves per game per batch")
    parser.add_argument("--peer-simulations", type=int, default=400)
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="time per measurement (self-play: 30 is good)"
    )
    parser.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    parser.add_argument("--checkpoint", help="network to time in --selfplay (default: a fresh one)")
    parser.add_argument(
        "--precision",
        default="auto",
        choices=("auto", "float32", "bfloat16"),
        help="--selfplay: the network's arithmetic (auto: bf16 on a CPU with native bf16)",
    )
    parser.add_argument(
        "--playout-cap", action="store_true", help="--selfplay: without and with playout cap"
    )
    args = parser.parse_args()
    args.simulations_set = "--simulations" in sys.argv
    if not args.all_cores:
        pin_one_core()
    if args.selfplay:
        selfplay_mode(args)
    else:
        tree_mode(args)


if __name__ == "__main__":
    main()
