"""Where the self-play actors go: one per free core, or a kept count, and GPU shares first."""

from __future__ import annotations

import pytest

from actors.pool import ActorPool, Slots, plan_placement
from checkerzero.store.keys import selfplay_actor_starts_key


def node(nid: str, cpus: float, gpus: float = 0, alive: bool = True) -> dict:
    resources = {"CPU": cpus} | ({"GPU": gpus} if gpus else {})
    return {"NodeID": nid, "Alive": alive, "Resources": resources}


def test_one_actor_per_free_core_on_every_node_the_head_keeps_one():
    nodes = [node("head", 4), node("a", 8), node("b", 2), node("dead", 8, alive=False)]
    plan = plan_placement(nodes, None, "head")
    assert plan == {"head": Slots(cpu=3), "a": Slots(cpu=8), "b": Slots(cpu=2)}


def test_a_count_is_spread_in_proportion_to_free_cores():
    nodes = [node("head", 2), node("a", 7), node("b", 2)]  # free cores 1, 7, 2
    plan = plan_placement(nodes, 20, "head")
    assert {nid: s.total for nid, s in plan.items()} == {"head": 2, "a": 14, "b": 4}
    plan = plan_placement(nodes, 3, "head")
    assert sum(s.total for s in plan.values()) == 3 and plan["a"].total >= 2


def test_auto_puts_gpu_shares_first_and_the_other_cores_on_cpu():
    nodes = [node("head", 2), node("gpu", 16, gpus=1), node("cpu", 8)]
    plan = plan_placement(nodes, None, "head", device="auto", gpus_per_actor=0.25)
    assert plan["gpu"] == Slots(cpu=12, gpu=4)  # 1 / 0.25 actors share the GPU
    assert plan["cpu"] == Slots(cpu=8) and plan["head"] == Slots(cpu=1)
    # A share that does not divide one exactly still counts whole actors.
    plan = plan_placement(nodes, None, "head", device="auto", gpus_per_actor=0.3)
    assert plan["gpu"] == Slots(cpu=13, gpu=3)


def test_a_gpu_share_held_on_the_head_leaves_fewer_gpu_actors_there():
    nodes = [node("head", 16, gpus=1), node("gpu", 16, gpus=1)]
    plan = plan_placement(
        nodes, None, "head", device="auto", gpus_per_actor=0.25, head_reserved_gpus=0.2
    )
    assert plan["head"] == Slots(cpu=12, gpu=3)  # 0.8 of the GPU: 3 actors of 0.25
    assert plan["gpu"] == Slots(cpu=12, gpu=4)  # only the head's GPU holds the evaluator
    plan = plan_placement(
        nodes, None, "head", device="cuda", gpus_per_actor=0.2, head_reserved_gpus=0.2
    )
    assert plan["head"] == Slots(gpu=4) and plan["gpu"] == Slots(gpu=5)  # the gpu preset


def test_cuda_uses_gpu_shares_only_and_needs_a_gpu():
    nodes = [node("head", 2), node("gpu", 16, gpus=2), node("cpu", 8)]
    plan = plan_placement(nodes, None, "head", device="cuda", gpus_per_actor=0.5)
    assert plan == {"head": Slots(), "gpu": Slots(gpu=4), "cpu": Slots()}
    with pytest.raises(RuntimeError, match="no alive Ray node has a GPU"):
        plan_placement([node("head", 2), node("cpu", 8)], None, "head", device="cuda")


def test_cpu_ignores_gpus_and_a_one_core_machine_still_plays():
    plan = plan_placement([node("head", 4, gpus=1)], None, "head", device="cpu")
    assert plan == {"head": Slots(cpu=3)}
    assert plan_placement([node("head", 1)], None, "head") == {"head": Slots(cpu=1)}
    with pytest.raises(RuntimeError, match="no Ray node with CPUs"):
        plan_placement([node("head", 0)], None, "head")


def test_a_pool_takes_its_start_counts_out_of_the_store(config, client):
    """Each learner start counts its actors' process starts under its own run token; at the
    run's end (the learner's wind-down) the pool removes them, so a store kept across many runs
    does not gather them forever."""
    cfg = config()
    pool = ActorPool(cfg, "redis://127.0.0.1:1", None, client)
    key = selfplay_actor_starts_key(cfg.replay.namespace)
    client.hincrby(key, f"{pool._run_token}:0", 1)
    client.hincrby(key, f"{pool._run_token}:1", 2)  # restarted once by Ray
    client.hincrby(key, "another-run:0", 1)
    assert pool.process_restarts() == 1
    pool.stop(timeout_s=0.0)
    pool.forget_starts()
    assert client.hgetall(key) == {b"another-run:0": b"1"}
    assert pool.process_restarts() == 0
    pool.forget_starts()  # twice, and with nothing left: no error
