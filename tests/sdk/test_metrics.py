"""`GET /metrics` read by Prometheus's own Python parser (OpenMetrics text), after real traffic."""

import urllib.request

from openai import OpenAI
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import MASTER_KEY


def _scrape(base_url):
    root = base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/metrics", timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
        return {f.name: f for f in text_string_to_metric_families(resp.read().decode())}


def _value(families, family, sample_name, **labels):
    if family not in families:
        return 0
    return sum(
        s.value
        for s in families[family].samples
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_metrics_count_requests_tokens_and_overhead(gateway):
    client = OpenAI(base_url=gateway["base_url"], api_key=MASTER_KEY)
    before = _scrape(gateway["base_url"])
    done_before = _value(
        before, "sluice_requests", "sluice_requests_total", model="gpt-4o-mini", status_class="2xx"
    )
    usage = 0
    for _ in range(3):
        r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
        usage += r.usage.completion_tokens
    stream = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

    after = _scrape(gateway["base_url"])
    done = _value(after, "sluice_requests", "sluice_requests_total", model="gpt-4o-mini", status_class="2xx")
    assert done - done_before >= 4
    assert _value(after, "sluice_tokens", "sluice_tokens_total", model="gpt-4o-mini", kind="output") >= usage
    assert _value(
        after, "sluice_overhead_seconds", "sluice_overhead_seconds_count", route="/v1/chat/completions"
    ) >= 4
    assert _value(after, "sluice_time_to_first_token_seconds", "sluice_time_to_first_token_seconds_count") >= 1
    in_flight = [s for s in after["sluice_deployment_in_flight_requests"].samples]
    assert {s.labels["model"] for s in in_flight} >= {"gpt-4o-mini", "in-process"}
    # Bounded labels: no key, user or request id ever becomes a label.
    for family in after.values():
        for s in family.samples:
            assert MASTER_KEY not in str(s.labels)
            assert "sk-upstream-never-shown" not in str(s.labels)
