"""The container image built from deploy/Dockerfile, run the way the docs say: small, non-root,
read-only root, its own HEALTHCHECK, the config at /etc/sluice/config.yaml, the SQLite store on
the /var/lib/sluice volume, SIGTERM draining streams, SIGHUP reloading, mimalloc in place.
"""

import io
import json
import pathlib
import subprocess
import tarfile
import time

import openai
import pytest

from conftest import LABEL, ROOT, free_port, gateway_config, http, wait_http

MASTER = "sk-deploy-master"

EXPECTED_FILES = {
    "usr/local/bin/sluice",
    "etc/sluice/config.yaml",
    "etc/ssl/certs/ca-certificates.crt",
}
# What Docker itself puts in every container.
DOCKER_FILES = {".dockerenv", "etc/hostname", "etc/hosts", "etc/resolv.conf", "dev/console"}


def test_image_is_small_non_root_and_checks_itself(docker, image):
    size = int(docker("image", "inspect", "--format", "{{.Size}}", image).stdout)
    print(f"\nimage {image}: {size} bytes ({size / 1e6:.1f} MB)")
    assert size < 30_000_000, f"image is {size / 1e6:.1f} MB, over the 30 MB target"

    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/usr/local/bin/sluice"]
    assert config["Cmd"] == ["serve"]
    assert config["Healthcheck"]["Test"] == ["CMD", "/usr/local/bin/sluice", "healthcheck"]
    assert list(config["Volumes"]) == ["/var/lib/sluice"]
    assert config["WorkingDir"] == "/var/lib/sluice"
    env = dict(e.split("=", 1) for e in config["Env"])
    assert env["SLUICE_CONFIG"] == "/etc/sluice/config.yaml"
    assert env["SLUICE_DATA_DIR"] == "/var/lib/sluice"
    assert env["SLUICE_HOST"] == "0.0.0.0"

    # Everything in the image: the binary, the CA bundle, the default config, and for a glibc
    # build the loader and the libraries it links (none for a static musl build).
    name = f"{LABEL}-export"
    docker("create", "--name", name, "--label", LABEL, image)
    try:
        tar = subprocess.run([docker.cli, "export", name], capture_output=True, check=True).stdout
    finally:
        docker("rm", name, check=False)
    members = tarfile.open(fileobj=io.BytesIO(tar)).getmembers()
    files = {m.name for m in members if m.isfile()} - DOCKER_FILES
    libs = {f for f in files if f.startswith(("lib/", "lib64/", "usr/lib/"))}
    print("files:", ", ".join(sorted(files)))
    assert files - libs == EXPECTED_FILES
    assert all(".so" in pathlib.Path(f).name for f in libs), libs
    data = next(m for m in members if m.name.rstrip("/") == "var/lib/sluice")
    assert (data.uid, data.gid) == (65532, 65532), "the data directory belongs to the runtime user"


def test_version_names_the_commit_and_mimalloc_is_the_allocator(docker, image, host_binary):
    out = docker("run", "--rm", "--network", "host", "-e", "MIMALLOC_VERBOSE=1", image, "--version")
    host = subprocess.run([host_binary, "--version"], capture_output=True, text=True, check=True)
    print("\n" + out.stdout.strip())
    assert out.stdout.strip() == host.stdout.strip(), "the image carries the binary it was built from"
    assert out.stdout.startswith("sluice ") and "(" in out.stdout
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:
        assert "(unknown)" not in out.stdout
    # mimalloc reports itself when asked: the global allocator survived the packaging.
    assert "mimalloc: process init" in out.stderr, out.stderr


def test_image_runs_its_default_config_with_nothing_mounted(docker, image, mock_url):
    """`docker run IMAGE` serves the config baked into the image (deploy/config.yaml): the
    providers' models with their keys from the environment; OPENAI_API_BASE points them at an
    OpenAI-compatible server (here the mock). The image has no mock provider of its own."""
    port = free_port()
    name = docker.run_detached(
        "--read-only", "-e", f"SLUICE_PORT={port}",
        "-e", "OPENAI_API_KEY=sk-upstream", "-e", f"OPENAI_API_BASE={mock_url}", image,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health/liveliness", proc_check=docker.running_check(name))
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="sk-1234")
        listed = {m.id for m in client.models.list()}
        assert {"gpt-4o-mini", "claude-sonnet", "text-embedding-3-small"} <= listed, listed
        answer = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )
        assert answer.choices[0].message.content
        # No ANTHROPIC_API_KEY: the deployment is there, and says it is not configured.
        status, health = http("GET", f"http://127.0.0.1:{port}/health", key="sk-1234")
        states = {d["model_name"]: d["state"] for d in health["deployments"]}
        assert states["claude-sonnet"] == "not_configured", states
        # The image's binary has no mock provider, and a config naming one says so.
        out = docker("run", "-i", "--rm", "--entrypoint", "/usr/local/bin/sluice", image,
                     "check-config", "/dev/stdin", check=False, input="model_list:\n  - model_name: m\n    litellm_params: {model: mock/m}\n")
        assert "the mock provider is not in this build" in out.stderr + out.stdout, out
    finally:
        docker("rm", "-f", name, check=False)


