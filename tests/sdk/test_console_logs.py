"""The console's request logs in a real browser (Debian's chromium through Selenium, the real
sluice binary): a request made with the API appears on the logs page once the spend writer's
batch lands, its detail opens from its row, and the spend page counts it and draws its charts,
with nothing refused by the Content-Security-Policy along the way."""

import os
import pathlib
import time

import pytest

from conftest import MASTER_KEY

pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from test_console import _errors, _photograph, _submit, browser  # noqa: E402,F401  (the chromium fixture)


def test_a_request_shows_in_the_logs_its_detail_and_the_spend_charts(gateway, browser):
    import openai
    from selenium.webdriver.common.by import By

    root = gateway["root"]
    browser.get(f"{root}/ui/login")
    browser.find_element(By.ID, "username").send_keys("admin")
    browser.find_element(By.ID, "password").send_keys(MASTER_KEY)
    _submit(browser, "form button[type=submit]")
    assert browser.current_url.rstrip("/").endswith("/ui")

    client = openai.OpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi from the browser test"}]
    )
    request_id = raw.headers["x-request-id"]
    assert raw.parse().choices[0].message.content

    # The spend writer batches once a second: poll the list until the row is there.
    row = None
    deadline = time.time() + 10
    while row is None and time.time() < deadline:
        browser.get(f"{root}/ui/logs?model=gpt-4o-mini")
        # The id is shortened in the row; the whole id is its link's title.
        rows = [r for r in browser.find_elements(By.CSS_SELECTOR, "#logs tbody tr")
                if r.find_element(By.CSS_SELECTOR, "td.mono a").get_attribute("title") == request_id]
        row = rows[0] if rows else None
        if row is None:
            time.sleep(0.3)
    assert row is not None, f"request {request_id} not on the logs page"
    assert "success" in row.text and "gpt-4o-mini" in row.text

    old = browser.find_element(By.TAG_NAME, "html")
    row.find_element(By.LINK_TEXT, "detail").click()
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(EC.staleness_of(old))
    assert "/ui/logs/detail?id=" in browser.current_url
    assert browser.find_element(By.ID, "request-id").text == request_id
    assert browser.find_element(By.ID, "requested").text == "gpt-4o-mini"
    assert browser.find_element(By.ID, "routing").text == "0 / 0 / 0"
    attempts = browser.find_elements(By.CSS_SELECTOR, "#attempts tbody tr")
    assert len(attempts) == 1 and "ok" in attempts[0].text
    shots = os.environ.get("SLUICE_SCREENSHOTS")
    if shots:
        detail = browser.current_url.removeprefix(root)
        _photograph(browser, root, {"log-detail": detail}, pathlib.Path(shots) / "screenshots")

    browser.get(f"{root}/ui/spend?days=1")
    charts = browser.find_element(By.ID, "charts")
    assert len(charts.find_elements(By.CSS_SELECTOR, "figure.chart > svg")) == 4
    bars = charts.find_elements(By.CSS_SELECTOR, "svg rect title")
    assert any("gpt-4o-mini" in b.get_attribute("textContent") for b in bars)
    assert "gpt-4o-mini" in browser.find_element(By.TAG_NAME, "main").text

    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == [], errors


# --- Issue 41: request detail that explains, names not hashes, logs that scale, usage ---------
#
# A gateway of their own (its own store, a 0.1 s spend batch): a deployment that answers, one
# that always fails (the in-process mock's `mock_status`), a team with an alias, a user with an
# email, and a key with an alias in that team for that user.

from conftest import _json, _start, _stop  # noqa: E402

LOGS_MASTER = "sk-console-logs-master"


@pytest.fixture(scope="module")
def logs_gateway(workdir):
    sub = pathlib.Path(workdir) / "console-logs"
    sub.mkdir(exist_ok=True)
    config = sub / "config.yaml"
    config.write_text(
        f"""
model_list:
  - model_name: good
    litellm_params:
      model: mock/good
      input_cost_per_token: 0.000001
  - model_name: other
    litellm_params:
      model: mock/other
  - model_name: broken
    litellm_params:
      model: mock/broken
      mock_status: 503
    model_info:
      id: broken-1
general_settings:
  master_key: {LOGS_MASTER}
  proxy_batch_write_at: 0.1
router_settings:
  retry_backoff_ms: 1
"""
    )
    # The browser keeps its connections open until it quits, after this module's last test:
    # a short grace lets this gateway stop without waiting for them.
    proc, addr, _ = _start(["serve", "--config", str(config), "--port", "0",
                            "--shutdown-grace-secs", "1"], str(sub))
    root = f"http://{addr}"
    auth = {"authorization": f"Bearer {LOGS_MASTER}"}
    _json("POST", f"{root}/team/new", {"team_id": "t-search", "team_alias": "Search team"}, auth)
    _json("POST", f"{root}/user/new", {"user_id": "ana", "user_email": "ana@example.com",
                                        "auto_create_key": False}, auth)
    made = _json("POST", f"{root}/key/generate",
                 {"key_alias": "browser-app", "team_id": "t-search", "user_id": "ana"}, auth)
    yield {"root": root, "base_url": f"{root}/v1", "key": made["key"], "auth": auth}
    assert _stop(proc) == 0


