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
from test_console import _photograph, _submit, browser  # noqa: E402,F401  (the chromium fixture)


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
        rows = [r for r in browser.find_elements(By.CSS_SELECTOR, "#logs tbody tr") if request_id in r.text]
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
