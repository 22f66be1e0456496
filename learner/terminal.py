"""What the learner's terminal shows, and what only its log file keeps.

The terminal gets the learner's own lines, short: ``HH:MM:SS message`` (a warning or an error
names its level and logger too), so that a progress line fits 120 characters. Everything also
goes to the run's ``learner.log`` with the full time stamp and the logger's name.

The internals stay in ``learner.log`` unless ``logging.actors_to_terminal`` is true:

- the lines Ray's actors print (self-play actors, the evaluator's rating fits, backends), which
  Ray would otherwise copy to the driver's terminal with an ``(Actor pid=...)`` prefix: they are
  passed to the ``learner.actors`` logger instead (``route_actor_logs``);
- Ray's own driver lines (``ray`` loggers: "Started a local Ray instance", ...).
"""

from __future__ import annotations

import logging
from typing import Any

ACTORS_LOGGER = "learner.actors"  # the actors' lines, as Ray hands them to the driver
QUIET_PREFIXES = (ACTORS_LOGGER, "ray")  # loggers kept off the terminal unless asked
TERMINAL_TIME = "%H:%M:%S"


class TerminalFormatter(logging.Formatter):
    """``HH:MM:SS message`` for information, ``HH:MM:SS WARNING name: message`` above it."""

    def __init__(self) -> None:
        super().__init__(datefmt=TERMINAL_TIME)

    def format(self, record: logging.LogRecord) -> str:
        stamp = self.formatTime(record, self.datefmt)
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            message = f"{message}\n{record.exc_text}"
        if record.levelno >= logging.WARNING:
            return f"{stamp} {record.levelname} {record.name}: {message}"
        return f"{stamp} {message}"


class QuietOnTerminal(logging.Filter):
    """Drops the internals' records (``QUIET_PREFIXES``) below ERROR from the terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        return not any(record.name == p or record.name.startswith(p + ".") for p in QUIET_PREFIXES)


def terminal_handlers(root: logging.Logger) -> list[logging.Handler]:
    """The root's handlers that write to a terminal stream (not files)."""
    return [
        h
        for h in root.handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)
    ]


def setup_terminal(root: logging.Logger, actors_to_terminal: bool) -> None:
    """The root's terminal handlers get the short format and, unless ``actors_to_terminal``,
    the filter that keeps the internals in the log file only. Ray's loggers are made to pass
    their records to the root (their own terminal handler removed), so the file keeps them."""
    for handler in terminal_handlers(root):
        handler.setFormatter(TerminalFormatter())
        if not actors_to_terminal:
            handler.addFilter(QuietOnTerminal())
    quiet_ray_loggers()


def quiet_ray_loggers() -> None:
    """Ray's ``ray`` logger writes to its own stderr handler and does not propagate: its
    records go to the root instead (terminal filtered, learner.log kept). Called again after
    ``ray.init``, which sets its logging up anew."""
    ray_logger = logging.getLogger("ray")
    for handler in list(ray_logger.handlers):
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            ray_logger.removeHandler(handler)
    ray_logger.propagate = True


def _actor_lines(data: dict[str, Any]) -> None:
    """One batch of an actor's output lines, logged as ``(name pid=N) line``. Of Ray's
    autoscaler only its events are kept, as Ray's own printer does."""
    log = logging.getLogger(ACTORS_LOGGER)
    name = data.get("actor_name") or data.get("task_name") or "worker"
    lines = data.get("lines", [])
    if data.get("pid") == "autoscaler":
        try:
            from ray._private.worker import filter_autoscaler_events
        except ImportError:
            return
        lines = list(filter_autoscaler_events(lines))
    for line in lines:
        if line.strip():
            # Info whichever stream: an actor's logging writes every level to stderr, and the
            # line carries its own level.
            log.info("(%s pid=%s) %s", name, data.get("pid"), line.rstrip())


def route_actor_logs() -> bool:
    """Ray copies its actors' output to the driver's stdout and stderr; this hands it to the
    ``learner.actors`` logger instead. False (Ray's default kept) when this Ray has no such
    hook (its private dispatcher changed) or does not copy actors' output at all."""
    quiet_ray_loggers()
    try:
        from ray._private.worker import global_worker_stdstream_dispatcher as dispatcher
    except ImportError:
        return False
    handlers = getattr(dispatcher, "handlers", None)  # a list of (name, handler) pairs
    if not isinstance(handlers, list) or "ray_print_logs" not in [pair[0] for pair in handlers]:
        return False
    dispatcher.remove_handler("ray_print_logs")
    dispatcher.add_handler("ray_print_logs", _actor_lines)
    return True


__all__ = [
    "ACTORS_LOGGER",
    "QuietOnTerminal",
    "TerminalFormatter",
    "quiet_ray_loggers",
    "route_actor_logs",
    "setup_terminal",
]
