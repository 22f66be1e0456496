"""The configs themselves: every group composes, instantiates, and bad input fails early."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from checkerzero.config import ConfigError, validate
from checkerzero.network.model import CheckersNet, ModelConfig, model_config
from game.encoding import NUM_PLANES

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("preset", ["laptop", "smoke", "cluster", "gpu"])
def test_every_preset_composes_and_validates(config, preset):
    cfg = config(f"preset={preset}")
    validate(cfg)
    assert cfg.game.size == 8
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves


@pytest.mark.parametrize("preset", ["cluster", "gpu"])
def test_the_gpu_presets_put_the_evaluator_on_the_heads_gpu_where_it_has_one(config, preset):
    """A gate or ladder on one CPU thread falls behind a GPU learner; a head without a GPU keeps
    the evaluator on a core, and the laptop default stays on CPU."""
    from evaluation.evaluator.actor import evaluator_gpus

    evaluation = OmegaConf.to_container(config(f"preset={preset}").evaluation, resolve=True)
    assert evaluator_gpus(evaluation, node_gpus=1) == evaluation["gpus"] > 0
    assert evaluator_gpus(evaluation, node_gpus=0) == 0.0
    laptop = OmegaConf.to_container(config("preset=laptop").evaluation, resolve=True)
    assert evaluator_gpus(laptop, node_gpus=1) == 0.0


def test_groups_instantiate_into_working_objects(config):
    cfg = config("preset=smoke")
    net = CheckersNet(model_config(cfg.model, cfg.game.size))
    opt = instantiate(cfg.learner.optimizer)(net.parameters())
    sched = instantiate(cfg.learner.scheduler)(opt)
    assert (
        isinstance(opt, torch.optim.SGD) and opt.param_groups[0]["lr"] == cfg.learner.optimizer.lr
    )
    assert isinstance(sched, torch.optim.lr_scheduler.MultiStepLR)
    logits, wdl = net(torch.zeros(2, cfg.model.in_planes, 8, 8))
    assert logits.shape == (2, 128) and wdl.shape == (2, 3)


def test_small_board_group_switches_the_board(config):
    cfg = config("game=small")  # model.board_size follows game.size
    validate(cfg)
    net = CheckersNet(model_config(cfg.model, cfg.game.size))
    assert net(torch.zeros(1, cfg.model.in_planes, 6, 6))[0].shape == (1, 72)


def test_the_8x8_board_rates_on_the_shipped_ladder_and_6x6_rates_its_rungs_in_run(config):
    from evaluation.evaluator.settings import EvalSettings

    big = EvalSettings.from_config(config())
    assert big.ladder_table == "package" and big.table is not None
    assert big.ladder[-1] == "minimax:8" and "noisy:0.65:minimax:1" in big.ladder
    small = EvalSettings.from_config(config("game=small"))
    assert small.size == 6 and small.ladder_table is None and small.table is None
    assert small.rung_pairs > 0 and small.ladder == (
        "random",
        *(f"minimax:{d}" for d in (1, 2, 3, 4)),
    )
    # asked for on 6x6, the table is refused with the reason, not silently dropped
    with pytest.raises(ValueError, match=r"evaluation.ladder_table='package'.*8x8.*game.size is 6"):
        EvalSettings.from_config(config("game=small", "evaluation=rated"))
    assert EvalSettings.from_config(config("evaluation=default")).table is None


def test_unknown_key_is_rejected_by_hydra(config):
    with pytest.raises(ConfigError, match=r"mcts\.simulationz") as info:
        config("mcts.simulationz=3")
    assert isinstance(info.value.__cause__, ConfigCompositionException)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("game.size=7", "game.size"),
        ("learner.batch_size=0", "learner.batch_size"),
        ("replay.window_positions=-5", "replay.window_positions"),
        ("logging.wandb.mode=sometimes", "logging.wandb.mode"),
        ("model.board_size=6", "model.board_size"),
        ("learner.ema_decay=1.0", "learner.ema_decay"),
        ("learner.ema_decay=-0.5", "learner.ema_decay"),
        ("learner.moves_left_weight=-1", "learner.moves_left_weight"),
        ("model.moves_left_head=maybe", "model.moves_left_head"),
        ("learner.precision=fp16", "learner.precision"),
        ("selfplay.precision=half", "selfplay.precision"),
        ("selfplay.cpu_backend=onnx", "selfplay.cpu_backend"),
    ],
)
def test_bad_values_are_rejected_naming_the_key(config, override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config(override)


def test_command_line_fails_before_starting_anything(tmp_path):
    """A wrong key or value exits non-zero with a message, creating no run directory at all."""
    run_dir = tmp_path / "run"
    for override, needle in [("mcts.simulationz=3", "simulationz"), ("game.size=7", "game.size")]:
        proc = subprocess.run(
            [sys.executable, "-m", "learner", override, f"run_dir={run_dir}"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert proc.returncode != 0
        assert needle in proc.stderr
        assert not run_dir.exists()


def test_defaults_are_the_group_files_and_derived_keys_follow(config):
    cfg = config()
    # The network's dataclass defaults are the model group's.
    assert model_config(cfg.model, cfg.game.size) == ModelConfig()
    # The laptop preset (the default) is the group files: naming it changes nothing.
    assert OmegaConf.to_container(config("preset=laptop"), resolve=True) == OmegaConf.to_container(
        cfg, resolve=True
    )
    small = config("game=small")
    assert (small.model.board_size, small.model.in_planes) == (6, NUM_PLANES)


def test_threads_can_compose_at_once() -> None:
    """The play server composes the config from request threads; Hydra's global state must not
    make one of two concurrent compositions fail ("GlobalHydra is already initialized")."""
    import threading

    from checkerzero.config import compose

    start = threading.Barrier(6)
    errors: list[BaseException] = []
    sizes: list[int] = []

    def work() -> None:
        start.wait()
        try:
            for _ in range(3):
                sizes.append(compose(["mcts.simulations=64"]).mcts.simulations)
        except BaseException as e:  # collected and reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert sizes == [64] * 18
