"""The admin console in a real browser: Debian's chromium, driven by Selenium through
chromium-driver, against the real sluice binary. Sign in with the master key, make a key from
the form, see it listed, and check that the page raised no errors in the browser's console
(a script, inline style or resource the Content-Security-Policy refuses would). Every page is
photographed at a desktop's width and a phone's (390 px)."""

import os
import pathlib
import shutil

import pytest

from conftest import MASTER_KEY

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")


def _chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="module")
def browser():
    binary, driver = _chromium(), shutil.which("chromedriver")
    if binary is None or driver is None:
        pytest.skip("chromium and chromium-driver are not installed (apt install chromium chromium-driver)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    b = webdriver.Chrome(service=Service(driver), options=options)
    yield b
    b.quit()


def _submit(b, selector):
    """Click a form's button and wait for the next page to load."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    old = b.find_element(By.TAG_NAME, "html")
    b.find_element(By.CSS_SELECTOR, selector).click()
    # While the old document goes, the driver may answer with an inspector error: poll again.
    WebDriverWait(b, 10, ignored_exceptions=(WebDriverException,)).until(EC.staleness_of(old))


def _errors(b):
    return [e for e in b.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


# A phone's viewport: an iPhone's 390 CSS pixels, drawn at one device pixel each so the
# screenshots stay small.
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True}


def _phone(b):
    """Show pages as a 390 px wide phone does (the page's viewport meta applies)."""
    b.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)


def _desktop(b):
    b.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    b.set_window_size(1280, 900)


def _widths(b):
    """The page's width and the viewport's: a page wider than its viewport scrolls sideways."""
    return b.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )


def _photograph(b, root, pages, shots):
    """Each of `pages` at a desktop's width (`<name>.png`) and a phone's (`<name>-phone.png`)."""
    from selenium.webdriver.common.by import By

    shots.mkdir(parents=True, exist_ok=True)
    for suffix, size in (("", _desktop), ("-phone", _phone)):
        size(b)
        for name, page in pages.items():
            b.get(f"{root}{page}")
            assert b.find_element(By.TAG_NAME, "h1").text
            out = shots / f"{name}{suffix}.png"
            assert b.save_screenshot(str(out))
            assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _desktop(b)


