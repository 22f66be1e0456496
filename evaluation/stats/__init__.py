"""Statistics of games: Elo of one match and its interval (``elo``), ratings of many players
fitted with BayesElo's draw model (``fit``, its likelihood in ``likelihood``), and the gate's
sequential test (``sprt``). The lowest room of evaluation/: it imports no other."""
