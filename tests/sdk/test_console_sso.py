"""Single sign-on to the admin console through a real OpenID Connect provider on loopback
(PyPI's oidc-provider-mock: authorization endpoint, token endpoint with client authentication,
userinfo), configured with LiteLLM's GENERIC_* variables: the authorization-code flow over
plain HTTP with a cookie jar, and in Debian's chromium; the user lands with the role and team
its claims name, is kept in the store, and loses the session when an admin changes the role."""

import http.cookiejar
import json
import pathlib
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import MASTER_KEY, _free_port, _json, _start, _stop
from test_console import _submit, browser  # noqa: F401  (the chromium fixture)


@pytest.fixture(scope="module")
def idp(workdir):
    port = _free_port()
    log = open(pathlib.Path(workdir) / "oidc-provider.log", "w")
    users = [
        {"sub": "u-ana", "preferred_username": "ana", "email": "ana@example.com",
         "litellm_role": "proxy_admin_viewer", "groups": ["sso-team"]},
        {"sub": "u-bo", "preferred_username": "bo"},
    ]
    args = [sys.executable, "-m", "oidc_provider_mock", "--port", str(port)]
    for u in users:
        args += ["--user-claims", json.dumps(u)]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            urllib.request.urlopen(base + "/.well-known/openid-configuration").read()
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        raise RuntimeError(open(log.name).read())
    yield base
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def sso_gateway(workdir, idp):
    d = pathlib.Path(workdir) / "sso-gw"
    d.mkdir(exist_ok=True)
    port = _free_port()
    root = f"http://127.0.0.1:{port}"
    # A registered client: the provider checks its secret and its redirect URI.
    client = _json("POST", idp + "/oauth2/clients", {
        "redirect_uris": [root + "/ui/sso/callback"],
        "token_endpoint_auth_method": "client_secret_basic",
    })
    config = d / "config.yaml"
    config.write_text(f"""
model_list:
  - model_name: in-process
    litellm_params: {{model: mock/in-process}}
general_settings:
  master_key: {MASTER_KEY}
""")
    env = {
        "GENERIC_CLIENT_ID": client["client_id"],
        "GENERIC_CLIENT_SECRET": client["client_secret"],
        "GENERIC_AUTHORIZATION_ENDPOINT": idp + "/oauth2/authorize",
        "GENERIC_TOKEN_ENDPOINT": idp + "/oauth2/token",
        "GENERIC_USERINFO_ENDPOINT": idp + "/userinfo",
        "GENERIC_USER_ROLE_ATTRIBUTE": "litellm_role",
        "GENERIC_USER_TEAM_ATTRIBUTE": "groups",
        "PROXY_BASE_URL": root,
    }
    proc, _, log = _start(["serve", "--config", str(config), "--port", str(port)], str(d), env)
    # The team the provider's claims name.
    _json("POST", root + "/team/new", {"team_id": "sso-team"}, {"authorization": f"Bearer {MASTER_KEY}"})
    yield root, log, client["client_secret"]
    _stop(proc)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _agent():
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())

    def go(method, url, form=None):
        data = None if form is None else urllib.parse.urlencode(form).encode()
        req = urllib.request.Request(url, method=method, data=data)
        try:
            with opener.open(req) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    return go


def test_sign_in_through_the_provider_lands_with_the_claimed_role(sso_gateway, idp):
    root, log, secret = sso_gateway
    go = _agent()
    status, _, page = go("GET", root + "/ui/login")
    assert status == 200 and 'href="/ui/sso/login"' in page
    status, h, _ = go("GET", root + "/ui/sso/login")
    assert status == 303
    authorize = h["Location"]
    q = urllib.parse.parse_qs(urllib.parse.urlparse(authorize).query)
    assert authorize.startswith(idp + "/oauth2/authorize")
    assert q["code_challenge_method"] == ["S256"] and q["redirect_uri"] == [root + "/ui/sso/callback"]
    # The provider's form: sign in as ana; it sends the browser back with a code.
    status, h, _ = go("POST", authorize, {"sub": "u-ana"})
    assert status == 302, status
    callback = h["Location"]
    assert callback.startswith(root + "/ui/sso/callback?")
    # A callback with another state is refused, and changes nothing.
    forged = callback.replace("state=", "state=x")
    assert go("GET", forged)[0] == 401
    status, _, _ = go("GET", callback)
    # The forged try cleared the flight cookie: the real one must start again.
    assert status == 401
    status, h, _ = go("GET", root + "/ui/sso/login")
    status, h, _ = go("POST", h["Location"], {"sub": "u-ana"})
    status, h, page = go("GET", h["Location"])
    assert status == 200, page
    assert h.get("Refresh") == "0; url=/ui/"
    status, _, page = go("GET", root + "/ui/")
    assert status == 200
    assert "ana" in page and "proxy_admin_viewer" in page
    # Kept in the store as LiteLLM does: role, email and the claimed team.
    info = _json("GET", root + "/user/info?user_id=ana", headers={"authorization": f"Bearer {MASTER_KEY}"})
    user = info.get("user_info", info)
    assert user["user_role"] == "proxy_admin_viewer"
    assert user["user_email"] == "ana@example.com"
    assert user["team_id"] == "sso-team"
    # An admin changes the role: the session ends at the next page.
    _json("POST", root + "/user/update", {"user_id": "ana", "user_role": "internal_user_viewer"},
          {"authorization": f"Bearer {MASTER_KEY}"})
    status, h, _ = go("GET", root + "/ui/")
    assert status == 303 and h["Location"] == "/ui/login"
    # The client secret never reached the log.
    assert secret not in open(log).read()


def test_sign_in_in_chromium_with_the_default_role(sso_gateway, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    root, _, _ = sso_gateway
    browser.delete_all_cookies()
    browser.get(root + "/ui/login")
    _submit(browser, "#sso")
    # The provider's page: bo has no role claim.
    browser.find_element(By.NAME, "sub").send_keys("u-bo")
    _submit(browser, "form button[type=submit]")
    deadline = time.time() + 10
    while time.time() < deadline and not browser.current_url.rstrip("/").endswith("/ui"):
        time.sleep(0.1)
    assert browser.current_url.rstrip("/").endswith("/ui"), browser.current_url
    assert "internal_user_viewer" in browser.page_source
