"""Play, analyse and watch: a browser board, a JSON API and an analysis engine over a network.

``python -m play`` serves the page and the API (FastAPI + uvicorn, loopback by default);
``python -m play.engine`` answers analysis queries as JSON lines on stdin/stdout;
``python -m play.cli`` is a board in the terminal.
"""
