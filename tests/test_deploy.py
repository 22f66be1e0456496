"""The deployment files cannot rot: they parse, carry the fields their tools require, and agree
with the Dockerfile (stages, build arguments), the entry point (roles, Ray's port), the pinned
Ray, and the config (the environment variables conf/ reads, overrides that compose).

A schema check written here (no cluster, no kubectl): docker compose, KubeRay's RayCluster and
RayJob, a Kubernetes StatefulSet for Redis, and Ray's cluster launcher.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir

from checkerzero.config import SOURCE_CONF, validate

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
DEPLOY = ROOT / "deploy"
KUBERAY = DEPLOY / "kuberay"
SECRET_VARS = ("REDIS_PASSWORD", "WANDB_API_KEY")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_all(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def dockerfile() -> tuple[set[str], set[str]]:
    """(stage names, build arguments) of docker/Dockerfile."""
    text = (DOCKER / "Dockerfile").read_text()
    stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.MULTILINE | re.IGNORECASE))
    args = set(re.findall(r"^ARG\s+([A-Z_]+)", text, re.MULTILINE))
    return stages, args


def entrypoint() -> str:
    return (DOCKER / "entrypoint.sh").read_text()


def entrypoint_roles() -> set[str]:
    return set(re.findall(r"^(\w+)\)$", entrypoint(), re.MULTILINE))


def entrypoint_secret_files() -> set[str]:
    """Variables the entry point reads from NAME_FILE."""
    return set(re.findall(r"^from_file (\w+)$", entrypoint(), re.MULTILINE))


def ray_port() -> int:
    return int(re.search(r"RAY_PORT=\$\{RAY_PORT:-(\d+)\}", entrypoint()).group(1))


def pinned_ray() -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if d.startswith("ray")]
    assert pin.startswith("ray=="), f"Ray must be pinned exactly in pyproject.toml, got {pin}"
    return pin.removeprefix("ray==")


def conf_env_vars() -> dict[str, str]:
    """What the config reads from the environment: the replay URL and password variables."""
    cluster = (SOURCE_CONF / "preset" / "cluster.yaml").read_text()
    (url_var,) = re.findall(r"url: \$\{oc\.env:(\w+),", cluster)
    password_var = load(SOURCE_CONF / "replay" / "default.yaml")["password_env"]
    return {"url": url_var, "password": password_var}


def learner_overrides(command: str) -> list[str]:
    """The Hydra overrides of a `python -m learner ...` command line."""
    words = shlex.split(command)
    i = words.index("learner")
    assert words[i - 2 : i] == ["python", "-m"], command
    return words[i + 1 :]


def assert_composes(overrides: list[str]) -> None:
    with initialize_config_dir(config_dir=str(SOURCE_CONF), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    validate(cfg)


def k8s_containers(doc: dict) -> Iterator[dict]:
    spec = doc["spec"]
    if doc["kind"] == "RayCluster":
        yield from spec["headGroupSpec"]["template"]["spec"]["containers"]
        for group in spec["workerGroupSpecs"]:
            yield from group["template"]["spec"]["containers"]
    elif doc["kind"] == "StatefulSet":
        yield from spec["template"]["spec"]["containers"]
    elif doc["kind"] == "RayJob":
        yield from spec.get("submitterPodTemplate", {}).get("spec", {}).get("containers", [])


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def test_the_image_builds_every_package_of_the_wheel():
    """Every package pyproject.toml puts in the wheel is copied into the build stage and let
    through .dockerignore (a new package would otherwise break the image's build)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = project["tool"]["scikit-build"]["wheel"]["packages"]
    copied = set(re.findall(r"^COPY (\S+) \1$", (DOCKER / "Dockerfile").read_text(), re.MULTILINE))
    admitted = {
        line.strip().removeprefix("!").rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for name in [*packages, "conf"]:
        assert name in copied, f"docker/Dockerfile does not COPY {name}"
        assert name in admitted, f".dockerignore does not admit {name}/"


# ---- compose ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["compose.yaml", "compose.gpu.yaml"])
def test_compose_builds_from_the_one_dockerfile(name):
    stages, args = dockerfile()
    services = load(DOCKER / name)["services"]
    assert services
    for service, spec in services.items():
        build = spec.get("build")
        if build is None:
            continue
        assert build["dockerfile"] == "docker/Dockerfile" and build["context"] == "..", service
        assert build["target"] in stages, f"{service}: no stage {build['target']}"
        assert set(build.get("args", {})) <= args, f"{service}: unknown build args"
        assert build["args"]["VARIANT"] in ("cpu", "gpu")
        if build["args"]["VARIANT"] == "gpu" or "deploy" in spec:
            devices = spec["deploy"]["resources"]["reservations"]["devices"]
            assert devices[0]["capabilities"] == ["gpu"], service


def test_compose_roles_secrets_restart_and_wandb():
    compose_file = load(DOCKER / "compose.yaml")
    services = compose_file["services"]
    roles = entrypoint_roles()
    env_vars = conf_env_vars()
    for name, spec in services.items():
        assert spec["command"][0] in roles, f"{name}: {spec['command']} is no entry point role"
        assert spec.get("restart") in ("always", "unless-stopped", "on-failure"), name
        text = yaml.safe_dump(spec)
        assert "requirepass" not in text, f"{name}: a password on a command line"
        for var in SECRET_VARS:  # secrets come from files or the caller's environment
            value = spec.get("environment", {}).get(var)
            assert value is None or re.fullmatch(r"\$\{\w+(:-)?\}", value), (name, var)
        for file_var in (v for v in spec.get("environment", {}) if v.endswith("_FILE")):
            # Ray's token file goes to Ray itself (RAY_AUTH_TOKEN_PATH); the others are read
            assert file_var == "RAY_AUTH_TOKEN_FILE" or (
                file_var.removesuffix("_FILE") in entrypoint_secret_files()
            ), file_var
            secret = spec["environment"][file_var].removeprefix("/run/secrets/")
            assert secret in spec["secrets"] and secret in compose_file["secrets"], file_var
    head = services["head"]["environment"]
    assert head[env_vars["url"]].startswith("redis://redis:6379/")
    assert f"{env_vars['password']}_FILE" in head
    assert "WANDB_MODE" in head and "WANDB_API_KEY_FILE" in head  # the preset reads WANDB_MODE
    assert "WANDB_API_KEY" not in head  # secrets only from files
    assert "oc.env:WANDB_MODE" in (SOURCE_CONF / "preset" / "cluster.yaml").read_text()
    host, port = services["worker"]["environment"]["RAY_HEAD"].split(":")
    assert host == "head" and int(port) == ray_port() != 6379
    assert services["redis"]["command"] == ["redis"]
    assert any(v.endswith(":/data") for v in services["redis"]["volumes"])


# ---- KubeRay and Redis on Kubernetes ---------------------------------------------------------
def test_raycluster_has_a_learner_head_and_cpu_and_gpu_selfplay_groups():
    (cluster, pvc) = load_all(KUBERAY / "raycluster.yaml")
    assert cluster["apiVersion"] == "ray.io/v1" and cluster["kind"] == "RayCluster"
    assert pvc["kind"] == "PersistentVolumeClaim"
    spec = cluster["spec"]
    assert spec["rayVersion"] == pinned_ray()
    head = spec["headGroupSpec"]
    assert all(isinstance(v, str) for v in head["rayStartParams"].values())
    (head_container,) = head["template"]["spec"]["containers"]
    env = env_of(head_container)
    env_vars = conf_env_vars()
    assert env[env_vars["url"]]["value"].startswith("redis://checkerzero-redis:6379/")
    secret_dirs = {  # mount path -> the Secret mounted there
        m["mountPath"]: v["secret"]
        for v in head["template"]["spec"]["volumes"]
        if "secret" in v
        for m in head_container["volumeMounts"]
        if m["name"] == v["name"]
    }
    for var in (env_vars["password"], "WANDB_API_KEY"):  # secrets only as files
        assert var not in env, f"{var} as an environment variable: pass {var}_FILE"
        path = Path(env[f"{var}_FILE"]["value"])
        secret = secret_dirs[str(path.parent)]
        assert secret["secretName"] == "checkerzero", var
        assert path.name in {i["path"] for i in secret["items"]}, var
    assert env["WANDB_MODE"]["value"] in ("online", "offline", "disabled")
    assert head_container["image"].endswith(":gpu")
    assert head_container["resources"]["limits"]["nvidia.com/gpu"] == 1
    mounts = {m["name"] for m in head_container["volumeMounts"]}
    claims = {
        v["name"]
        for v in head["template"]["spec"]["volumes"]
        if v.get("persistentVolumeClaim", {}).get("claimName") == pvc["metadata"]["name"]
    }
    assert claims & mounts, "the run directory must be on a persistent volume"
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    assert set(groups) == {"cpu-selfplay", "gpu-selfplay"}
    for name, group in groups.items():
        assert 0 <= group["minReplicas"] <= group["replicas"] <= group["maxReplicas"], name
        (container,) = group["template"]["spec"]["containers"]
        gpus = container["resources"]["limits"].get("nvidia.com/gpu", 0)
        assert container["image"].endswith(":gpu" if gpus else ":cpu"), name
        assert (gpus > 0) == (name == "gpu-selfplay")


def test_rayjob_runs_the_learner_on_that_cluster_with_overrides_that_compose():
    (job,) = load_all(KUBERAY / "rayjob.yaml")
    (cluster, _) = load_all(KUBERAY / "raycluster.yaml")
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    assert job["spec"]["clusterSelector"]["ray.io/cluster"] == cluster["metadata"]["name"]
    overrides = learner_overrides(job["spec"]["entrypoint"])
    assert "preset=cluster" in overrides
    run_dir = next(o for o in overrides if o.startswith("run_dir=")).removeprefix("run_dir=")
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert any(run_dir.startswith(m["mountPath"]) for m in head["volumeMounts"])
    assert_composes(overrides)


def test_redis_keeps_its_append_only_file_on_a_volume_and_its_password_in_a_secret():
    docs = {d["kind"]: d for d in load_all(KUBERAY / "redis.yaml")}
    service, stateful = docs["Service"], docs["StatefulSet"]
    (cluster, _) = load_all(KUBERAY / "raycluster.yaml")
    url = env_of(cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0])
    host_port = url[conf_env_vars()["url"]]["value"].removeprefix("redis://").split("/")[0]
    assert host_port == f"{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    (container,) = stateful["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["redis"] and "redis" in entrypoint_roles()
    env = env_of(container)
    data_dir = env["REDIS_DATA_DIR"]["value"]
    claim = stateful["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    assert {"name": claim, "mountPath": data_dir} in container["volumeMounts"]
    password_file = Path(env["REDIS_PASSWORD_FILE"]["value"])
    mount = next(
        m for m in container["volumeMounts"] if m["mountPath"] == str(password_file.parent)
    )
    volume = next(
        v for v in stateful["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]
    )
    assert volume["secret"]["secretName"] == "checkerzero"
    assert volume["secret"]["items"][0]["path"] == password_file.name
    assert "appendonly yes" in entrypoint() and "requirepass" not in yaml.safe_dump(stateful)


def test_kubernetes_secrets_never_appear_as_literal_values():
    for path in KUBERAY.glob("*.yaml"):
        for doc in load_all(path):
            if doc["kind"] not in ("RayCluster", "StatefulSet", "RayJob"):
                continue
            for container in k8s_containers(doc):
                for var in SECRET_VARS:
                    assert "value" not in env_of(container).get(var, {}), (path.name, var)


# ---- Ray's cluster launcher ------------------------------------------------------------------
def test_ray_cluster_launcher_config():
    cfg = load(DEPLOY / "ray-cluster.yaml")
    for key in ("cluster_name", "provider", "available_node_types", "head_node_type"):
        assert key in cfg, key
    assert cfg["provider"]["type"]
    types = cfg["available_node_types"]
    assert cfg["head_node_type"] in types
    assert {"cpu_selfplay", "gpu_selfplay"} <= set(types)
    for name, node_type in types.items():
        assert node_type["min_workers"] <= node_type["max_workers"] <= cfg["max_workers"], name
        assert "node_config" in node_type, name
    assert cfg["docker"]["image"].endswith(":gpu") and cfg["docker"]["worker_image"].endswith(
        ":cpu"
    )
    assert types["gpu_selfplay"]["docker"]["worker_image"].endswith(":gpu")
    head = " ".join(cfg["head_start_ray_commands"])
    worker = " ".join(cfg["worker_start_ray_commands"])
    assert f"--port={ray_port()}" in head and f"$RAY_HEAD_IP:{ray_port()}" in worker
    # Secrets reach the containers from a file, never on a command line.
    env_file = next(o for o in cfg["docker"]["run_options"] if o.startswith("--env-file"))
    assert env_file.split()[1] in cfg["file_mounts"]
    text = (DEPLOY / "ray-cluster.yaml").read_text()
    commands = cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"]
    assert not any(var in c for c in commands for var in SECRET_VARS)
    overrides = learner_overrides(re.search(r"'(python -m learner[^']*)'", text).group(1))
    assert_composes(overrides)


# ---- Ray's token authentication and unprivileged containers, on every deploy path ------------
def test_every_deploy_path_runs_ray_with_token_auth_from_a_secret_file():
    """Ray 2.60 turns token authentication on for a local ``ray.init()`` but not for
    ``ray start``: every way this project starts Ray on a cluster turns it on itself, with the
    token from a file (tests/test_ray_auth.py shows a client without it refused)."""
    # The image: token mode by default, and the entry point's every Ray role checks the file.
    assert re.search(r"^\s*RAY_AUTH_MODE=token", (DOCKER / "Dockerfile").read_text(), re.MULTILINE)
    script = entrypoint()
    for role in ("head", "ray-head", "worker"):
        body = re.search(rf"^{re.escape(role)}\)\n(.*?)^\s*;;", script, re.MULTILINE | re.DOTALL)
        assert body and body.group(1).lstrip().startswith("ray_auth"), role
    # compose: the head and every worker get the token from the same secret file.
    compose_file = load(DOCKER / "compose.yaml")
    for name in ("head", "worker"):
        service = compose_file["services"][name]
        path = service["environment"]["RAY_AUTH_TOKEN_FILE"]
        assert path == "/run/secrets/ray_token" and "ray_token" in service["secrets"], name
        assert "RAY_AUTH_TOKEN" not in service["environment"], name
    assert compose_file["secrets"]["ray_token"]["file"].startswith("./secrets/")
    # The cluster launcher: token mode and the token's file in every container, checked before
    # Ray starts on the head and on each worker.
    cfg = load(DEPLOY / "ray-cluster.yaml")
    options = " ".join(cfg["docker"]["run_options"])
    assert "--env RAY_AUTH_MODE=token" in options
    token_path = re.search(r"--env RAY_AUTH_TOKEN_PATH=(\S+)", options).group(1)
    mount = re.search(r"-v (\S+):(\S+):ro", options)
    assert token_path.startswith(mount.group(2) + "/") and mount.group(1) in cfg["file_mounts"]
    for commands in (cfg["head_start_ray_commands"], cfg["worker_start_ray_commands"]):
        start = next(c for c in commands if "ray start" in c)
        assert start.index('test -s "$RAY_AUTH_TOKEN_PATH"') < start.index("ray start")
    # KubeRay: the operator's token mode, the token in a Secret, the job's submitter holds it.
    (cluster, _) = load_all(KUBERAY / "raycluster.yaml")
    auth = cluster["spec"]["authOptions"]
    assert auth["mode"] == "token" and auth["secretName"]
    (job,) = load_all(KUBERAY / "rayjob.yaml")
    pod = job["spec"]["submitterPodTemplate"]["spec"]
    (submitter,) = pod["containers"]
    env = env_of(submitter)
    assert env["RAY_AUTH_MODE"]["value"] == "token" and "RAY_AUTH_TOKEN" not in env
    token_dir = str(Path(env["RAY_AUTH_TOKEN_PATH"]["value"]).parent)
    (mount,) = [m for m in submitter["volumeMounts"] if m["mountPath"] == token_dir]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == auth["secretName"]


def pod_templates(doc: dict) -> list[dict]:
    """The pod templates of a Kubernetes document (RayCluster, StatefulSet, RayJob)."""
    spec = doc.get("spec", {})
    if doc["kind"] == "RayCluster":
        groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
        return [g["template"] for g in groups]
    if doc["kind"] == "StatefulSet":
        return [spec["template"]]
    if doc["kind"] == "RayJob":
        return [spec["submitterPodTemplate"]]
    return []


def test_containers_run_as_an_unprivileged_user():
    text = (DOCKER / "Dockerfile").read_text()
    runtime = text[text.index("AS worker") :]  # the stage every node runs
    (user,) = re.findall(r"^USER (\S+)", runtime, re.MULTILINE)
    uid = int(user.split(":")[0])
    assert uid != 0
    for path in KUBERAY.glob("*.yaml"):
        for doc in load_all(path):
            templates = pod_templates(doc)
            for template in templates:
                context = template["spec"]["securityContext"]
                assert context["runAsNonRoot"] is True, (path.name, doc["kind"])
                assert context["runAsUser"] == uid, (path.name, doc["kind"])
