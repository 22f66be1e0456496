"""The evaluator: the process that gates each candidate network against the best and rates it
on the ladder while a run trains. ``worker`` holds the loop and maps its parts; ``actor`` is its
Ray shell. The top room of evaluation/ (only the command lines sit above it)."""
