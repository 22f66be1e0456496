"""`python -m actors`: self-play from the command line; prints games/s, positions/s, evaluations/s.

    python -m actors --games 8 --simulations 64 --out games.pdn [--checkpoint PATH]

The settings are the composed config's (`checkerzero.config.compose`), as `python -m learner` uses
them; the flags override a few keys, and trailing ``key=value`` arguments override any key.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from actors.self_play import resign_false_positive_rate, run_self_play
from checkerzero.config import ConfigError, compose
from checkerzero.network.inference import NetworkInference, load_for_play
from checkerzero.network.model import CheckersNet, model_config
from game import openings as op
from game.mcts import Inference, UniformInference
from game.pdn import write_pdn
from game.record_pdn import record_to_pdn
from game.records import Result

GAME_GROUP = {8: "english", 6: "small"}  # the conf/game file of each board side


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m actors", description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, default=8, help="games to play")
    parser.add_argument("--checkpoint", help="network weights (default: a fresh network)")
    parser.add_argument("--uniform", action="store_true", help="uniform inference (tree only)")
    parser.add_argument("--simulations", type=int, help="override mcts.simulations")
    parser.add_argument("--parallel", type=int, help="override selfplay.games_in_parallel")
    parser.add_argument("--size", type=int, default=8, choices=(6, 8), help="board side")
    parser.add_argument("--openings", choices=("deck", "start"), help="override selfplay.openings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the games here as PDN")
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = parser.parse_intermixed_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    overrides = [f"game={GAME_GROUP[args.size]}"]
    if args.simulations is not None:
        overrides.append(f"mcts.simulations={args.simulations}")
    if args.parallel is not None:
        overrides.append(f"selfplay.games_in_parallel={args.parallel}")
    if args.openings is not None:
        overrides.append(f"selfplay.openings={args.openings}")
    elif args.size != 8:
        overrides.append("selfplay.openings=start")
    try:
        cfg = compose([*overrides, *args.overrides])
        inference: Inference
        if args.uniform:
            inference = UniformInference()
        elif args.checkpoint is not None:
            inference, _ = load_for_play(args.checkpoint, args.size)
        else:
            inference = NetworkInference(CheckersNet(model_config(cfg.model, args.size)))
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    deck = op.load_openings(cfg.selfplay.openings, args.size)
    records, st = run_self_play(inference, cfg, args.games, deck, args.seed)
    results = {
        name: sum(r.result == res for r in records)
        for res, name in (
            (Result.BLACK_WIN, "black"),
            (Result.WHITE_WIN, "white"),
            (Result.DRAW, "draw"),
        )
    }
    print(
        f"{st.games} games, {st.positions} positions, {st.evaluations} evaluations "
        f"in {st.seconds:.1f} s; results {results}"
    )
    print(
        f"games/s {st.games / st.seconds:.2f}  positions/s {st.positions / st.seconds:.1f}  "
        f"network evaluations/s {st.evaluations / st.seconds:.1f}"
    )
    print(
        f"time: network {st.network_s / st.seconds:.0%}, tree {st.tree_s / st.seconds:.0%}, "
        f"glue {st.glue_s / st.seconds:.0%}"
    )
    rate, n = resign_false_positive_rate(records)
    if n:
        print(f"resignation false positives: {rate:.0%} of {n} games that played on")
    if args.out is not None:
        args.out.write_text(write_pdn(record_to_pdn(r, k, deck) for k, r in enumerate(records)))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
