"""Every Redis key of a run, named once: writers and readers build keys only through here.

With ``<ns>`` the run's namespace (``replay.namespace``). The replay store's keys carry it in
braces, a hash tag, so a Redis Cluster keeps every key of one store in one slot (its Lua scripts
need that).

Replay store (``checkerzero.store.replay``; written by actors, read by the learner):

==============================  ===========================================================
``{<ns>}:game:<id>``            the record bytes of game ``<id>`` (ids consecutive from 1)
``{<ns>}:staging:<uuid>``       a record on its way in (written and renamed in one MULTI)
``{<ns>}:lengths``              list of the window's game lengths (positions), oldest first
``{<ns>}:meta``                 hash: first_id, last_id, window_positions, games_added,
                                positions_added
==============================  ===========================================================

Weights channel (``checkerzero.store.weights``; the learner publishes, the evaluator promotes,
actors and the evaluator read):

==============================  ===========================================================
``<ns>:weights:<version>``      the checkpoint bytes of each published version (the newest
                                ``KEEP_VERSIONS``)
``<ns>:weights:meta:<version>`` JSON: where the run stood at publication (step, positions, t)
``<ns>:weights:latest``         the newest version the learner published
``<ns>:weights:best``           the version the gate promoted; ``best_data`` its bytes
==============================  ===========================================================

Self-play (``actors``; the learner's actor pool reads the counters):

==============================  ===========================================================
``<ns>:selfplay:stats``         hash: games, positions, evaluations, ... summed over actors
``<ns>:selfplay:games_by_node`` hash: Ray node id -> games its actors stored
``<ns>:selfplay:starts``        counter: actor starts, which seeds each start differently
``<ns>:selfplay:actor_starts``  hash: ``<pool>:<actor_id>`` -> times that actor's process
                                started (Ray restarts a dead one); ``<pool>`` names one
                                learner process's actor pool
``<ns>:live:<actor_id>``        JSON: the game that actor plays now, expiring
                                (``checkerzero.store.live``)
==============================  ===========================================================

Evaluator (``evaluation``; the learner reads ``latest`` and ``decisions``):

==============================  ===========================================================
``<ns>:eval:results``           list, one JSON ``PairResult`` row per (match, first mover):
                                every gate, ladder and rung game ever finished
``<ns>:eval:decisions``         list, one JSON gate decision per candidate (GateDecision
                                fields + candidate, best, promoted)
``<ns>:eval:latest``            hash, the newest metrics for the learner to log
                                (``evaluation.evaluator.records.read_eval_metrics``)
``<ns>:eval:done``              hash, finished units of work (``gate:V`` -> accept/reject,
                                ``ladder:V:SPEC``, ``rungs``) and ``last_version``
``<ns>:eval:gate:V:B``          list, the pairs of the unfinished gate of V against best B
                                (a restart resumes the test where it stopped)
``<ns>:eval:ladder``            hash, the rungs' ratings, fixed once they were played
``<ns>:eval:versions``          hash, version -> JSON {step, positions, t}: where each rated
                                candidate stands in the run (the Elo curve's x axes)
==============================  ===========================================================

Labelled positions of the fast player's evaluation (``checkerzero.store.positions``; alpha-beta
self-play actors write, the learner drains them into Parquet shards):

==============================  ===========================================================
``<ns>:nneval:positions``       list, one item per accepted game: an 8-byte sequence number
                                then its new positions' rows (``POSITION_DTYPE``), oldest first
``<ns>:nneval:seen``            bitmap, the run-wide deduplication (Bloom) filter
``<ns>:nneval:meta``            hash: generation, target, pushed, drained, positions, games,
                                duplicates, stale, next_game, best (evaluation version)
``<ns>:nneval:eval:<version>``  the bytes of each published evaluation file
==============================  ===========================================================

An evaluator unit's results and its ``done`` mark are written in one transaction, so a unit is
either recorded once or replayed whole.
"""

from __future__ import annotations

# --- the replay store ------------------------------------------------------------------------


def replay_game_prefix(namespace: str) -> str:
    """``replay_game_prefix(ns) + str(id)`` is game ``id``'s key."""
    return f"{{{namespace}}}:game:"


def replay_staging_prefix(namespace: str) -> str:
    return f"{{{namespace}}}:staging:"


def replay_lengths_key(namespace: str) -> str:
    return f"{{{namespace}}}:lengths"


def replay_meta_key(namespace: str) -> str:
    return f"{{{namespace}}}:meta"


# --- the weights channel ---------------------------------------------------------------------


def weights_key(namespace: str, name: str | int) -> str:
    """``name``: a version, ``meta:<version>``, ``latest``, ``best`` or ``best_data``."""
    return f"{namespace}:weights:{name}"


# --- self-play -------------------------------------------------------------------------------


def selfplay_stats_key(namespace: str) -> str:
    return f"{namespace}:selfplay:stats"


def selfplay_games_by_node_key(namespace: str) -> str:
    """A hash: Ray node id -> games its actors stored."""
    return f"{namespace}:selfplay:games_by_node"


def selfplay_starts_key(namespace: str) -> str:
    return f"{namespace}:selfplay:starts"


def selfplay_actor_starts_key(namespace: str) -> str:
    return f"{namespace}:selfplay:actor_starts"


def live_key(namespace: str, actor_id: int) -> str:
    return f"{namespace}:live:{actor_id}"


def live_pattern(namespace: str) -> str:
    """The SCAN pattern matching every actor's live key."""
    return f"{namespace}:live:*"


# --- the evaluator ---------------------------------------------------------------------------


def results_key(namespace: str) -> str:
    return f"{namespace}:eval:results"


def decisions_key(namespace: str) -> str:
    return f"{namespace}:eval:decisions"


def latest_key(namespace: str) -> str:
    return f"{namespace}:eval:latest"


def done_key(namespace: str) -> str:
    return f"{namespace}:eval:done"


def gate_pairs_key(namespace: str, version: int, best: int) -> str:
    return f"{namespace}:eval:gate:{version}:{best}"


def ladder_key(namespace: str) -> str:
    return f"{namespace}:eval:ladder"


def versions_key(namespace: str) -> str:
    return f"{namespace}:eval:versions"


# --- the fast player's labelled positions --------------------------------------------------


def nneval_positions_key(namespace: str) -> str:
    return f"{namespace}:nneval:positions"


def nneval_seen_key(namespace: str) -> str:
    return f"{namespace}:nneval:seen"


def nneval_meta_key(namespace: str) -> str:
    return f"{namespace}:nneval:meta"


def nneval_eval_key(namespace: str, version: int) -> str:
    return f"{namespace}:nneval:eval:{version}"
