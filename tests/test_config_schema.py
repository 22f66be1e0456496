"""Every config key has a rule, and no absurd value gets past it: refused in one line naming the
key (exit status 2 on the command line, before Ray, Redis or the run folder), or allowed because
its rule says it is fine."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from checkerzero.config import CROSS_RULES, ConfigError, compose, validate_values
from checkerzero.config_schema import OPEN_SECTIONS, SCHEMA, leaf_keys, rule_for

ROOT = Path(__file__).resolve().parents[1]
COMPOSITIONS = (
    (),
    ("game=small",),
    ("model=large",),
    ("preset=smoke",),
    ("preset=gpu",),
    ("preset=cluster",),
    ("evaluation=default",),
)


@pytest.fixture(scope="module")
def base() -> dict:
    """The default composition, resolved: each example changes one key of a copy."""
    values = OmegaConf.to_container(compose(["run_dir=/tmp/checkerzero-schema-test"]), resolve=True)
    assert isinstance(values, dict)
    return values


@pytest.mark.parametrize("overrides", COMPOSITIONS, ids=lambda o: " ".join(o) or "default")
def test_every_key_of_every_composition_has_a_rule(overrides):
    values = OmegaConf.to_container(compose(list(overrides)), resolve=True)
    keys = leaf_keys(values)
    assert [k for k in keys if rule_for(k) is None] == []
    assert len(keys) > 150


def _with(base: dict, key: str, value) -> dict:
    import copy

    out = copy.deepcopy(base)
    node = out
    *parents, leaf = key.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return out


def _names(key: str) -> set[str]:
    """The keys a refusal of ``key`` may name: itself, or another key of a rule between keys."""
    out = {key}
    for keys, _ in CROSS_RULES:
        if any(key == k or key.startswith(k + ".") for k in keys):
            out |= set(keys)
    return out


# Keys naming a folder that may not exist yet (made when the run starts).
FOLDER_KEYS = ("run_dir", "egdb.dir", "nneval.lineage_dir", "nneval.data_dir")
HUGE = 10**18
ABSURD = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 0, 0.0, -1, -1.5, -(10**9), HUGE, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.booleans(),
    st.none(),
    st.sampled_from(["", " ", "abc", "nan", "1e999", "notaurl", "/no/such/file", "/etc/passwd"]),
    st.text(max_size=20),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2),
)


# What each key holds, stated here apart from the schema's rules (so that a rule gone lax fails
# a test instead of passing its own re-check): the type of the default composition's value (a
# flag takes true/false only; an integer key integers only, never a boolean; a number key
# integers or floats, never a boolean; a text key strings); these keys hold numbers although
# their default is a whole number; these default to null and hold this type otherwise; these
# may also be null; these may be negative (every other number is at least 0).
NUMBER_KEYS_WITH_WHOLE_DEFAULT = frozenset(
    {
        "cluster.lost_after_s",
        "evaluation.num_cpus",
        "learner.time_limit_min",
        "mcts.c_puct_base",
        "nneval.gate.sprt.elo0",
        "nneval.gate.sprt.elo1",
    }
)
NULL_DEFAULT = {
    "cluster.num_cpus": int,
    "learner.init_weights": str,
    "logging.wandb.entity": str,
    "replay.redis_server": str,
    "replay.url": str,
    "selfplay.actors": int,
    "nneval.selfplay.actors": int,
    "nneval.gate.parallel": int,
}
ALSO_NULL = frozenset(
    {
        "cluster.address",
        "cluster.object_store_memory_mb",
        "evaluation.ladder_table",
        "nneval.ladder.table",
        "replay.password_env",
    }
)
SIGNED = frozenset(
    {
        *(
            f"evaluation.baseline.weights.{w}"
            for w in ("advancement", "back_rank", "centre", "king_centre", "mobility", "runaway")
        ),
        "evaluation.elo.anchor_rating",
        "evaluation.gate.elo0",
        "evaluation.gate.elo1",
        "nneval.gate.sprt.elo0",
        "nneval.gate.sprt.elo1",
        "mcts.fpu_reduction",
        "mcts.fpu_reduction_root",
    }
)


def _stated_type(base: dict, key: str) -> type:
    node = base
    for part in key.split("."):
        node = node[part]
    if node is None:
        return NULL_DEFAULT[key]
    if isinstance(node, bool):
        return bool
    if isinstance(node, int):
        return float if key in NUMBER_KEYS_WITH_WHOLE_DEFAULT else int
    return type(node)


def _check_one(base: dict, key: str, value) -> None:
    try:
        validate_values(_with(base, key, value))
    except ConfigError as e:
        message = str(e)
        assert "\n" not in message, message
        assert any(name in message for name in _names(key)), (key, value, message)
        return
    # Accepted: of the key's stated type and range, and nothing absurd.
    kind = _stated_type(base, key)
    if value is None:
        assert key in NULL_DEFAULT or key in ALSO_NULL, (key, value)
    elif kind in (bool, int):
        assert type(value) is kind, (key, value, kind)
    elif kind is float:
        assert type(value) in (int, float), (key, value, kind)
    else:
        assert isinstance(value, kind), (key, value, kind)
    if kind in (int, float) and value is not None:
        assert value >= 0 or key in SIGNED, (key, value)
    if isinstance(value, float):
        assert math.isfinite(value), (key, value)
    if isinstance(value, int) and not isinstance(value, bool):
        assert abs(value) <= 10**12, (key, value)
    if isinstance(value, str) and key not in ("evaluation.elo.anchor_player",):
        # A player spec is EvalSettings' to parse (python -m learner asks it before starting).
        assert value.strip(), (key, value)
        assert value not in ("/no/such/file", "/etc/passwd") or key in FOLDER_KEYS, (
            key,
            value,
        )


def _property(examples: int):
    def wrap(test):
        return settings(
            max_examples=examples,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(test)

    return wrap


KEYS = sorted(SCHEMA)


@_property(2000)
@given(key=st.sampled_from(KEYS), value=ABSURD)
def test_an_absurd_value_of_any_key_is_refused_in_one_line_or_allowed_by_its_rule(base, key, value):
    _check_one(base, key, value)


@pytest.mark.slow
@_property(50_000)
@given(key=st.sampled_from(KEYS), value=ABSURD)
def test_many_absurd_values_slow(base, key, value):
    _check_one(base, key, value)


@pytest.mark.parametrize(
    "override",
    [
        "mcts.c_puct=nan",
        "mcts.c_puct=inf",
        "mcts.leaves_per_game=0",
        "learner.optimizer.lr=-0.05",
        "learner.threads=0",
        "selfplay.actors=100000",
        "selfplay.actors=0",  # with the private Redis: no game would ever come
        "model.blocks=100000",
        "egdb.pieces=99",
        "replay.url=notaurl",
        "replay.url=redis://host:notaport",
        "learner.batch_size=abc",
        "run_dir=/etc/passwd",
        "run_dir=/etc/passwd/run",
        "logging.progress_every_s=0",
        "evaluation.gate.elo0=50",  # above elo1 (30): a test that can never promote
        "+learner.time_limt_min=3",  # added, it would be ignored: unknown to the schema
    ],
)
def test_the_values_that_made_a_run_spin_are_refused_naming_the_key(override):
    key = override.lstrip("+~").split("=")[0]
    with pytest.raises(ConfigError) as info:
        compose([override])
    assert key in str(info.value) and "\n" not in str(info.value)


def test_a_warm_start_of_another_shape_is_refused_naming_both_shapes_from_the_header(tmp_path):
    from checkerzero.network.checkpoint import save_checkpoint
    from checkerzero.network.model import CheckersNet, ModelConfig

    path = tmp_path / "net.safetensors"
    save_checkpoint(path, CheckersNet(ModelConfig(blocks=1, channels=8)), step=1, version=1)
    with pytest.raises(ConfigError) as info:
        compose([f"learner.init_weights={path}"])
    assert str(info.value) == (
        f"bad config value learner.init_weights='{path}': the file holds a 1x8 (policy 32, value "
        "8/128, 8x8 board, 15 planes) network, the model keys make a 4x16 (policy 32, value "
        "8/128, 8x8 board, 15 planes) one: set model.* to the file's shape or pick another file"
    )
    same = ["model.blocks=1", "model.channels=8", f"learner.init_weights={path}"]
    assert compose(same).learner.init_weights == str(path)
    # Only the header is read: a body cut short (the run's full load refuses it) passes here.
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    compose(same)
    path.write_bytes(b"\x00" * 64)
    with pytest.raises(ConfigError, match=r"learner\.init_weights=.*not a network file"):
        compose(same)


def learner(*args: str, tripwire: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m learner``; with ``tripwire``, importing ray fails the process."""
    env = dict(os.environ)
    if tripwire is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tripwire), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "learner", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def _tripwire(folder: Path) -> Path:
    """A package named ray that raises when imported: a check that ran before Ray could start
    leaves it unimported. (The private redis-server is started after the run folder is made,
    its data inside it: no folder, no Redis.)"""
    (folder / "ray").mkdir(parents=True)
    (folder / "ray" / "__init__.py").write_text("raise ImportError('ray was imported')\n")
    return folder