def _signed_in(browser, root):
    from selenium.webdriver.common.by import By

    browser.delete_all_cookies()
    browser.get(f"{root}/ui/login")
    browser.find_element(By.ID, "username").send_keys("admin")
    browser.find_element(By.ID, "password").send_keys(LOGS_MASTER)
    _submit(browser, "form button[type=submit]")
    assert browser.current_url.rstrip("/").endswith("/ui"), browser.page_source


def _landed(gw, request_id):
    """The request's spend log once the writer's batch has landed."""
    deadline = time.time() + 10
    while time.time() < deadline:
        rows = _json("GET", f"{gw['root']}/spend/logs?request_id={request_id}", None, gw["auth"])
        if rows:
            return rows[0]
        time.sleep(0.1)
    raise AssertionError(f"request {request_id} never reached the spend log")


def _chat(gw, model, **extra):
    """A chat request with the gateway's key; (status, request id, the answer's JSON)."""
    import urllib.error
    import urllib.request

    import json

    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], **extra}
    req = urllib.request.Request(f"{gw['base_url']}/chat/completions", data=json.dumps(body).encode(),
                                 method="POST")
    req.add_header("content-type", "application/json")
    req.add_header("authorization", f"Bearer {gw['key']}")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.headers["x-request-id"], json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers["x-request-id"], json.loads(e.read())


def _name_of(gw):
    """The key as every page should show it: its alias and last four characters."""
    return f"browser-app (sk-...{gw['key'][-4:]})"


def test_a_failed_requests_detail_shows_what_the_client_got(logs_gateway, browser):
    from selenium.webdriver.common.by import By

    gw = logs_gateway
    status, request_id, answer = _chat(gw, "broken", num_retries=1)
    assert status == 503, answer
    row = _landed(gw, request_id)
    _signed_in(browser, gw["root"])
    browser.get(f"{gw['root']}/ui/logs?status=failure")
    link = browser.find_element(By.CSS_SELECTOR, f"#logs a[href='/ui/logs/detail?id={row['id']}']")
    old = browser.find_element(By.TAG_NAME, "html")
    link.click()
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(EC.staleness_of(old))
    assert browser.find_element(By.ID, "http-status").text == "503"
    assert browser.find_element(By.ID, "deployment").text == "none"
    assert browser.find_element(By.ID, "served").text == "none"
    message = answer["error"]["message"]
    assert browser.find_element(By.ID, "error-message").text == message
    assert browser.find_element(By.ID, "error-type").text == answer["error"]["type"]
    attempts = browser.find_elements(By.CSS_SELECTOR, "#attempts tbody tr")
    assert len(attempts) == 2
    for a in attempts:
        assert "broken-1" in a.text and "503" in a.text and message in a.text
    # Who sent it, by name, linked to their pages.
    key = browser.find_element(By.CSS_SELECTOR, "#key a")
    assert key.text == _name_of(gw)
    assert "/ui/keys/edit?key=" in key.get_attribute("href")
    team = browser.find_element(By.CSS_SELECTOR, "#team a")
    assert team.text == "Search team" and team.get_attribute("href").endswith("team_id=t-search")
    assert browser.find_element(By.CSS_SELECTOR, "#user a").text == "ana@example.com"
    assert gw["key"] not in browser.page_source, "never the key's plaintext"
    assert _errors(browser) == [], _errors(browser)


def test_keys_show_as_alias_and_last_four_on_every_page(logs_gateway, browser):
    from selenium.webdriver.common.by import By

    gw = logs_gateway
    status, request_id, _ = _chat(gw, "good")
    assert status == 200
    _landed(gw, request_id)
    name = _name_of(gw)
    _signed_in(browser, gw["root"])
    root = gw["root"]

    browser.get(f"{root}/ui/logs?request_id={request_id}")
    row = browser.find_element(By.CSS_SELECTOR, "#logs tbody tr")
    assert name in row.text and "Search team" in row.text
    # Compact: the request id shortened, whole on hover; the time on one line.
    rid = row.find_element(By.CSS_SELECTOR, "td.mono a")
    assert rid.get_attribute("title") == request_id and rid.text.endswith("…")
    assert "\n" not in row.find_element(By.CSS_SELECTOR, "td").text

    _submit(browser, "#logs a.detail")
    assert browser.find_element(By.CSS_SELECTOR, "#key a").text == name

    browser.get(f"{root}/ui/")
    assert name in browser.find_element(By.ID, "top-keys").text

    browser.get(f"{root}/ui/spend?days=1")
    main = browser.find_element(By.TAG_NAME, "main")
    assert name in main.text
    titles = [t.get_attribute("textContent") for t in main.find_elements(By.CSS_SELECTOR, "svg rect title")]
    assert any(name in t for t in titles), titles
    csv = browser.find_element(By.ID, "csv").get_attribute("href")
    import urllib.request

    # The CSV has the key's alias and name beside its hash (read with the page's session).
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in browser.get_cookies())
    req = urllib.request.Request(csv, headers={"cookie": cookie})
    text = urllib.request.urlopen(req).read().decode()
    header, *lines = text.splitlines()
    assert header.endswith(",key_alias,key_name,team_alias"), header
    assert any(line.endswith(f",browser-app,sk-...{gw['key'][-4:]},Search team") for line in lines), text

    browser.get(f"{root}/ui/audit?table_name=keys")
    assert name in browser.find_element(By.ID, "audit").text
    assert gw["key"] not in browser.page_source
    assert _errors(browser) == [], _errors(browser)


