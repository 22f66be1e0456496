"""Network strength on the minimax ladder, and what extra search buys.

Default::

    python benchmarks/strength.py [--checkpoint PATH] [--sims 100] [--max-depth 4] [--games 20]

The network (a checkpoint; by default the shipped one, ``play.settings.shipped_network``, else a
randomly initialised network of ``conf/model/default.yaml``, said so in the output) searches
with MCTS at ``--sims`` simulations per decision (no noise, most visited move) and plays
``--games`` games against each ladder player (``random``, ``minimax:1`` .. ``minimax:N``) from
the ACF 3-move deck, colours reversed. The rungs also play each other (``--ladder-games`` per
adjacent pair), and every player's rating is fitted by maximum likelihood with draws
(evaluation.stats.fit.fit_ratings, BayesElo's model, first-move advantage), random anchored at 0.

Search budget::

    python benchmarks/strength.py --budget 16,64,256,1024 [--checkpoint PATH] ...

The same network at each simulation budget plays the same ladder with the same openings; one
fit rates them all, so the table shows the Elo each budget reaches and what each step up buys.

Time-equal strength::

    python benchmarks/strength.py --time-equal 100 1000 [--checkpoint PATH] [--games 40]

The network plays at MS milliseconds per move (``PATH:tMS``: its search runs until the time is
spent, batched, with its tree kept between moves) against the alpha-beta baseline at the same
time per move (``minimax:tMS``), one core each (one torch thread), ``--games`` games from the
ACF deck with colours reversed per time. The table shows, per time, W/D/L from the network's
side, its score and Elo over minimax with the 95% interval, and what each search reached per
move: the network's mean simulations beside minimax's mean depth and nodes.

Games run on a process pool (``--workers``) or Ray (``--ray``), one task per game pair, each
worker loading the checkpoint itself (evaluation.matches.workers.run_match). ``--out DIR`` writes
every game as PDN and the fitted ratings as CSV.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from evaluation.ladder.rungs import pair_results, rung_results
from evaluation.matches.records import MatchResult
from evaluation.matches.workers import run_match
from evaluation.stats.elo import PairResult, Ratings, match_elo
from evaluation.stats.fit import fit_ratings
from game.openings import load_openings
from game.pdn import write_pdn
from play.settings import shipped_network

ANCHOR = "random"


def shipped_checkpoint() -> Path | None:
    """The network shipped with the project, if it is installed."""
    path = shipped_network()
    return path if path.is_file() else None


def random_init_checkpoint(directory: Path, seed: int) -> Path:
    """A randomly initialised network of the default model config, saved for the workers."""
    import torch

    from checkerzero.config import compose
    from checkerzero.network.checkpoint import save_checkpoint
    from checkerzero.network.model import CheckersNet, model_config

    cfg = compose(["run_dir=unused"])
    torch.manual_seed(seed)
    path = directory / "random_init.safetensors"
    save_checkpoint(path, CheckersNet(model_config(cfg.model, 8)), step=0, version=0)
    return path


def network_spec(path: Path, sims: int, device: str, *, time_ms: int = 0) -> str:
    """The match spec of the network at ``sims`` simulations, or ``time_ms`` ms per move."""
    spec = f"{path}:t{time_ms}" if time_ms else f"{path}:sims={sims}"
    return spec if device == "cpu" else f"{spec},device={device}"


def played(
    a: str,
    b: str,
    games: int,
    args: argparse.Namespace,
    log: list[MatchResult],
    label: str | None = None,
) -> MatchResult:
    """A match of specs ``a`` and ``b``, printed (``a`` as ``label``) and logged."""
    deck = load_openings("deck")
    start = time.perf_counter()
    result = run_match(
        a,
        b,
        deck,
        games=games,
        seed=args.seed,
        max_plies=args.max_plies,
        workers=args.workers,
        ray_mode=args.ray,
    )
    log.append(result)
    name = label or result.player_a
    elo = match_elo(result.wins, result.draws, result.losses)
    print(
        f"  {name:<16} {result.player_b:<10} +{result.wins:<3} ={result.draws:<3} "
        f"-{result.losses:<3} {100 * result.score:5.1f}%  Elo {elo.elo:+6.0f} "
        f"[{elo.elo_lower:+.0f}, {elo.elo_upper:+.0f}]  {time.perf_counter() - start:6.1f} s",
        flush=True,
    )
    return result


def play(
    a: str,
    b: str,
    games: int,
    args: argparse.Namespace,
    log: list[MatchResult],
    label: str | None = None,
) -> list[PairResult]:
    """A match of specs ``a`` and ``b``, printed; its games as PairResults (``a`` as ``label``)."""
    result = played(a, b, games, args, log, label)
    return pair_results(result.pairs, label or result.player_a, result.player_b)


def time_equal(
    checkpoint: Path, times_ms: list[int], args: argparse.Namespace
) -> list[MatchResult]:
    """The network at each time per move against minimax at the same time, printed as a table."""
    print(
        f"Time-equal: {checkpoint.name} (MCTS, one torch thread) against minimax (alpha-beta), "
        f"both at the same milliseconds per move; {args.games} games per time from the ACF deck, "
        f"colours reversed, seed {args.seed}"
    )
    log: list[MatchResult] = []
    rows = []
    for ms in times_ms:
        spec = network_spec(checkpoint, 0, args.device, time_ms=ms)
        result = played(spec, f"minimax:t{ms}", args.games, args, log, label=f"net:t{ms}")
        rows.append((ms, result))
    print(
        f"\n  {'ms/move':>7} {'games':>5}  {'W/D/L':<11} {'score':>6}  {'Elo':>5}  "
        f"{'95% interval':<14} {'net sims/move':>13}  {'minimax depth':>13} {'nodes/move':>11}"
    )
    for ms, result in rows:
        elo = result.elo()
        net, peer = result.search("a"), result.search("b")
        wdl = f"{result.wins}/{result.draws}/{result.losses}"
        print(
            f"  {ms:>7} {result.num_games:>5}  {wdl:<11} {100 * result.score:5.1f}%  "
            f"{elo.elo:>+5.0f}  [{elo.elo_lower:+.0f}, {elo.elo_upper:+.0f}]{'':<2} "
            f"{net.get('simulations', 0):>13,.0f}  {peer.get('depth', 0):>13.1f} "
            f"{peer.get('nodes', 0):>11,.0f}"
        )
    return log


def print_ratings(ratings: Ratings, budgets: dict[str, int]) -> None:
    print(
        f"\nFitted ratings (BayesElo draw model, {ANCHOR} = 0, draw_elo {ratings.draw_elo:.0f}, "
        f"first move {ratings.first_move_elo or 0:+.0f}):"
    )
    print(f"  {'player':<16} {'Elo':>6}  {'95% interval':<16} {'games':>5}  {'score':>6}")
    for p in sorted(ratings.players, key=lambda p: p.elo):
        interval = "anchor" if p.anchored else f"[{p.lower:+.0f}, {p.upper:+.0f}]"
        print(
            f"  {p.name:<16} {p.elo:>+6.0f}  {interval:<16} {p.games:>5}  "
            f"{100 * p.points / max(p.games, 1):5.1f}%"
        )
    if len(budgets) > 1:
        print("\nStrength against search budget:")
        print(f"  {'simulations':>11} {'Elo':>6}  {'95% interval':<16} {'gain':>6}")
        previous = None
        for name, sims in sorted(budgets.items(), key=lambda kv: kv[1]):
            p = ratings[name]
            gain = "" if previous is None else f"{p.elo - previous:+.0f}"
            print(f"  {sims:>11} {p.elo:>+6.0f}  [{p.lower:+.0f}, {p.upper:+.0f}]{'':<4} {gain:>6}")
            previous = p.elo


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="network (default: the shipped one)")
    parser.add_argument("--sims", type=int, default=100, help="simulations per decision")
    parser.add_argument("--budget", help="comma-separated simulation budgets, e.g. 16,64,256,1024")
    parser.add_argument(
        "--time-equal",
        type=int,
        nargs="+",
        metavar="MS",
        help="instead of the ladder: the network at MS ms per move against minimax:tMS, per MS",
    )
    parser.add_argument("--max-depth", type=int, default=4, choices=range(1, 9), metavar="1..8")
    parser.add_argument("--games", type=int, default=20, help="games per ladder player (even)")
    parser.add_argument(
        "--ladder-games", type=int, default=20, help="games between adjacent rungs (even)"
    )
    parser.add_argument("--max-plies", type=int, default=300)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--ray", choices=("auto", "on", "off"), default="auto", help="off: a process pool"
    )
    parser.add_argument("--device", default="cpu", help="network device: cpu, cuda, auto")
    parser.add_argument("--seed", type=int, default=0, help="opening order and random init")
    parser.add_argument("--out", type=Path, help="write games (PDN) and ratings (CSV) here")
    args = parser.parse_args(argv)
    budgets_list = (
        [int(x) for x in args.budget.split(",") if x.strip()] if args.budget else [args.sims]
    )
    if not budgets_list or min(budgets_list) < 1:
        parser.error("--budget needs positive simulation counts, e.g. 16,64,256")
    if args.time_equal is not None and min(args.time_equal) < 1:
        parser.error("--time-equal needs positive milliseconds per move, e.g. 100 1000")
    if args.time_equal is not None and args.budget:
        parser.error("--time-equal and --budget are separate tables: give one of them")
    for flag in ("games", "ladder_games"):
        if getattr(args, flag) <= 0 or getattr(args, flag) % 2:
            parser.error(f"--{flag.replace('_', '-')} must be a positive even number")

    started_ray = False
    if args.workers == 1:
        args.ray = "off"  # one worker: play in this process, nothing to start
    elif args.ray != "off":
        try:
            import ray

            from checkerzero.cluster.start import start_ray, stop_ray

            if not ray.is_initialized():
                # Started once here, so its workers (and their torch import) serve every match.
                start_ray("local", num_cpus=args.workers, log_to_driver=False)
                started_ray = True
        except ImportError:
            if args.ray == "on":
                parser.error("--ray on, but Ray is not installed")
            args.ray = "off"
    try:
        return run(args, budgets_list)
    finally:
        if started_ray:
            stop_ray()


def run(args: argparse.Namespace, budgets_list: list[int]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint or shipped_checkpoint()
        if checkpoint is None:
            checkpoint = random_init_checkpoint(Path(tmp), args.seed)
            print("No checkpoint given and none shipped: a RANDOMLY INITIALISED network plays.")
        elif not checkpoint.is_file():
            print(f"error: checkpoint {checkpoint} not found", file=sys.stderr)
            return 2
        if args.time_equal is not None:
            started = time.perf_counter()
            log = time_equal(checkpoint, args.time_equal, args)
            print(
                f"\n{sum(r.num_games for r in log)} games in {time.perf_counter() - started:.0f} s"
            )
            if args.out is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "games.pdn").write_text(
                    write_pdn(g for r in log for g in r.pdn_games())
                )
                print(f"wrote {args.out / 'games.pdn'}")
            return 0
        ladder = [ANCHOR] + [f"minimax:{d}" for d in range(1, args.max_depth + 1)]
        print(
            f"Network {checkpoint.name}, budgets {budgets_list}; ladder {ladder}; "
            f"{args.games} games per opponent from the ACF deck, seed {args.seed}"
        )
        results: list[PairResult] = []
        log: list[MatchResult] = []
        started = time.perf_counter()
        print(f"Ladder rungs ({args.ladder_games} games each):")
        results += rung_results(ladder, lambda a, b: played(a, b, args.ladder_games, args, log))
        budgets: dict[str, int] = {}
        for sims in budgets_list:
            spec = network_spec(checkpoint, sims, args.device)
            print(f"Network at {sims} simulations:")
            for opponent in ladder:
                label = f"net:sims={sims}"
                results += play(spec, opponent, args.games, args, log, label)
                budgets[label] = sims
        ratings = fit_ratings(results, {ANCHOR: 0.0}, first_move_advantage=True)
        print_ratings(ratings, budgets)
        print(f"\n{sum(r.num_games for r in log)} games in {time.perf_counter() - started:.0f} s")
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "games.pdn").write_text(write_pdn(g for r in log for g in r.pdn_games()))
            lines = ["player,elo,lower,upper,games,points"] + [
                f"{p.name},{p.elo:.1f},{p.lower:.1f},{p.upper:.1f},{p.games},{p.points:g}"
                for p in ratings.players
            ]
            (args.out / "ratings.csv").write_text("\n".join(lines) + "\n")
            print(f"wrote {args.out / 'games.pdn'} and {args.out / 'ratings.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