def test_sign_in_create_a_key_and_see_it_listed(gateway, browser):
    from selenium.webdriver.common.by import By

    root = gateway["root"]
    browser.get(f"{root}/ui/keys")
    # Not signed in: sent to the sign-in form.
    assert browser.current_url.endswith("/ui/login")
    browser.find_element(By.ID, "password").send_keys("not-the-key")
    _submit(browser, "form button[type=submit]")
    assert "Wrong user or password" in browser.page_source
    # That 401 is the one error the browser logs on purpose; from here on there must be none.
    browser.get_log("browser")

    browser.find_element(By.ID, "username").send_keys("admin")
    browser.find_element(By.ID, "password").send_keys(MASTER_KEY)
    _submit(browser, "form button[type=submit]")
    assert browser.current_url.rstrip("/").endswith("/ui")
    assert "proxy_admin" in browser.page_source
    # The stylesheet applied (a CSP that refused it would leave the header unstyled).
    header = browser.find_element(By.TAG_NAME, "header")
    assert header.value_of_css_property("display") == "flex"

    browser.get(f"{root}/ui/keys")
    alias = "browser-made <b>key</b>"
    browser.find_element(By.ID, "key_alias").send_keys(alias)
    # Models are picked, not typed: a box per model group the config serves.
    browser.find_element(By.CSS_SELECTOR, "#models input[value='gpt-4o-mini']").click()
    browser.find_element(By.ID, "rpm_limit").send_keys("5")
    _submit(browser, "form[action='/ui/keys/new'] button")
    assert browser.current_url.endswith("/ui/keys/created"), "the post redirected"
    key = browser.find_element(By.ID, "new-key").text
    assert key.startswith("sk-")

    browser.get(f"{root}/ui/keys")
    table = browser.find_element(By.ID, "keys")
    assert alias in table.text, "the alias is listed as text, not markup"
    assert not table.find_elements(By.TAG_NAME, "b")

    # The key works through the gateway.
    import openai

    client = openai.OpenAI(base_url=gateway["base_url"], api_key=key)
    answer = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content

    # Every page, with a screenshot of each at both widths (SLUICE_SCREENSHOTS names the
    # folder that gets a `screenshots/`; docs/console.md's come from `SLUICE_SCREENSHOTS=docs`
    # on this test).
    # A team with a member, so that their pages have something to show.
    browser.get(f"{root}/ui/teams")
    _fill(browser, {"team_id": "search-platform", "team_alias": "Search platform"})
    _submit(browser, "form[action='/ui/teams/new'] button")
    browser.get(f"{root}/ui/users")
    _fill(browser, {"user_id": "lee", "user_email": "lee@example.com", "team_id": "search-platform"})
    _submit(browser, "form[action='/ui/users/new'] button")
    browser.get(f"{root}/ui/keys")
    token = browser.find_element(By.CSS_SELECTOR, "#keys td.mono").get_attribute("title")
    shots = pathlib.Path(os.environ.get("SLUICE_SCREENSHOTS") or gateway["workdir"]) / "screenshots"
    pages = {
        "overview": "/ui/", "keys": "/ui/keys", "models": "/ui/models", "spend": "/ui/spend",
        "logs": "/ui/logs", "teams": "/ui/teams", "users": "/ui/users", "audit": "/ui/audit",
        "config": "/ui/config", "playground": "/ui/playground",
        "customers": "/ui/customers", "key-edit": f"/ui/keys/edit?key={token}",
        "team-edit": "/ui/teams/edit?team_id=search-platform", "user-edit": "/ui/users/edit?user_id=lee",
    }
    _photograph(browser, root, pages, shots)
    assert _errors(browser) == [], _errors(browser)

    # Signing out ends the session.
    _submit(browser, "form[action='/ui/logout'] button")
    browser.get(f"{root}/ui/keys")
    assert browser.current_url.endswith("/ui/login")


def _sign_in(b, root, user, password):
    from selenium.webdriver.common.by import By

    b.get(f"{root}/ui/login")
    b.find_element(By.ID, "username").send_keys(user)
    b.find_element(By.ID, "password").send_keys(password)
    _submit(b, "form button[type=submit]")
    assert b.current_url.rstrip("/").endswith("/ui"), b.page_source


def _fill(b, fields):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for name, value in fields.items():
        el = b.find_element(By.ID, name)
        if el.tag_name == "select":
            Select(el).select_by_value(value)
        else:
            el.clear()
            el.send_keys(value)


