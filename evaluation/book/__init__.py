"""Building opening books: ``python -m evaluation.book build|show``.

The book itself (its file format, reading it, looking a position up) is
:mod:`evaluation.players.book`, a part of the players; this room holds only what builds one
(:mod:`evaluation.book.build`) and its command line (:mod:`evaluation.book.__main__`).
"""
