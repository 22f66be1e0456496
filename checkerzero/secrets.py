"""Secrets from the environment, preferring files: ``NAME_FILE`` (a Docker or Kubernetes secret
mounted as a file) over ``NAME`` itself.

Every deploy path hands the Redis password and the W&B key over as files (docker/compose.yaml,
deploy/), so that no secret sits in a container's environment, where anyone who can run code on
the node reads it; ``NAME`` alone is for a run started by hand.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

FILE_SUFFIX = "_FILE"  # NAME_FILE names the file that holds NAME's value
MAX_SECRET_BYTES = 4096  # a password or an API key; a bigger file is the wrong file


class SecretError(ValueError):
    """A secret's file is missing, unreadable, empty or not a secret; the message names it."""


def read_secret(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The value of secret ``name``: the contents of the file named by ``NAME_FILE`` when that is
    set (a trailing newline dropped), else ``NAME``, else None."""
    environ = os.environ if environ is None else environ
    path = environ.get(name + FILE_SUFFIX)
    if not path:
        return environ.get(name) or None
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SECRET_BYTES + 1)
    except OSError as err:
        raise SecretError(f"{name}{FILE_SUFFIX}={path}: {err.strerror or err}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise SecretError(
            f"{name}{FILE_SUFFIX}={path}: over {MAX_SECRET_BYTES} bytes: not a secret"
        )
    try:
        value = data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise SecretError(f"{name}{FILE_SUFFIX}={path}: not UTF-8 text") from None
    if not value.strip():
        raise SecretError(f"{name}{FILE_SUFFIX}={path} is empty")
    return value


def export_wandb_key(environ: MutableMapping[str, str] | None = None) -> None:
    """W&B reads its key from ``WANDB_API_KEY`` only: a key given as a file is handed to this
    process's environment (not to the cluster's), once, before W&B starts. An empty file means
    no key (logging offline)."""
    environ = os.environ if environ is None else environ
    if environ.get("WANDB_API_KEY") or not environ.get("WANDB_API_KEY" + FILE_SUFFIX):
        return
    try:
        key = read_secret("WANDB_API_KEY", environ)
    except SecretError as err:
        if "is empty" in str(err):
            return
        raise
    if key:
        environ["WANDB_API_KEY"] = key
