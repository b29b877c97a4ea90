"""AWS Secrets Manager as sluice's `key_management_system`, against moto's server.

moto (`moto[server]`) serves Secrets Manager's JSON 1.1 API on loopback and checks the request
shape; boto3 creates and rotates the secret. sluice starts with
`key_management_system: aws_secret_manager`, reads the deployment's `api_key:
os.environ/NAME` from it (GetSecretValue signed with SigV4, the endpoint from
`AWS_ENDPOINT_URL_SECRETS_MANAGER`), and the upstream (a small OpenAI-shaped server that keeps
the Authorization headers it was sent) must see that key; after a rotation it must see the
new one without a restart; with moto gone, the last good key keeps serving and
`/health/readiness` names the failing secret. LiteLLM's `primary_secret_name` (one secret
holding a JSON object of every value) is read the same way.
"""

import json
import pathlib
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
from moto.server import ThreadedMotoServer

from conftest import _free_port, _json, _start, _stop

NAME = "SLUICE_SDK_SECRET_KEY"
ANSWER = {
    "id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


class Upstream:
    """An OpenAI-shaped upstream that keeps the Authorization of every request."""

    def __init__(self):
        self.keys = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.keys.append(self.headers.get("authorization"))
                body = json.dumps(ANSWER).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def _chat(addr):
    return _json(
        "POST", f"http://{addr}/v1/chat/completions",
        {"model": "gpt", "messages": [{"role": "user", "content": "hi"}]},
    )


def _eventually(check, within=10.0):
    deadline = time.time() + within
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


AWS = {
    "AWS_ACCESS_KEY_ID": "AKIDSECRETS",
    "AWS_SECRET_ACCESS_KEY": "secrets-test-secret",
    "AWS_REGION_NAME": "us-east-1",
}


def _moto():
    """moto's server on a free loopback port, and a boto3 Secrets Manager client of it."""
    port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    sm = boto3.client(
        "secretsmanager", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=AWS["AWS_ACCESS_KEY_ID"], aws_secret_access_key=AWS["AWS_SECRET_ACCESS_KEY"],
    )
    return moto, endpoint, sm


def _serve(workdir, name, upstream, endpoint, settings):
    """sluice on a config whose one deployment's key is `os.environ/NAME`, read from AWS."""
    sub = pathlib.Path(workdir) / name
    sub.mkdir(exist_ok=True)
    config = sub / "config.yaml"
    config.write_text(
        f"""
model_list:
  - model_name: gpt
    litellm_params:
      model: openai/gpt-4o
      api_base: {upstream.url}
      api_key: os.environ/{NAME}
general_settings:
  key_management_system: aws_secret_manager
  key_management_settings: {settings}
"""
    )
    return _start(
        ["serve", "--config", str(config), "--port", "0", "--data-dir", str(sub / "data")],
        str(sub),
        env={**AWS, "AWS_ENDPOINT_URL_SECRETS_MANAGER": endpoint},
    )


def test_aws_secrets_manager_key_reaches_the_upstream_and_rotates(workdir):
    moto, endpoint, sm = _moto()
    sm.create_secret(Name=NAME, SecretString="sk-aws-1")
    upstream = Upstream()
    proc, addr, log = _serve(workdir, "secret-managers", upstream, endpoint, "{refresh_interval: 0.5}")
    try:
        _chat(addr)
        assert upstream.keys[-1] == "Bearer sk-aws-1"
        ready = _json("GET", f"http://{addr}/health/readiness")["secrets"]
        assert ready["manager"] == "aws_secret_manager" and ready["state"] == "ok", ready

        # Rotated in Secrets Manager: the next refresh reloads the config, no restart.
        sm.put_secret_value(SecretId=NAME, SecretString="sk-aws-2")
        assert _eventually(lambda: (_chat(addr), upstream.keys[-1])[1] == "Bearer sk-aws-2"), upstream.keys[-3:]

        # moto gone: the last good key keeps serving, readiness names the secret.
        moto.stop()
        assert _eventually(
            lambda: _json("GET", f"http://{addr}/health/readiness")["secrets"]["state"] == "degraded"
        )
        ready = _json("GET", f"http://{addr}/health/readiness")["secrets"]
        assert ready["failing"] == {NAME: "unavailable"}, ready
        _chat(addr)
        assert upstream.keys[-1] == "Bearer sk-aws-2"
        text = open(log).read()
        assert "sk-aws-" not in text and "secrets-test-secret" not in text, "a secret reached the log"
    finally:
        _stop(proc)
        upstream.server.shutdown()
        try:
            moto.stop()
        except Exception:
            pass


def test_aws_primary_secret_name_holds_every_value(workdir):
    """LiteLLM's `primary_secret_name`: one secret, a JSON object of names to values."""
    moto, endpoint, sm = _moto()
    sm.create_secret(Name="sluice/keys", SecretString=json.dumps({NAME: "sk-from-primary"}))
    upstream = Upstream()
    proc, addr, _ = _serve(
        workdir, "secret-managers-primary", upstream, endpoint, "{primary_secret_name: sluice/keys}"
    )
    try:
        _chat(addr)
        assert upstream.keys[-1] == "Bearer sk-from-primary"
    finally:
        _stop(proc)
        upstream.server.shutdown()
        moto.stop()