def _row_action(b, table, text, action):
    """Click a row's action button (block, delete, ...) in `table`, say yes on the page that
    asks (the console confirms every action that cannot be taken back), and wait for the page
    after it."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    old = b.find_element(By.TAG_NAME, "html")
    row = b.find_element(By.XPATH, f"//table[@id='{table}']//tr[contains(., '{text}')]")
    row.find_element(By.CSS_SELECTOR, f"form[action='/ui/keys/{action}'] button").click()
    WebDriverWait(b, 10, ignored_exceptions=(WebDriverException,)).until(EC.staleness_of(old))
    if action in ("block", "delete", "regenerate"):
        _submit(b, "#confirm")


def test_teams_users_keys_and_models_managed_in_the_browser(gateway, browser):
    """The issue's flows: make teams, a user and keys; add a deployment on the models page and
    call it; block a key and see the next call refused; sign in as the internal user and see
    only their team's keys."""
    import openai
    from selenium.webdriver.common.by import By

    root = gateway["root"]
    _sign_in(browser, root, "admin", MASTER_KEY)
    for team in ("team-a", "team-b"):
        browser.get(f"{root}/ui/teams")
        _fill(browser, {"team_id": team})
        _submit(browser, "form[action='/ui/teams/new'] button")
    assert "team-b" in browser.find_element(By.ID, "teams").text
    browser.get(f"{root}/ui/users")
    _fill(browser, {"user_id": "ana", "user_role": "internal_user", "team_id": "team-a",
                    "password": "ana's long passphrase"})
    _submit(browser, "form[action='/ui/users/new'] button")
    assert "ana" in browser.find_element(By.ID, "users").text

    # A key of team-b, made by the admin.
    browser.get(f"{root}/ui/keys")
    _fill(browser, {"key_alias": "team-b-service", "team_id": "team-b"})
    _submit(browser, "form[action='/ui/keys/new'] button")
    team_b_key = browser.find_element(By.ID, "new-key").text
    assert team_b_key.startswith("sk-")

    # A deployment added on the models page answers at once.
    browser.get(f"{root}/ui/models")
    _fill(browser, {"model_name": "added-in-browser", "model": "mock/added", "mode": "chat",
                    "api_key": "sk-browser-upstream-secret"})
    _submit(browser, "form[action='/ui/models/new'] button")
    table = browser.find_element(By.ID, "deployments").text
    assert "added-in-browser" in table and "database" in table, table
    assert "sk-browser-upstream-secret" not in browser.page_source
    client = openai.OpenAI(base_url=gateway["base_url"], api_key=team_b_key)
    answer = client.chat.completions.create(
        model="added-in-browser", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content

    # Blocked in the console: the next call is refused.
    browser.get(f"{root}/ui/keys")
    _row_action(browser, "keys", "team-b-service", "block")
    assert "blocked" in browser.find_element(By.XPATH, "//table[@id='keys']//tr[contains(., 'team-b-service')]").text
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(
            model="added-in-browser", messages=[{"role": "user", "content": "hi"}]
        )

    # The internal user makes a key of their own and does not see team-b's.
    _submit(browser, "form[action='/ui/logout'] button")
    _sign_in(browser, root, "ana", "ana's long passphrase")
    assert "internal_user" in browser.page_source
    browser.get(f"{root}/ui/keys")
    _fill(browser, {"key_alias": "ana-notebook"})
    _submit(browser, "form[action='/ui/keys/new'] button")
    browser.get(f"{root}/ui/keys")
    keys = browser.find_element(By.ID, "keys").text
    assert "ana-notebook" in keys and "team-b-service" not in keys, keys
    browser.get(f"{root}/ui/models")
    assert "added-in-browser" in browser.find_element(By.ID, "deployments").text
    assert not browser.find_elements(By.CSS_SELECTOR, "form[action='/ui/models/new']"), "models are the admins'"
    assert _errors(browser) == [], _errors(browser)
    # The users page is the admins': a 404 for her (the one error the browser logs here).
    browser.get(f"{root}/ui/users")
    assert not browser.find_elements(By.ID, "users")
    assert [e for e in _errors(browser) if "/ui/users" not in e["message"]] == []
    _submit(browser, "form[action='/ui/logout'] button")

    # The admin removes the deployment from its page (the gateway is shared with other tests):
    # it is no longer served.
    _sign_in(browser, root, "admin", MASTER_KEY)
    browser.get(f"{root}/ui/models")
    row = browser.find_element(By.XPATH, "//table[@id='deployments']//tr[contains(., 'added-in-browser')]")
    row.find_element(By.CSS_SELECTOR, "a[href^='/ui/models/edit']").click()
    assert browser.find_element(By.ID, "model_name").get_attribute("value") == "added-in-browser"
    _submit(browser, "#delete-model")
    assert "Remove this deployment?" in browser.page_source
    _submit(browser, "#confirm")
    assert "added-in-browser" not in browser.find_element(By.ID, "deployments").text
    admin = openai.OpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY)
    assert "added-in-browser" not in [m.id for m in admin.models.list()]
    _submit(browser, "form[action='/ui/logout'] button")
