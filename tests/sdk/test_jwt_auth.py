"""JWT auth of API calls with a real OpenID Connect provider on loopback (PyPI's
oidc-provider-mock, RS256): its ID tokens, got through the authorization-code flow, are the
OpenAI SDK's API key. The claimed team's models apply; a token for another audience is refused;
the provider restarting with a new signing key (a rotation) is followed on its first token."""

import base64
import json
import pathlib
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import openai
import pytest

from conftest import MASTER_KEY, _free_port, _json, _start, _stop

USERS = [
    {"sub": "u-dev", "team": "jwt-team"},
    {"sub": "u-ops", "scope": "openid litellm_proxy_admin"},
]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Provider:
    """oidc-provider-mock on a fixed port, restartable (each start makes a new signing key)."""

    def __init__(self, workdir):
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(pathlib.Path(workdir) / "oidc-jwt.log", "a")
        self.proc = None

    def start(self):
        args = [sys.executable, "-m", "oidc_provider_mock", "--port", str(self.port)]
        for u in USERS:
            args += ["--user-claims", json.dumps(u)]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.base + "/.well-known/openid-configuration").read()
                return
            except OSError:
                time.sleep(0.1)
        self.proc.kill()
        raise RuntimeError("the OIDC provider did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def client(self):
        return _json("POST", self.base + "/oauth2/clients", {
            "redirect_uris": ["http://127.0.0.1:9/cb"],
            "token_endpoint_auth_method": "client_secret_basic",
        })

    def id_token(self, client, sub):
        """An ID token for `sub`, through the authorization-code flow."""
        opener = urllib.request.build_opener(_NoRedirect())
        q = urllib.parse.urlencode({
            "response_type": "code", "client_id": client["client_id"],
            "redirect_uri": "http://127.0.0.1:9/cb", "scope": "openid", "state": "s", "nonce": "n",
        })
        req = urllib.request.Request(f"{self.base}/oauth2/authorize?{q}", method="POST",
                                     data=urllib.parse.urlencode({"sub": sub}).encode())
        try:
            opener.open(req)
            raise AssertionError("expected a redirect with the code")
        except urllib.error.HTTPError as e:
            assert e.code == 302, e.code
            code = urllib.parse.parse_qs(urllib.parse.urlparse(e.headers["Location"]).query)["code"][0]
        basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
        req = urllib.request.Request(f"{self.base}/oauth2/token", method="POST", data=urllib.parse.urlencode({
            "grant_type": "authorization_code", "code": code, "redirect_uri": "http://127.0.0.1:9/cb",
        }).encode())
        req.add_header("authorization", f"Basic {basic}")
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())["id_token"]


@pytest.fixture(scope="module")
def provider(workdir):
    p = Provider(workdir)
    p.start()
    yield p
    p.stop()


@pytest.fixture(scope="module")
def jwt_gateway(workdir, provider):
    d = pathlib.Path(workdir) / "jwt-gw"
    d.mkdir(exist_ok=True)
    client = provider.client()
    config = d / "config.yaml"
    config.write_text(f"""
model_list:
  - model_name: allowed
    litellm_params: {{model: mock/allowed}}
  - model_name: other
    litellm_params: {{model: mock/other}}
general_settings:
  master_key: {MASTER_KEY}
  enable_jwt_auth: true
  litellm_jwtauth:
    team_id_jwt_field: team
    user_id_jwt_field: sub
""")
    env = {
        "JWT_PUBLIC_KEY_URL": provider.base + "/.well-known/openid-configuration",
        "JWT_AUDIENCE": client["client_id"],
        "JWT_ISSUER": provider.base,
    }
    port = _free_port()
    proc, _, log = _start(["serve", "--config", str(config), "--port", str(port)], str(d), env)
    root = f"http://127.0.0.1:{port}"
    _json("POST", root + "/team/new", {"team_id": "jwt-team", "models": ["allowed"]},
          {"authorization": f"Bearer {MASTER_KEY}"})
    yield root, client, log
    _stop(proc)


def test_the_providers_id_tokens_are_api_keys(jwt_gateway, provider):
    root, client, log = jwt_gateway
    token = provider.id_token(client, "u-dev")
    assert token.count(".") == 2
    sdk = openai.OpenAI(base_url=root + "/v1", api_key=token, max_retries=0)
    answer = sdk.chat.completions.create(model="allowed", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content
    # The claimed team's models hold.
    with pytest.raises(openai.AuthenticationError) as e:
        sdk.chat.completions.create(model="other", messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["code"] == "model_not_allowed"
    # The admin scope manages.
    admin = provider.id_token(client, "u-ops")
    made = _json("POST", root + "/key/generate", {}, {"authorization": f"Bearer {admin}"})
    assert made["key"].startswith("sk-")
    # A token for another client (audience) is refused, naming why, never echoing it.
    stranger = provider.id_token(provider.client(), "u-dev")
    bad = openai.OpenAI(base_url=root + "/v1", api_key=stranger, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.chat.completions.create(model="allowed", messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["code"] == "invalid_jwt"
    assert "audience" in e.value.body["message"]
    assert stranger not in json.dumps(e.value.body)
    assert token not in open(log).read(), "tokens never reach the log"


def test_a_new_signing_key_is_followed(jwt_gateway, provider):
    root, client, _ = jwt_gateway
    # The provider restarts with a new key under the same key id (and forgets its clients):
    # the new key is fetched when its first token comes.
    provider.stop()
    provider.start()
    fresh_client = provider.client()
    token = provider.id_token(fresh_client, "u-ops")
    time.sleep(2.1)  # at most one fetch every 2 s for tokens naming an unknown key
    # This client is not the audience the gateway accepts: once the new key is in, that is
    # the reason given (before, it was the signature).
    req = urllib.request.Request(root + "/key/list")
    req.add_header("authorization", f"Bearer {token}")
    try:
        urllib.request.urlopen(req)
        raise AssertionError("another audience must be refused")
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        # The new key was fetched: the refusal is the audience, not an unknown key.
        assert e.code == 401 and "audience" in body["error"]["message"], body
