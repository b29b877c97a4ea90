"""The console's forms, layout and honesty in a real browser (Debian's chromium through
Selenium, the real sluice binary): no page scrolls sideways on a 390 px phone, a long alias
does not widen the desktop's keys table, Back after making a key does not make another, a
refused form shows each problem beside its field and keeps what was typed, the pickers list
the teams, users and models, a deployment without a key says "not configured", the
playground keeps a conversation and its key, and the stylesheet is fingerprinted, cached for a
year and gzipped when asked."""

import gzip
import json
import os
import re
import urllib.request

import pytest

from conftest import MASTER_KEY

pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from test_console import (  # noqa: E402,F401  (the chromium fixture and its helpers)
    _desktop,
    _errors,
    _fill,
    _phone,
    _sign_in,
    _submit,
    _widths,
    browser,
)

# An alias with no space to break at, as a generated service name is.
LONG_ALIAS = "batch-embedding-pipeline-" + "x" * 160


def _admin(gateway, path, body):
    req = urllib.request.Request(
        f"{gateway['root']}{path}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {MASTER_KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req) as r:
        return json.load(r)


def _get(url, headers=None):
    """A GET without following redirects: status, headers, raw body."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {})) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def _key_count(b, root):
    from selenium.webdriver.common.by import By

    b.get(f"{root}/ui/keys")
    text = b.find_element(By.TAG_NAME, "main").text
    found = re.search(r"(\d+) keys", text)
    return int(found.group(1)) if found else 0


def test_no_page_scrolls_sideways_on_a_phone_nor_from_a_long_alias(gateway, browser):
    from selenium.webdriver.common.by import By

    root = gateway["root"]
    _admin(gateway, "/team/new", {"team_id": "team-" + "y" * 120})
    made = _admin(gateway, "/key/generate", {"key_alias": LONG_ALIAS, "models": ["gpt-4o-mini"]})
    _admin(gateway, "/customer/new", {"user_id": "end-user-" + "z" * 120})
    _sign_in(browser, root, "admin", MASTER_KEY)

    # On a desktop the long alias is cut in its cell (whole in its title), not a wider table.
    _desktop(browser)
    browser.get(f"{root}/ui/keys")
    widths = browser.execute_script(
        "const t = document.getElementById('keys'), m = document.querySelector('main');"
        "return [t.getBoundingClientRect().width, m.clientWidth,"
        " document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert widths[0] <= widths[1] and widths[2] <= widths[3], widths
    cell = browser.find_element(By.CSS_SELECTOR, f"#keys span.name[title='{LONG_ALIAS}']")
    assert cell.get_attribute("title") == LONG_ALIAS

    token = made["token"]
    pages = [
        "/ui/", "/ui/keys", f"/ui/keys/edit?key={token}", "/ui/keys/created", "/ui/models",
        "/ui/spend", "/ui/logs", "/ui/playground", "/ui/teams",
        "/ui/teams/edit?team_id=team-" + "y" * 120, "/ui/users", "/ui/customers",
        "/ui/customers/edit?user_id=end-user-" + "z" * 120, "/ui/audit", "/ui/config",
        "/ui/no-such-page",
    ]
    _phone(browser)
    try:
        wide = {}
        for page in pages:
            browser.get(f"{root}{page}")
            assert browser.find_element(By.TAG_NAME, "h1").text
            scroll, inner = _widths(browser)
            assert inner == 390, (page, inner)
            if scroll > inner:
                wide[page] = scroll
        assert wide == {}, f"pages wider than a 390 px phone: {wide}"
        # The navigation wraps: every link is on screen, none past the right edge.
        right = browser.execute_script(
            "return Math.max(...[...document.querySelectorAll('header a, header button')]"
            ".map(e => e.getBoundingClientRect().right))"
        )
        assert right <= 390, right
    finally:
        _desktop(browser)
    # The 404 above is the one error logged on purpose.
    assert [e for e in _errors(browser) if "no-such-page" not in e["message"]] == []


def test_back_after_making_a_key_does_not_make_another(gateway, browser):
    from selenium.webdriver.common.by import By

    root = gateway["root"]
    _sign_in(browser, root, "admin", MASTER_KEY)
    before = _key_count(browser, root)
    browser.get(f"{root}/ui/keys")
    _fill(browser, {"key_alias": "made-once"})
    _submit(browser, "form[action='/ui/keys/new'] button")
    assert browser.current_url.endswith("/ui/keys/created")
    key = browser.find_element(By.ID, "new-key").text
    assert key.startswith("sk-") and key not in browser.current_url

    # Reload: the page says the key was shown, and shows it no more; nothing is posted.
    browser.refresh()
    assert browser.find_element(By.ID, "shown").text
    assert key not in browser.page_source
    # Back to the form's page, then forward again: still one key more than before.
    browser.back()
    assert browser.current_url.endswith("/ui/keys"), browser.current_url
    browser.forward()
    assert key not in browser.page_source
    assert _key_count(browser, root) == before + 1


def test_a_refused_form_shows_each_problem_beside_its_field_and_keeps_the_rest(gateway, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    root = gateway["root"]
    _admin(gateway, "/team/new", {"team_id": "kept-team"})
    _admin(gateway, "/key/generate", {"key_alias": "taken-alias"})
    _sign_in(browser, root, "admin", MASTER_KEY)
    browser.get(f"{root}/ui/keys")
    _fill(browser, {"key_alias": "taken-alias", "team_id": "kept-team", "rpm_limit": "7",
                    "budget_duration": "30d", "max_budget": "2.5"})
    browser.find_element(By.CSS_SELECTOR, "#models input[value='gpt-4o-mini']").click()
    _submit(browser, "form[action='/ui/keys/new'] button")

    problem = browser.find_element(By.ID, "key_alias-error")
    assert "already exists" in problem.text
    # Beside its field: in the same cell as the alias input.
    field = browser.find_element(By.ID, "key_alias")
    assert problem.find_element(By.XPATH, "..") == field.find_element(By.XPATH, "..")
    assert field.get_attribute("aria-invalid") == "true"
    assert "already exists" in browser.find_element(By.ID, "problems").text
    # Everything else as typed.
    assert field.get_attribute("value") == "taken-alias"
    assert browser.find_element(By.ID, "rpm_limit").get_attribute("value") == "7"
    assert browser.find_element(By.ID, "max_budget").get_attribute("value") == "2.5"
    assert browser.find_element(By.ID, "budget_duration").get_attribute("value") == "30d"
    assert Select(browser.find_element(By.ID, "team_id")).first_selected_option.get_attribute("value") == "kept-team"
    assert browser.find_element(By.CSS_SELECTOR, "#models input[value='gpt-4o-mini']").is_selected()

    # Several problems at once, each by its field (a number field the browser would check
    # itself is sent as typed here, the way a script or an older browser would).
    browser.execute_script("document.querySelectorAll('input').forEach(e => e.removeAttribute('pattern'))")
    _fill(browser, {"key_alias": "fresh-alias", "budget_duration": "monthly"})
    browser.execute_script("document.getElementById('rpm_limit').type = 'text'")
    _fill(browser, {"rpm_limit": "lots"})
    _submit(browser, "form[action='/ui/keys/new'] button")
    assert "lots" in browser.find_element(By.ID, "rpm_limit-error").text
    assert "monthly" in browser.find_element(By.ID, "budget_duration-error").text
    assert browser.find_element(By.ID, "key_alias").get_attribute("value") == "fresh-alias"

    # An error page has a way back: a key that does not exist.
    browser.get(f"{root}/ui/keys/edit?key=nope")
    back = browser.find_element(By.ID, "back")
    assert back.get_attribute("href").endswith("/ui/keys")


def test_pickers_list_the_teams_users_and_models(gateway, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    root = gateway["root"]
    _admin(gateway, "/team/new", {"team_id": "picked-team", "team_alias": "Picked"})
    _admin(gateway, "/user/new", {"user_id": "picked-user", "auto_create_key": False})
    _sign_in(browser, root, "admin", MASTER_KEY)

    def options(select_id):
        return [o.get_attribute("value") for o in Select(browser.find_element(By.ID, select_id)).options]

    browser.get(f"{root}/ui/keys")
    assert "picked-team" in options("team_id")
    assert "picked-user" in options("user_id")
    boxes = [b.get_attribute("value") for b in browser.find_elements(By.CSS_SELECTOR, "#models input[type=checkbox]")]
    assert "gpt-4o-mini" in boxes and "in-process" in boxes, boxes
    assert browser.find_element(By.ID, "rpm_limit").get_attribute("type") == "number"
    assert browser.find_element(By.ID, "max_budget").get_attribute("step") == "any"

    # A user made with a team is among the team's members, and the user list says so.
    browser.get(f"{root}/ui/users")
    assert "picked-team" in options("team_id")
    _fill(browser, {"user_id": "joins-by-form", "team_id": "picked-team"})
    _submit(browser, "form[action='/ui/users/new'] button")
    assert "joins-by-form created" in browser.find_element(By.ID, "notice").text
    row = browser.find_element(By.XPATH, "//table[@id='users']//tr[contains(., 'joins-by-form')]")
    # The team by its name, linked to its page (its id only in the link and the title).
    assert "Picked" in row.text and "picked-team" not in row.text, row.text
    team_link = row.find_element(By.CSS_SELECTOR, "a[href*='team_id=picked-team']")
    assert team_link.get_attribute("title") == "picked-team"
    browser.get(f"{root}/ui/teams/edit?team_id=picked-team")
    assert "joins-by-form" in browser.find_element(By.ID, "members").text
    # And one added on the team's page has the team on the users page.
    Select(browser.find_element(By.ID, "member_user_id")).select_by_value("picked-user")
    _submit(browser, "#add-member button")
    assert "picked-user" in browser.find_element(By.ID, "members").text
    browser.get(f"{root}/ui/users")
    row = browser.find_element(By.XPATH, "//table[@id='users']//tr[contains(., 'picked-user')]")
    assert "Picked" in row.text, row.text


def test_a_deployment_without_a_key_is_not_configured(gateway, browser):
    from selenium.webdriver.common.by import By

    if os.environ.get("ANTHROPIC_API_KEY"):
        pytest.skip("ANTHROPIC_API_KEY is set: the deployment would have a key")
    root = gateway["root"]
    _sign_in(browser, root, "admin", MASTER_KEY)
    browser.get(f"{root}/ui/models")
    _fill(browser, {"model_name": "keyless-claude", "model": "anthropic/claude-sonnet-4-5"})
    _submit(browser, "form[action='/ui/models/new'] button")
    try:
        row = browser.find_element(By.XPATH, "//table[@id='deployments']//tr[contains(., 'keyless-claude')]")
        assert "not configured" in row.text and "healthy" not in row.text, row.text
        assert browser.find_element(By.ID, "not-configured").text
        # A deployment that has not been sent anything is not called healthy either.
        idle = browser.find_element(By.XPATH, "//table[@id='deployments']//tr[contains(., 'gpt-image-1')]")
        assert "healthy" not in idle.text, idle.text
        browser.get(f"{root}/ui/")
        card = browser.find_element(By.ID, "healthy").find_element(By.XPATH, "..")
        assert "not configured" in card.text, card.text
    finally:
        browser.get(f"{root}/ui/models")
        row = browser.find_element(By.XPATH, "//table[@id='deployments']//tr[contains(., 'keyless-claude')]")
        row.find_element(By.CSS_SELECTOR, "a[href^='/ui/models/edit']").click()
        _submit(browser, "#delete-model")
        _submit(browser, "#confirm")


def test_the_playground_keeps_three_turns_and_the_key(gateway, browser):
    from selenium.webdriver.common.by import By

    root = gateway["root"]
    key = _admin(gateway, "/key/generate", {"key_alias": "playground-turns"})["key"]
    _sign_in(browser, root, "admin", MASTER_KEY)
    browser.get_log("browser")  # what earlier tests left
    browser.get(f"{root}/ui/playground")
    _fill(browser, {"key": key, "model": "in-process", "system": "Answer briefly.",
                    "temperature": "0.3", "max_tokens": "50", "prompt": "first question"})
    _submit(browser, "#send")
    # Twice more without the key: it is remembered for this sign-in, never written back.
    _fill(browser, {"prompt": "second question"})
    browser.find_element(By.ID, "stream").click()  # the second turn not streamed
    _submit(browser, "#send")
    _fill(browser, {"prompt": "third question"})
    browser.find_element(By.ID, "stream").click()
    _submit(browser, "#send")

    turns = browser.find_elements(By.CSS_SELECTOR, "#conversation .turn")
    users = [t for t in turns if "user" in t.get_attribute("class").split()]
    answers = [t for t in turns if "assistant" in t.get_attribute("class").split()]
    # The streamed third answer follows the conversation, in its own turn.
    answers += browser.find_elements(By.CSS_SELECTOR, "main > .turn.assistant")
    assert [u.find_element(By.TAG_NAME, "pre").text for u in users] == [
        "first question", "second question", "third question"
    ]
    assert len(answers) == 3
    for a in answers:
        meta = a.find_element(By.CSS_SELECTOR, ".meta").text
        assert "tokens in" in meta and "cost $" in meta and "request" in meta, meta
    assert "ending" in browser.find_element(By.ID, "remembered").text
    assert key not in browser.page_source
    assert browser.find_element(By.ID, "key").get_attribute("value") == ""
    # The settings stay as typed from turn to turn.
    assert browser.find_element(By.ID, "system").get_attribute("value") == "Answer briefly."
    assert browser.find_element(By.ID, "temperature").get_attribute("value") == "0.3"
    assert browser.find_element(By.ID, "max_tokens").get_attribute("value") == "50"
    assert _errors(browser) == [], _errors(browser)


def test_the_stylesheet_is_fingerprinted_cached_and_gzipped(gateway, browser):
    from selenium.webdriver.common.by import By

    root = gateway["root"]
    status, headers, body = _get(f"{root}/ui/login", {"Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    page = gzip.decompress(body).decode()
    href = re.search(r'<link rel="stylesheet" href="([^"]+)"', page).group(1)
    assert re.fullmatch(r"/ui/style\.[0-9a-f]{12}\.css", href), href

    status, headers, body = _get(f"{root}{href}", {"Accept-Encoding": "gzip, deflate, br"})
    assert status == 200
    assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert headers["Content-Encoding"] == "gzip"
    assert "accept-encoding" in headers["Vary"].lower()
    css = gzip.decompress(body).decode()
    assert "header" in css

    # Not asked for gzip: plain.
    status, headers, plain = _get(f"{root}{href}")
    assert status == 200 and "Content-Encoding" not in headers and plain.decode() == css
    # The old address still serves it; another build's fingerprint leads to this one's.
    status, headers, old = _get(f"{root}/ui/style.css")
    assert status == 200 and old.decode() == css and headers["Cache-Control"] == "no-cache"
    status, headers, _ = _get(f"{root}/ui/style.0123456789ab.css")
    assert status == 303 and headers["Location"] == href

    # The browser applies it from there.
    _sign_in(browser, root, "admin", MASTER_KEY)
    header = browser.find_element(By.TAG_NAME, "header")
    assert header.value_of_css_property("display") == "flex"