def test_the_command_line_refuses_in_one_line_before_anything_starts(tmp_path):
    """Exit 2, one line on stderr naming the key, nothing on stdout, no run folder (so no
    private Redis, which keeps its data there), and Ray never imported."""
    tripwire = _tripwire(tmp_path / "tripwire")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    run_dir = tmp_path / "run"
    cases = [
        (f"run_dir={run_dir}", "mcts.c_puct=nan", "mcts.c_puct=nan: a finite number in [0, 100]"),
        (f"run_dir={run_dir}", "replay.url=notaurl", "replay.url='notaurl'"),
        (f"run_dir={a_file}", "preset=smoke", f"run_dir='{a_file}'"),
        (f"run_dir={a_file}/run", "preset=smoke", f"('{a_file}' is a file)"),
        # A folder no one can make (even root): refused when the run folder is made, one line.
        ("run_dir=/proc/checkerzero-none/run", "preset=smoke", "cannot create the run folder"),
    ]
    with ThreadPoolExecutor(len(cases)) as pool:  # four interpreters start side by side
        runs = list(pool.map(lambda case: learner(*case[:-1], tripwire=tripwire), cases))
    for (*args, needle), done in zip(cases, runs, strict=True):
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert needle in done.stderr and done.stdout == "", done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "tripwire"]
    # The tripwire works: this interpreter with that path cannot import Ray.
    probe = subprocess.run(
        [sys.executable, "-c", "import ray"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tripwire)},
        timeout=60,
    )
    assert probe.returncode == 1 and "ImportError: ray was imported" in probe.stderr


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "learner.time_limt_min=3",
            "error: unknown config key learner.time_limt_min=3; did you mean "
            "learner.time_limit_min or",
        ),
        (
            "preset=smok",
            "error: no option 'smok' in config group preset: did you mean smoke? its options "
            "are cluster, gpu, laptop, nneval, smoke",
        ),
        (
            "mcts=defualt",
            "error: no option 'defualt' in config group mcts: did you mean default? its options "
            "are default",
        ),
        (
            "learner.batch_size=abc",
            "error: bad config value learner.batch_size='abc': an integer from 1 to 65,536",
        ),
    ],
    ids=["typo-key", "typo-preset", "typo-group", "bad-value"],
)
def test_a_bad_key_group_or_value_gets_one_line_with_the_nearest_names(
    tmp_path, override, expected
):
    run_dir = tmp_path / "run"
    done = learner(override, f"run_dir={run_dir}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(expected) and done.stderr.count("\n") == 1, done.stderr
    assert "+" not in done.stderr  # never Hydra's "+key" advice: it would run, the key ignored
    assert not run_dir.exists()


def test_compose_names_the_nearest_keys_in_one_line():
    """Every command that composes the config (benchmarks, evaluation, actors) gets the same
    line from compose()."""
    with pytest.raises(ConfigError) as info:
        compose(["lerner.batch_size=3"])
    assert str(info.value).startswith(
        "unknown config key lerner.batch_size=3; did you mean learner.batch_size"
    )
    with pytest.raises(ConfigError) as info:
        compose(["learner.batch_size=["])
    assert str(info.value).startswith("cannot read the override: ")
    assert "\n" not in str(info.value)


def test_open_sections_take_the_keys_their_constructor_takes():
    """An optimizer of another kind has other keys: they are torch's to check, not refused."""
    assert OPEN_SECTIONS == ("learner.optimizer", "learner.scheduler")
    cfg = compose(["learner.optimizer._target_=torch.optim.SGD", "+learner.optimizer.dampening=0"])
    assert cfg.learner.optimizer.dampening == 0


def test_no_actors_is_refused_with_the_private_redis_only():
    with pytest.raises(ConfigError, match=r"selfplay.actors=0: no actor would add a game"):
        compose(["selfplay.actors=0"])
    compose(["selfplay.actors=0", "replay.url=redis://10.0.0.5:6380/0"])  # fed from elsewhere
