"""Checks at start that a run can work where it is started, before any actor is spawned.

`checkerzero.config.validate` rejects values that are wrong anywhere; these checks reject values
that are wrong *here*: on this machine, with this environment, on this Ray cluster. Each problem is
one line naming the key and the way out, so a cluster run fails in its first seconds instead of
idling for minutes:

- W&B online with no API key (neither ``WANDB_API_KEY`` nor a netrc entry): W&B would fail or
  prompt, and the run would go on without the metrics the user asked for.
- A CUDA device asked of a CPU-only PyTorch build (``learner.device``), or CUDA self-play
  (``selfplay.device=cuda``) on a cluster with no GPU.
- A replay store on loopback (a ``127.0.0.1``/``localhost`` URL, or the private embedded Redis
  that ``preset=cluster`` starts when ``CHECKERZERO_REDIS_URL`` is unset) while the Ray cluster
  spans several machines: actors on the other machines would find no Redis at that address.
  A machine that joins later (`another_machine` than the head) gets no actors from the pool.
"""

from __future__ import annotations

import ipaddress
import logging
import netrc
import os
import socket
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from checkerzero.secrets import SecretError, export_wandb_key, read_secret

logger = logging.getLogger(__name__)

WANDB_DEFAULT_HOST = "api.wandb.ai"  # where `wandb login` stores the key in ~/.netrc


class PreflightError(RuntimeError):
    """The run cannot work as configured here; the message is one line saying why and how."""


# ---- before Ray: this process and its environment -----------------------------------------
def check_environment(cfg: DictConfig, environ: Mapping[str, str] | None = None) -> None:
    """W&B key, the learner's device, the self-play device keys; raises PreflightError."""
    env = os.environ if environ is None else environ
    mode = cfg.logging.wandb.mode
    try:  # secrets given as files are read now: a bad one stops the run before anything starts
        if environ is None:
            export_wandb_key()
        password_env = OmegaConf.select(cfg, "replay.password_env", default=None)
        if password_env:
            read_secret(str(password_env), env)
    except SecretError as err:
        raise PreflightError(str(err)) from None
    if mode == "online" and not wandb_key_available(env):
        raise PreflightError(
            "logging.wandb.mode=online but no W&B API key is configured: set WANDB_API_KEY_FILE "
            "or WANDB_API_KEY (or run `wandb login`), or run with logging.wandb.mode=offline"
        )
    sp = cfg.selfplay
    if sp.device not in ("auto", "cpu", "cuda"):
        raise PreflightError(f"selfplay.device={sp.device}: use auto, cpu or cuda")
    if not (isinstance(sp.gpus_per_actor, int | float) and 0 < sp.gpus_per_actor <= 1):
        raise PreflightError(
            f"selfplay.gpus_per_actor={sp.gpus_per_actor}: a share of one GPU, in (0, 1]"
        )
    ev = cfg.evaluation
    ev_device = str(ev.device)
    if ev_device not in ("auto", "cpu") and not ev_device.startswith("cuda"):
        raise PreflightError(f"evaluation.device={ev_device}: use auto, cpu or cuda")
    ev_gpus = OmegaConf.select(cfg, "evaluation.gpus", default=None)  # None: saved before it
    if ev_gpus is not None and not (isinstance(ev_gpus, int | float) and 0 < ev_gpus <= 1):
        raise PreflightError(f"evaluation.gpus={ev_gpus}: a share of one GPU, in (0, 1]")
    device = str(cfg.learner.device)
    if device.startswith("cuda") and not torch_has_cuda():
        raise PreflightError(
            f"learner.device={device} but this PyTorch is a CPU-only build ({torch_version()}): "
            "install the CUDA build (CHECKERZERO_TORCH=cuda bash scripts/setup.sh) or set "
            "learner.device=cpu"
        )


def wandb_key_available(environ: Mapping[str, str]) -> bool:
    """An API key in the environment, or a netrc entry for the W&B host."""
    try:
        if (read_secret("WANDB_API_KEY", environ) or "").strip():
            return True
    except SecretError:
        pass  # an empty key file: no key
    host = urllib.parse.urlsplit(environ.get("WANDB_BASE_URL", "")).hostname or WANDB_DEFAULT_HOST
    path = Path(environ.get("NETRC") or Path.home() / ".netrc")
    if not path.is_file():
        return False
    try:
        entry = netrc.netrc(str(path)).authenticators(host)
    except (netrc.NetrcParseError, OSError) as e:
        logger.warning("could not read %s for a W&B key: %s", path, e)
        return False
    return bool(entry and entry[2])


def torch_has_cuda() -> bool:
    import torch  # the learner imports it next anyway; here only when a CUDA device is asked

    return torch.version.cuda is not None


def torch_version() -> str:
    import torch

    return torch.__version__


# ---- after joining Ray: the cluster --------------------------------------------------------
def check_cluster(cfg: DictConfig, url: str | None, nodes: Iterable[Mapping[str, Any]]) -> None:
    """The replay store is reachable from every node, and CUDA self-play has GPUs; raises
    PreflightError. ``url`` is the configured replay URL, None for the private embedded Redis
    (which listens on this machine's loopback only)."""
    alive = [n for n in nodes if n.get("Alive")]
    machines = {n.get("NodeManagerAddress") for n in alive}
    if len(machines) > 1 and (url is None or is_loopback_url(url)):
        where = "the private redis-server (127.0.0.1)" if url is None else f"replay.url {url}"
        raise PreflightError(
            f"the Ray cluster spans {len(machines)} machines but the replay store is "
            f"{where}, which only this machine reaches: set CHECKERZERO_REDIS_URL "
            "(replay.url) to a Redis every node can reach"
        )
    gpus = sum(float(n.get("Resources", {}).get("GPU", 0)) for n in alive)
    if cfg.selfplay.device == "cuda" and gpus == 0:
        raise PreflightError(
            "selfplay.device=cuda but no node of the Ray cluster has a GPU: use "
            "selfplay.device=auto (CUDA where a node has one) or cpu"
        )
    ev_device = str(cfg.evaluation.device)
    if cfg.evaluation.enabled and ev_device.startswith("cuda") and gpus == 0:
        raise PreflightError(
            f"evaluation.device={ev_device} but no node of the Ray cluster has a GPU: use "
            "evaluation.device=auto (a GPU share where the learner's node has one) or cpu"
        )


def another_machine(head: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether `node` runs on another machine than `head` (`ray.nodes()` entries, told apart
    by address, as `check_cluster` counts machines): it cannot reach the head's loopback."""
    return node.get("NodeManagerAddress") != head.get("NodeManagerAddress")


def is_loopback_url(url: str) -> bool:
    """Whether `url` names this machine only: a unix socket, localhost or a loopback address."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "unix":
        return True
    host = parts.hostname or "localhost"
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:  # a name: loopback if every address it resolves to is
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False  # unresolvable here; the connection attempt reports it
    addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    return bool(addresses) and all(a.is_loopback for a in addresses)
