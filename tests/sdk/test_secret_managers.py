"""AWS Secrets Manager as sluice's `key_management_system`, against moto's server.

moto (`moto[server]`) serves Secrets Manager's JSON 1.1 API on loopback and checks the request
shape; boto3 creates and rotates the secret. sluice starts with
`key_management_system: aws_secret_manager`, reads the deployment's `api_key:
os.environ/NAME` from it (GetSecretValue signed with SigV4, the endpoint from
`AWS_ENDPOINT_URL_SECRETS_MANAGER`), and the upstream (a small OpenAI-shaped server that keeps
the Authorization headers it was sent) must see that key; after a rotation it must see the
new one without a restart; with moto gone, the last good key keeps serving and
`/health/readiness` names the failing secret.
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


def test_aws_secrets_manager_key_reaches_the_upstream_and_rotates(workdir):
    port = _free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    aws = {
        "AWS_ACCESS_KEY_ID": "AKIDSECRETS",
        "AWS_SECRET_ACCESS_KEY": "secrets-test-secret",
        "AWS_REGION_NAME": "us-east-1",
    }
    sm = boto3.client(
        "secretsmanager", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=aws["AWS_ACCESS_KEY_ID"], aws_secret_access_key=aws["AWS_SECRET_ACCESS_KEY"],
    )
    sm.create_secret(Name=NAME, SecretString="sk-aws-1")
    upstream = Upstream()
    sub = pathlib.Path(workdir) / "secret-managers"
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
  key_management_settings:
    refresh_interval: 0.5
"""
    )
    proc, addr, log = _start(
        ["serve", "--config", str(config), "--port", "0", "--data-dir", str(sub / "data")],
        str(sub),
        env={**aws, "AWS_ENDPOINT_URL_SECRETS_MANAGER": endpoint},
    )
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