@pytest.fixture(scope="module")
def gateway(docker, image, mock_url, tmp_path_factory):
    """The image as documented: config mounted read-only at /etc/sluice/config.yaml, a named
    volume at /var/lib/sluice, a read-only root, Docker's health check every second."""
    cfgdir = tmp_path_factory.mktemp("gateway")
    config = cfgdir / "config.yaml"
    config.write_text(
        gateway_config(mock_url, MASTER, [("text-embedding-3-small", "openai/text-embedding-3-small")])
    )
    config.chmod(0o644)
    volume = docker.volume()
    port = free_port()
    name = docker.run_detached(
        "--read-only",
        "--stop-timeout", "45",
        "--health-interval", "1s",
        "-v", f"{config}:/etc/sluice/config.yaml:ro",
        "-v", f"{volume}:/var/lib/sluice",
        "-e", f"SLUICE_PORT={port}",
        image,
    )
    root = f"http://127.0.0.1:{port}"
    wait_http(f"{root}/health/liveliness", proc_check=docker.running_check(name))
    g = {"name": name, "root": root, "port": port, "config": config, "volume": volume, "mock": mock_url}
    yield g
    logs = docker.logs(name)
    docker("rm", "-f", name, check=False)
    docker("volume", "rm", volume, check=False)
    assert "sk-upstream-never-shown" not in logs and MASTER not in logs, "a key reached the logs"


def test_docker_healthcheck_runs_the_binary(docker, gateway):
    output = docker.wait_healthy(gateway["name"])
    print("\nhealth check:", output)
    assert output == f"healthy: http://127.0.0.1:{gateway['port']}/health/liveliness answered 200"
    assert docker.inspect(gateway["name"], "{{.HostConfig.ReadonlyRootfs}}") == "true"
    assert docker.inspect(gateway["name"], "{{.Config.User}}") == "65532:65532"


def test_openai_sdk_through_the_container(gateway):
    client = openai.OpenAI(base_url=f"{gateway['root']}/v1", api_key=MASTER)
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
    )
    assert answer.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}], stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer.choices[0].message.content
    emb = client.embeddings.create(model="text-embedding-3-small", input="Hi")
    assert len(emb.data[0].embedding) > 0


def test_sighup_reloads_the_mounted_config(docker, gateway):
    """ExecReload / `docker kill -s HUP`: the config at /etc/sluice/config.yaml is re-read."""
    config = gateway["config"]
    # Written in place: the bind mount follows the file's inode.
    config.write_text(
        gateway_config(
            gateway["mock"],
            MASTER,
            [
                ("text-embedding-3-small", "openai/text-embedding-3-small"),
                ("added-by-reload", "openai/gpt-4o-mini"),
            ],
        )
    )
    docker("kill", "--signal", "HUP", gateway["name"])
    deadline = time.time() + 10
    while time.time() < deadline:
        _, models = http("GET", f"{gateway['root']}/v1/models", key=MASTER)
        if "added-by-reload" in {m["id"] for m in models["data"]}:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the reload did not happen:\n{docker.logs(gateway['name'])}")
    assert "config reloaded" in docker.logs(gateway["name"])


def test_keys_and_spend_survive_a_restart_on_the_volume(docker, gateway):
    status, made = http(
        "POST", f"{gateway['root']}/key/generate", {"key_alias": "deploy", "max_budget": 5}, key=MASTER
    )
    assert status == 200, made
    key = made["key"]
    client = openai.OpenAI(base_url=f"{gateway['root']}/v1", api_key=key)
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}])

    started = time.time()
    docker("stop", "-t", "45", gateway["name"])
    print(f"\ndocker stop (idle gateway): {time.time() - started:.1f} s")
    assert docker.inspect(gateway["name"], "{{.State.ExitCode}}") == "0", "SIGTERM ends with exit 0"
    listing = subprocess.run(
        [docker.cli, "cp", f"{gateway['name']}:/var/lib/sluice", "-"], capture_output=True, check=True
    ).stdout
    names = {m.name for m in tarfile.open(fileobj=io.BytesIO(listing)).getmembers()}
    assert "sluice/sluice.db" in names, names

    docker("start", gateway["name"])
    wait_http(f"{gateway['root']}/health/liveliness", proc_check=docker.running_check(gateway["name"]))
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi again"}]
    )
    assert answer.choices[0].message.content, "the key made before the restart still works"
    status, info = http("GET", f"{gateway['root']}/key/info?key={key}", key=MASTER)
    assert status == 200, info
    assert info["info"]["spend"] > 0, f"the spend written before the restart is still there: {info}"


def test_sigterm_mid_stream_lets_the_stream_finish(docker, gateway):
    """Docker's stop signal drains: the listener closes at once, the open stream completes,
    the container exits 0."""
    client = openai.OpenAI(base_url=f"{gateway['root']}/v1", api_key=MASTER, max_retries=0)
    whole = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
    ).choices[0].message.content
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Hi"}],
        stream=True,
        # The mock pauses the stream for 2 s after two chunks: SIGTERM lands in the pause.
        extra_body={"mock_fault": {"stall_after_chunks": 2, "stall_ms": 2000}},
    )
    chunks = iter(stream)
    first = next(chunks)
    signalled = time.time()
    docker("kill", "--signal", "TERM", gateway["name"])
    refused = None
    while time.time() - signalled < 1.5:
        try:
            http("GET", f"{gateway['root']}/health/liveliness", timeout=1)
        except OSError:
            refused = time.time() - signalled
            break
        time.sleep(0.05)
    rest = list(chunks)
    finished = time.time() - signalled
    text = "".join(c.choices[0].delta.content or "" for c in [first, *rest] if c.choices)
    reasons = [c.choices[0].finish_reason for c in rest if c.choices and c.choices[0].finish_reason]
    print(f"\nnew connections refused {refused:.2f} s after SIGTERM; stream ended {finished:.2f} s after it")
    assert refused is not None, "the listener should close as soon as SIGTERM arrives"
    assert text == whole, "the stream was cut by the shutdown"
    assert reasons == ["stop"]
    exit_code = docker("wait", gateway["name"], timeout=60).stdout.strip()
    assert exit_code == "0", docker.logs(gateway["name"])
    assert "shutting down: draining in-flight requests" in docker.logs(gateway["name"])
