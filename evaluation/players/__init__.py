"""Players: anything that picks a move, behind one protocol (``base``), named by one spec
grammar (``spec``) and built by ``make.make_player``: the alpha-beta players (``alphabeta``),
the MCTS players of a network or none (``network``, the player itself in ``mcts``), a network's
policy without search (``policy``), their search defaults (``defaults``), the endgame database at
play (``endgame``) and the opening book they read (``book``). Imports only evaluation.stats."""
