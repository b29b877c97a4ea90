"""deploy/compose.yaml: valid for docker-compose, and its two sluice services, started by
docker-compose from that file, form a fleet: one PostgreSQL (a key made on one instance works
on the other) and one Redis (a key's rpm_limit holds across both). The postgres and redis
services need images from a registry, which this machine has none of: the fleet runs with
`--no-deps` against the PostgreSQL and Redis scripts/services.sh started, through the file's
own DATABASE_URL and REDIS_URL variables.
"""

import os
import subprocess

import openai
import pytest
import yaml

from conftest import ROOT, free_port, http

COMPOSE_FILE = ROOT / "deploy" / "compose.yaml"
FLEET_KEY = "sk-fleet-master"


@pytest.fixture(scope="module")
def compose(docker):
    cmd = os.environ.get("SLUICE_COMPOSE")
    if not cmd:
        pytest.skip(os.environ.get("SLUICE_COMPOSE_SKIPPED", "no docker-compose"))
    return [*cmd.split(), "-f", str(COMPOSE_FILE)]


def run(cmd, env=None, check=True, timeout=180):
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def test_compose_file_is_valid_and_health_gated(compose):
    run([*compose, "config", "-q"])
    config = yaml.safe_load(run([*compose, "config"]).stdout)
    services = config["services"]
    assert set(services) == {"postgres", "redis", "sluice-1", "sluice-2"}
    assert "healthcheck" in services["postgres"] and "healthcheck" in services["redis"]
    ports = set()
    for name in ("sluice-1", "sluice-2"):
        s = services[name]
        assert s["network_mode"] == "host"
        assert s["read_only"] is True
        assert s["user"] == "65532:65532"
        assert s["depends_on"] == {
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }
        env = s["environment"]
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
        ports.add(env["SLUICE_PORT"])
        # docker-compose prints the grace period as e.g. "50s"; it must outlast the drain.
        grace = float(str(s["stop_grace_period"]).rstrip("s"))
        assert grace > float(env["SLUICE_SHUTDOWN_GRACE_SECS"])
        mounts = {v["target"] if isinstance(v, dict) else v.split(":")[1] for v in s["volumes"]}
        assert {"/etc/sluice/config.yaml", "/etc/sluice/models.yaml", "/var/lib/sluice"} <= mounts
    assert len(ports) == 2, "two instances on the host network need two ports"


def test_fleet_shares_keys_and_rate_limits(docker, image, compose, mock_url):
    pg = os.environ.get("SLUICE_TEST_POSTGRES_URL")
    redis = os.environ.get("SLUICE_TEST_REDIS_URL")
    if not (pg and redis):
        pytest.skip("no test PostgreSQL/Redis (scripts/services.sh)")
    p1, p2 = free_port(), free_port()
    env = {
        **os.environ,
        "SLUICE_IMAGE": image,
        "DATABASE_URL": pg,
        "REDIS_URL": redis,
        "SLUICE_PORT_1": str(p1),
        "SLUICE_PORT_2": str(p2),
        "SLUICE_MASTER_KEY": FLEET_KEY,
        # The image's models (deploy/config.yaml), their OpenAI ones answered by the mock.
        "OPENAI_API_KEY": "sk-upstream",
        "OPENAI_API_BASE": mock_url,
    }
    project = ["-p", "sluicedeploytest"]
    ids = {}
    run([*compose, *project, "up", "-d", "--no-deps", "--no-build", "sluice-1", "sluice-2"], env=env)
    try:
        for name in ("sluice-1", "sluice-2"):
            ids[name] = run([*compose, *project, "ps", "-q", name], env=env).stdout.strip()
        # Docker's own HEALTHCHECK, on each instance's SLUICE_PORT.
        for name, cid in ids.items():
            print(f"\n{name}: {docker.wait_healthy(cid, timeout=60)}")
        roots = [f"http://127.0.0.1:{p1}", f"http://127.0.0.1:{p2}"]
        for root in roots:
            status, ready = http("GET", f"{root}/health/readiness")
            assert status == 200, ready
            assert ready["db"]["backend"] == "postgresql" and ready["db"]["state"] == "connected", ready
            assert ready["redis"] == "connected", ready

        status, made = http("POST", f"{roots[0]}/key/generate", {"rpm_limit": 3}, key=FLEET_KEY)
        assert status == 200, made
        clients = [openai.OpenAI(base_url=f"{r}/v1", api_key=made["key"], max_retries=0) for r in roots]
        ask = lambda c: c.chat.completions.create(  # noqa: E731
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )
        # Made on the first instance, accepted by the second (one PostgreSQL).
        for client in (clients[1], clients[0], clients[1]):
            assert ask(client).choices[0].message.content
        # The fourth request of the minute is over the key's rpm_limit, whichever instance
        # takes it (one Redis).
        with pytest.raises(openai.RateLimitError) as refused:
            ask(clients[0])
        assert refused.value.code == "rpm_limit_exceeded"
    finally:
        stopped = run([*compose, *project, "stop", "-t", "45"], env=env, check=False)
        codes = {name: docker.inspect(cid, "{{.State.ExitCode}}") for name, cid in ids.items()}
        logs = run([*compose, *project, "logs", "--no-color"], env=env, check=False).stdout
        run([*compose, *project, "down", "-v"], env=env, check=False)
    assert stopped.returncode == 0, stopped.stderr
    assert set(codes.values()) == {"0"}, f"SIGTERM ends each instance with exit 0: {codes}\n{logs}"
    assert FLEET_KEY not in logs, "the master key reached the logs"
