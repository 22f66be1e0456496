"""The Elo ladder: its rungs' games and fits (``rungs``), the rated table and its game counts
(``table``), how many pairs an interval needs and which rung comes next (``plan``), and the
ratings' files and curve (``report``). Its command line is ``python -m evaluation.rate_ladder``."""
