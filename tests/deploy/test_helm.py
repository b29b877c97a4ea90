"""deploy/helm/sluice: `helm lint --strict` clean with the default and the fleet values, and what
`helm template` renders holds together with sluice itself: the probes name routes and a port
sluice serves (checked by running the rendered pod spec: the image, its args, the ConfigMap
mounted at /etc/sluice, the Secret as environment, the securityContext's user and read-only
root), the grace period covers preStop plus sluice's drain and flush, and nothing runs as root.
"""

import base64
import os
import subprocess
import time

import pytest
import yaml

from conftest import ROOT, free_port, http, wait_http

CHART = ROOT / "deploy" / "helm" / "sluice"
FLEET_VALUES = CHART / "ci" / "fleet-values.yaml"
# After the drain, sluice waits up to 5 s for the last records and 10 s for the spend writer
# (src/main.rs, serve): the chart's shutdown.flushSeconds must cover both.
FLUSH_SECS = 15


def helm_run(helm, *args, check=True):
    out = subprocess.run([helm, *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError(f"helm {' '.join(map(str, args))}:\n{out.stdout}\n{out.stderr}")
    return out


def render(helm, *args):
    text = helm_run(helm, "template", "rel", CHART, "--namespace", "llm", *args).stdout
    return [d for d in yaml.safe_load_all(text) if d]


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


def args_of(container):
    """`--flag value` pairs of the container's args."""
    args = container["args"]
    assert args[0] == "serve"
    return dict(zip(args[1::2], args[2::2]))


VALUES = {"default": [], "fleet": ["-f", FLEET_VALUES]}


@pytest.mark.parametrize("values", VALUES)
def test_lint_is_clean(helm, values):
    out = helm_run(helm, "lint", "--strict", CHART, *VALUES[values])
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout, out.stdout


def test_default_render_is_one_pod_on_a_volume(helm):
    docs = render(helm)
    kinds = sorted(d["kind"] for d in docs)
    print("\ndefault:", ", ".join(kinds))
    assert kinds == sorted(
        ["ServiceAccount", "Secret", "ConfigMap", "PersistentVolumeClaim", "Service", "Deployment", "PodDisruptionBudget"]
    )
    deployment = one(docs, "Deployment")["spec"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"] == {"type": "Recreate"}, "one pod owns the SQLite volume at a time"
    volumes = {v["name"]: v for v in deployment["template"]["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == one(docs, "PersistentVolumeClaim")["metadata"]["name"]
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert config["general_settings"] == {"master_key": "os.environ/SLUICE_MASTER_KEY"}
    secret = one(docs, "Secret")["data"]
    assert base64.b64decode(secret["SLUICE_MASTER_KEY"]).startswith(b"sk-"), "a generated master key"


def test_fleet_render_scales_and_keeps_secrets_out_of_the_config(helm):
    docs = render(helm, "-f", FLEET_VALUES)
    kinds = sorted(d["kind"] for d in docs)
    print("\nfleet:", ", ".join(kinds))
    assert "PersistentVolumeClaim" not in kinds
    hpa = one(docs, "HorizontalPodAutoscaler")["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 10)
    deployment = one(docs, "Deployment")["spec"]
    assert "replicas" not in deployment, "the autoscaler owns the replica count"
    assert "strategy" not in deployment, "rolling updates: no volume to hand over"
    monitor = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert (monitor["port"], monitor["path"]) == ("http", "/metrics")
    assert monitor["authorization"]["credentials"]["key"] == "SLUICE_MASTER_KEY"
    service = one(docs, "Service")["spec"]
    assert service["ports"][0]["targetPort"] == "http"
    config_text = one(docs, "ConfigMap")["data"]["config.yaml"]
    config = yaml.safe_load(config_text)
    assert config["general_settings"]["database_url"] == "os.environ/DATABASE_URL"
    assert config["router_settings"]["redis_url"] == "os.environ/REDIS_URL"
    secret = {k: base64.b64decode(v).decode() for k, v in one(docs, "Secret")["data"].items()}
    assert secret["DATABASE_URL"].startswith("postgres://") and secret["REDIS_URL"].startswith("redis://")
    for value in secret.values():
        assert value not in config_text, "a secret value reached the ConfigMap"


@pytest.mark.parametrize("values", VALUES)
def test_pod_is_hardened_and_its_grace_period_covers_the_drain(helm, values):
    pod = one(render(helm, *VALUES[values]), "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]

    args = args_of(container)
    grace = float(args["--shutdown-grace-secs"])
    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    total = pod["terminationGracePeriodSeconds"]
    print(f"\n{values}: preStop {pre_stop} s + drain {grace} s + flush {FLUSH_SECS} s <= terminationGracePeriodSeconds {total}")
    assert total >= pre_stop + grace + FLUSH_SECS

    # The probes' port is the one sluice is told to listen on, and their paths are its routes.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http"] == int(args["--port"])
    assert args["--host"] == "0.0.0.0"
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["port"] == "http"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health/liveliness"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/readiness"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert args["--config"].startswith("/etc/sluice/") and mounts["/etc/sluice"] == "config"
    assert mounts[args["--data-dir"]] == "data"


def test_a_fleet_without_a_database_is_refused(helm):
    out = helm_run(helm, "template", "rel", CHART, "--set", "replicaCount=2", check=False)
    assert out.returncode != 0
    assert "need database.url" in out.stderr


@pytest.mark.parametrize("values", VALUES)
def test_rendered_pod_serves_its_probes(helm, docker, image, values, tmp_path):
    """Run what the chart renders, as the kubelet would: the pod's image with the container's
    args, the ConfigMap's files at /etc/sluice, the Secret as environment, the pod's user, a
    read-only root and an emptyDir-like volume; then GET every probe path on the named port,
    and /metrics as the ServiceMonitor would."""
    port = free_port()
    extra = ["--set", f"containerPort={port}"]
    if values == "fleet":
        pg, redis = os.environ.get("SLUICE_TEST_POSTGRES_URL"), os.environ.get("SLUICE_TEST_REDIS_URL")
        if not (pg and redis):
            pytest.skip("no test PostgreSQL/Redis (scripts/services.sh)")
        extra += ["--set", f"database.url={pg}", "--set", f"redis.url={redis}"]
    docs = render(helm, *VALUES[values], *extra)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    config_dir.chmod(0o755)
    for name, text in one(docs, "ConfigMap")["data"].items():
        (config_dir / name).write_text(text)
        (config_dir / name).chmod(0o644)
    secret = {k: base64.b64decode(v).decode() for k, v in one(docs, "Secret")["data"].items()}
    user = f"{pod['securityContext']['runAsUser']}:{pod['securityContext']['runAsGroup']}"
    env = [a for k, v in secret.items() for a in ("-e", f"{k}={v}")]
    name = docker.run_detached(
        "--read-only",
        "--user", user,
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "-v", f"{config_dir}:/etc/sluice:ro",
        "-v", "/var/lib/sluice",
        *env,
        image,
        *container["args"],
    )
    try:
        root = f"http://127.0.0.1:{port}"
        wait_http(f"{root}/health/liveliness", proc_check=docker.running_check(name))
        for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
            path = container[probe]["httpGet"]["path"]
            status, body = http("GET", f"{root}{path}")
            assert status == 200, f"{probe} {path}: {status} {body}"
        _, ready = http("GET", f"{root}{container['readinessProbe']['httpGet']['path']}")
        print(f"\n{values}: readiness {ready}")
        if values == "fleet":
            assert ready["db"]["backend"] == "postgresql" and ready["db"]["state"] == "connected"
            assert ready["redis"] == "connected"
        else:
            assert ready["db"]["backend"] == "sqlite"
        master = secret["SLUICE_MASTER_KEY"]
        status, models = http("GET", f"{root}/v1/models", key=master)
        assert status == 200, models
        configured = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])["model_list"]
        assert {m["id"] for m in models["data"]} == {m["model_name"] for m in configured}
        monitor = [d for d in docs if d["kind"] == "ServiceMonitor"]
        metrics_path = monitor[0]["spec"]["endpoints"][0]["path"] if monitor else "/metrics"
        status, metrics = http("GET", f"{root}{metrics_path}", key=master)
        assert status == 200 and "sluice_" in metrics

        started = time.time()
        docker("kill", "--signal", "TERM", name)
        code = docker("wait", name, timeout=pod["terminationGracePeriodSeconds"]).stdout.strip()
        print(f"{values}: exited {code} {time.time() - started:.1f} s after SIGTERM")
        assert code == "0"
    finally:
        logs = docker.logs(name)
        docker("rm", "-f", name, check=False)
    for value in secret.values():
        assert value not in logs, "a secret reached the logs"