def test_the_next_page_of_logs_keeps_the_filter(logs_gateway, browser):
    from selenium.webdriver.common.by import By

    gw = logs_gateway
    # 205 requests to `other` (more than a page of 200), and some to `good` between them.
    last = None
    for i in range(205):
        status, last, _ = _chat(gw, "other")
        assert status == 200
        if i % 50 == 0:
            assert _chat(gw, "good")[0] == 200
    _landed(gw, last)
    _signed_in(browser, gw["root"])
    browser.get(f"{gw['root']}/ui/logs?model=other")
    first = browser.find_elements(By.CSS_SELECTOR, "#logs tbody tr")
    assert len(first) == 200
    # Rows run newest first by (millisecond, id): two requests in one millisecond are in id
    # order, so the last one sent is on the newest page but not necessarily at its top.
    newest = [r.find_element(By.CSS_SELECTOR, "td.mono a").get_attribute("title") for r in first]
    assert last in newest
    assert not browser.find_elements(By.ID, "newer"), "the newest page has no newer one"
    older = browser.find_element(By.ID, "older")
    href = older.get_attribute("href")
    assert "model=other" in href and "before=" in href, href
    _submit(browser, "#older")
    rows = browser.find_elements(By.CSS_SELECTOR, "#logs tbody tr")
    assert len(rows) == 5, [r.text for r in rows]
    assert all(r.find_elements(By.CSS_SELECTOR, "td")[3].text == "other" for r in rows)
    # The filter is still in the form, and the way back leads to the first page.
    from selenium.webdriver.support.ui import Select

    assert Select(browser.find_element(By.ID, "model")).first_selected_option.get_attribute("value") == "other"
    assert not browser.find_elements(By.ID, "older")
    _submit(browser, "#newer")
    again = [r.find_element(By.CSS_SELECTOR, "td.mono a").get_attribute("title")
             for r in browser.find_elements(By.CSS_SELECTOR, "#logs tbody tr")]
    assert again == newest
    assert _errors(browser) == [], _errors(browser)


def test_usage_by_tag_user_and_end_user_honours_the_dates(logs_gateway, browser):
    from selenium.webdriver.common.by import By

    gw = logs_gateway
    for end_user in ("customer-1", "customer-2", "customer-1"):
        status, last, _ = _chat(gw, "good", user=end_user, tags=["usage-tag"])
        assert status == 200
    _landed(gw, last)
    _signed_in(browser, gw["root"])
    today = time.strftime("%Y-%m-%d", time.gmtime())

    def tables():
        return {t: browser.find_element(By.ID, t).text for t in ("tags", "users", "end-users")}

    # Today, chosen with the date inputs (no script: a plain GET form).
    browser.get(f"{gw['root']}/ui/spend")
    for field in ("from", "to"):
        el = browser.find_element(By.ID, field)
        assert el.get_attribute("type") == "date"
        browser.execute_script("arguments[0].value = arguments[1]", el, today)
    _submit(browser, "#range")
    assert f"from={today}" in browser.current_url and f"to={today}" in browser.current_url
    shown = tables()
    assert "usage-tag" in shown["tags"]
    assert "ana@example.com" in shown["users"]
    assert "customer-1" in shown["end-users"] and "customer-2" in shown["end-users"]
    end_users = {r.find_element(By.CSS_SELECTOR, "td").text: r.find_elements(By.CSS_SELECTOR, "td")[2].text
                 for r in browser.find_elements(By.CSS_SELECTOR, "#end-users tbody tr")}
    assert end_users["customer-1"] == "2" and end_users["customer-2"] == "1", end_users
    assert f"from={today}" in browser.find_element(By.ID, "csv").get_attribute("href")

    # A range before these requests: none of them.
    browser.get(f"{gw['root']}/ui/spend?from=2020-01-01&to=2020-01-31")
    shown = tables()
    assert "usage-tag" not in shown["tags"]
    assert "ana@example.com" not in shown["users"]
    assert "customer-1" not in shown["end-users"]
    assert "2020-01-01 to 2020-01-31" in browser.find_element(By.ID, "period").text
    assert _errors(browser) == [], _errors(browser)
