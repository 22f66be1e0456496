"""Games and matches between players: what a match leaves (``records``), games and colour-
reversed pairs in this process (``games``), matches over worker processes or Ray
(``workers``), a match's journal that lets it resume (``journal``), and the gate's match that
plays until the SPRT decides (``gate``). Imports the players and the statistics below it."""
