"""The library every process of a run shares, below the processes themselves.

- ``checkerzero.network``: the network (``model``), batched inference (``inference``), compute
  precision and the network file format (``checkpoint``).
- ``checkerzero.store``: what travels through Redis: the replay store, the weights channel, the
  live game, the evaluator's keys and the private ``redis-server``.
- ``checkerzero.cluster``: starting Ray (and the watcher that ends a local one with its
  driver), the supervisor of a Ray actor's loop, the cluster's preflight.
- ``checkerzero.config``: composing and validating the Hydra config (``conf/``).
- ``checkerzero.metrics`` (the metrics log, plots, W&B) and ``checkerzero.revision`` (the
  code's git revision).

It imports ``game`` and nothing else of the project; ``actors``, ``evaluation``, ``learner``,
``play`` and ``baseline_training`` import it (docs/architecture.md).
"""
