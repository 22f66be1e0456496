"""The other ways to learn checkers, as yardsticks for self-play.

- ``baseline_training.supervised``: the project's network trained on expert games (the OCA
  archive), the expert's move as the policy target and the game's result as the value target.
- ``baseline_training.dqn``: a deep Q-learning agent (experience replay, a target network,
  epsilon-greedy exploration) trained by self-play generations and against the minimax ladder.

Both save checkpoints in the learner's format, so ``python -m evaluation.match`` plays them and
``python -m learner learner.init_weights=<checkpoint>`` starts self-play from one. Nothing in
``game``, ``learner``, ``actors`` or ``evaluation`` imports this package.
"""
