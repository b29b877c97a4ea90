"""Fixtures for the deployment tests: the Docker engine and image tests/deploy/test_deploy.sh
prepared, helm, the host binary, and helpers to run containers on the host network.

Every container runs with `--network host` (the engine has no bridge), so all traffic stays on
loopback. Containers and volumes carry the label `sluice-deploy-test`, which the script's
clean-up removes whatever happens here.
"""

import json
import os
import pathlib
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LABEL = "sluice-deploy-test"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, key=None, timeout=10):
    """(status, parsed JSON or text) of one request; never raises on an HTTP error status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("content-type", "application/json")
    if key:
        req.add_header("authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def wait_http(url, timeout=30, proc_check=None):
    """Wait until `url` answers 200."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            status, _ = http("GET", url, timeout=2)
            if status == 200:
                return
            last = status
        except OSError as e:
            last = e
        if proc_check:
            proc_check()
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer 200 in {timeout}s (last: {last})")


class Docker:
    """The docker client of the engine the script started."""

    def __init__(self, cli):
        self.cli = cli

    def __call__(self, *args, check=True, timeout=120, **kw):
        out = subprocess.run(
            [self.cli, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw
        )
        if check and out.returncode != 0:
            raise AssertionError(
                f"docker {' '.join(map(str, args))} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
            )
        return out

    def run_detached(self, *args):
        """`docker run -d` with the test label on the host network; returns the name."""
        name = f"{LABEL}-{uuid.uuid4().hex[:8]}"
        self("run", "-d", "--name", name, "--label", LABEL, "--network", "host", *args)
        return name

    def volume(self):
        name = f"{LABEL}-{uuid.uuid4().hex[:8]}"
        self("volume", "create", "--label", LABEL, name)
        return name

    def inspect(self, name, fmt):
        return self("inspect", "-f", fmt, name).stdout.strip()

    def logs(self, name):
        out = self("logs", name, check=False)
        return out.stdout + out.stderr

    def running_check(self, name):
        """A callable that fails at once, with the logs, if the container has stopped."""

        def check():
            if self.inspect(name, "{{.State.Running}}") != "true":
                raise AssertionError(f"container {name} stopped:\n{self.logs(name)}")

        return check

    def wait_healthy(self, name, timeout=40):
        """Wait for Docker's own HEALTHCHECK verdict; returns the last probe's output."""
        deadline = time.time() + timeout
        status = None
        while time.time() < deadline:
            status = self.inspect(name, "{{if .State.Health}}{{.State.Health.Status}}{{end}}")
            if status == "healthy":
                log = json.loads(self.inspect(name, "{{json .State.Health.Log}}"))
                return log[-1]["Output"].strip()
            self.running_check(name)()
            time.sleep(0.25)
        raise AssertionError(f"{name} not healthy in {timeout}s (status {status}):\n{self.logs(name)}")


@pytest.fixture(scope="session")
def docker():
    cli = os.environ.get("SLUICE_DOCKER")
    if not cli:
        pytest.skip(os.environ.get("SLUICE_DOCKER_SKIPPED", "no Docker engine (run tests/deploy/test_deploy.sh)"))
    return Docker(cli)


@pytest.fixture(scope="session")
def image(docker):
    return os.environ["SLUICE_IMAGE"]


@pytest.fixture(scope="session")
def helm():
    path = os.environ.get("SLUICE_HELM")
    if not path:
        pytest.skip(os.environ.get("SLUICE_HELM_SKIPPED", "no helm (run tests/deploy/test_deploy.sh)"))
    return path


@pytest.fixture(scope="session")
def host_binary():
    return os.environ.get("SLUICE_BIN", str(ROOT / "target" / "release" / "sluice"))


@pytest.fixture(scope="session")
def mock_url():
    """`sluice mock` on a loopback port, the upstream of every gateway here: from a build that
    has the mock provider (SLUICE_MOCK_BIN, the test build's; the image has none)."""
    binary = os.environ.get("SLUICE_MOCK_BIN", str(ROOT / "target" / "debug" / "sluice"))
    if not os.access(binary, os.X_OK):
        pytest.fail(f"no sluice with the mock provider at {binary} (cargo build; or set SLUICE_MOCK_BIN)")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "mock", "--host", "127.0.0.1", "--port", str(port), "--chunks", "6"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )

    def alive():
        assert proc.poll() is None, proc.stderr.read()

    try:
        wait_http(f"http://127.0.0.1:{port}/mock/stats", proc_check=alive)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def gateway_config(mock_url, master_key, extra_models=()):
    """A config with the mock as an OpenAI upstream and a master key (so keys are stored)."""
    models = [("gpt-4o-mini", "openai/gpt-4o-mini"), *extra_models]
    lines = ["model_list:"]
    for name, model in models:
        lines += [
            f"  - model_name: {name}",
            "    litellm_params:",
            f"      model: {model}",
            f"      api_base: {mock_url}",
            "      api_key: sk-upstream-never-shown",
            "    model_info:",
            "      base_model: gpt-4o-mini",
        ]
    lines += ["general_settings:", f"  master_key: {master_key}", "  proxy_batch_write_at: 0.2", ""]
    return "\n".join(lines)
