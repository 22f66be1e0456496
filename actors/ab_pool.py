"""The alpha-beta self-play pool: `actors.pool.ActorPool`'s placement with the fast player's actors.

The placement is the MCTS pool's own (`plan_placement`: one actor per free core on every node,
the head keeping one for the learner, nodes that join later included, nodes that leave
forgotten); only what is spawned differs: an `ABSelfPlayActor` on one core, no GPU and no
inference server (the alpha-beta evaluates its small network on the CPU inside its search).
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.ab_selfplay import ABSelfPlayActor
from actors.pool import ActorPool, Member
from checkerzero.cluster.supervisor import RunLoop


def pool_config(cfg: DictConfig) -> DictConfig:
    """The run's config as the pool reads it: CPU actors, as many as ``nneval.selfplay.actors``
    (null: one per free core on every node), no inference servers."""
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    OmegaConf.set_struct(out, False)
    out.selfplay.device = "cpu"
    out.selfplay.actors = cfg.nneval.selfplay.actors
    out.selfplay.inference_server = {"enabled": False}
    return out


class ABActorPool(ActorPool):
    """Alpha-beta self-play actors placed and supervised as the MCTS ones are."""

    def __init__(self, cfg: DictConfig, url: str, password: str | None, client: Any) -> None:
        super().__init__(pool_config(cfg), url, password, client)

    def _spawn(
        self, node_id: str, device: str, cpu_share: float, server: str | None = None
    ) -> None:
        actor = ABSelfPlayActor.options(
            num_cpus=cpu_share,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self._container, self._next_id, self.url, self.password)
        loop = RunLoop(actor, f"alpha-beta self-play actor {self._next_id}")
        self.members[self._next_id] = Member(loop, self._next_id, node_id, "cpu", None)
        self._next_id += 1

    def metrics(self) -> dict[str, float]:
        return {"selfplay/actors": float(self.size), "selfplay/nodes": float(self.nodes)}
