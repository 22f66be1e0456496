"""The learner's terminal: short lines, and the actors' output kept in the log file only."""

from __future__ import annotations

import io
import logging
import time

import pytest

from learner.terminal import (
    ACTORS_LOGGER,
    TerminalFormatter,
    route_actor_logs,
    setup_terminal,
)


def record(name: str, level: int, message: str) -> logging.LogRecord:
    r = logging.LogRecord(name, level, __file__, 1, message, None, None)
    r.created = time.mktime((2026, 11, 29, 3, 4, 5, 0, 0, -1))
    return r


def test_terminal_lines_are_short_and_warnings_name_their_source():
    fmt = TerminalFormatter()
    assert fmt.format(record("learner.run", logging.INFO, "0m12s  pos 20/s")) == (
        "03:04:05 0m12s  pos 20/s"
    )
    assert fmt.format(record("actors.pool", logging.WARNING, "an actor died")) == (
        "03:04:05 WARNING actors.pool: an actor died"
    )


@pytest.mark.parametrize("to_terminal", [False, True])
def test_internals_reach_the_file_and_the_terminal_only_when_asked(tmp_path, to_terminal):
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    terminal = io.StringIO()
    log_file = logging.FileHandler(tmp_path / "learner.log")
    root.handlers = [logging.StreamHandler(terminal), log_file]
    root.setLevel(logging.INFO)
    try:
        setup_terminal(root, to_terminal)
        logging.getLogger("learner.run").info("0m12s  pos 20/s")
        logging.getLogger(ACTORS_LOGGER).info("(SelfPlayActor pid=7) backend eager")
        logging.getLogger("ray.worker").info("Started a local Ray instance.")
        logging.getLogger(ACTORS_LOGGER).error("(Evaluator pid=8) it failed")
    finally:
        root.handlers, _ = saved
        root.setLevel(saved[1])
        log_file.close()
    shown = terminal.getvalue()
    kept = (tmp_path / "learner.log").read_text()
    for line in ("0m12s", "backend eager", "Started a local Ray", "it failed"):
        assert line in kept
    assert "0m12s  pos 20/s" in shown and "it failed" in shown  # errors always show
    for line in ("backend eager", "Started a local Ray"):
        assert (line in shown) is to_terminal


def test_a_ray_actors_output_becomes_a_record_of_the_actors_logger(caplog):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=True)
    try:
        assert route_actor_logs()

        @ray.remote
        class Talker:
            def say(self, text: str) -> int:
                print(text, flush=True)
                return 1

        with caplog.at_level(logging.INFO, logger=ACTORS_LOGGER):
            talker = Talker.remote()
            assert ray.get(talker.say.remote("hello from the actor"), timeout=60) == 1
            deadline = time.monotonic() + 30
            while "hello from the actor" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.2)
        lines = [r.getMessage() for r in caplog.records if r.name == ACTORS_LOGGER]
        assert any(
            line.startswith("(Talker pid=") and line.endswith(") hello from the actor")
            for line in lines
        ), lines
    finally:
        ray.shutdown()
