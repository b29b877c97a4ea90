"""`sluice import litellm` end to end, against a real LiteLLM database.

The LiteLLM side is PostgreSQL with LiteLLM's own schema (its migrations, from the
`litellm-proxy-extras` package) and rows written as LiteLLM's proxy writes them, secrets sealed by
LiteLLM's own functions in both of its formats (tests/sdk/litellm_db.py). The sluice side is the
real binary: a `sluice serve` on the store the import writes to, called with the official `openai`
SDK using the keys' *plaintexts*, which LiteLLM never stored; that they work proves the hashes
were carried. Upstreams are `sluice mock`; the DB models' mocks demand the decrypted API key, so
an answer proves the decryption and resealing.

PostgreSQL comes from SLUICE_TEST_POSTGRES_URL (scripts/test.sh starts one); each LiteLLM
database here is a throwaway one, dropped afterwards. The tests of one sluice store run in file
order: the dry runs see it empty, then one import, then what it carried, then a second import and
--follow. The million-row test (`-k 'not million'` leaves it out) uses databases of its own.
"""

import datetime as dt
import json
import os
import pathlib
import random
import signal
import stat
import subprocess
import time
import types
import urllib.error
import urllib.request

import openai
import pytest
import yaml

import litellm_db as ldb
from conftest import BIN, MASTER_KEY, MEASUREMENTS, _start, _stop

POSTGRES_ENV = "SLUICE_TEST_POSTGRES_URL"

# Secrets that sit sealed in LiteLLM's database; none may show in a log or a report.
UPSTREAM_KEY_LEGACY = "sk-upstream-legacy-" + "a1" * 12
UPSTREAM_KEY_GCM = "sk-upstream-gcm-" + "b2" * 12
MCP_TOKEN = "mcp-bearer-" + "c3" * 12
GUARDRAIL_KEY = "lakera-" + "d4" * 12
SECRETS = (UPSTREAM_KEY_LEGACY, UPSTREAM_KEY_GCM, MCP_TOKEN, GUARDRAIL_KEY, MASTER_KEY)
# A LiteLLM that sealed with LITELLM_SALT_KEY instead of its master key (the PostgreSQL-store test).
SALT_KEY = "sk-salt-" + "e5" * 16

OBJECT_KINDS = (
    "keys", "teams", "users", "organizations", "budgets", "end_users", "team_members",
    "organization_members", "models", "mcp_servers", "guardrails", "spend_logs", "tags",
)


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_server():
    """The test PostgreSQL server's URL; a skip without one, except under CI, where it fails."""
    url = os.environ.get(POSTGRES_ENV)
    if url:
        return url
    if os.environ.get("CI") == "true":
        pytest.fail(f"{POSTGRES_ENV} is not set under CI=true: run the tests through scripts/test.sh")
    pytest.skip(f"{POSTGRES_ENV} is not set (scripts/test.sh starts a PostgreSQL and sets it)")


@pytest.fixture(scope="module")
def moddir(tmp_path_factory):
    return tmp_path_factory.mktemp("import-litellm")


@pytest.fixture(scope="module")
def db_model_mocks(moddir):
    """One mock per DB model, each demanding that model's upstream key (`--api-key`): an answer
    through sluice proves the key was decrypted from LiteLLM's row and resealed in sluice's."""
    procs, bases = [], {}
    for name, key in (("legacy", UPSTREAM_KEY_LEGACY), ("gcm", UPSTREAM_KEY_GCM)):
        proc, addr, _ = _start(["mock", "--port", "0", "--api-key", key], str(moddir))
        procs.append(proc)
        bases[name] = f"http://{addr}/v1"
    yield bases
    for proc in procs:
        _stop(proc)


def _populate(url, sealer, db_model_mocks):
    """LiteLLM's state: what each test below relies on. Returns plaintexts, hashes and the
    expected count per object kind (read back from the tables, so they follow this function)."""
    keys, hashes = {}, {}
    with ldb.connect(url) as c:
        # Budgets, as /budget/new, /organization/new and /customer/new make them.
        ldb.insert_budget(c, "budget-acme", max_budget=500.0, rpm_limit=1000, tpm_limit=1_000_000,
                          budget_duration="30d", budget_reset_at=ldb.budget_reset_at(20))
        ldb.insert_budget(c, "budget-customer", max_budget=5.0, budget_duration="7d", budget_reset_at=ldb.budget_reset_at(3))
        ldb.insert_budget(c, "budget-key-tier", max_budget=50.0, rpm_limit=1000, model_max_budget={})

        ldb.insert_user(c, "ann", user_email="ann@example.com", user_alias="Ann", spend=5.0, max_budget=50.0)
        ldb.insert_user(c, "bob", user_email="bob@example.com", user_role="internal_user_viewer", spend=1.25)
        # A console login: the password is a scrypt hash sluice does not take (reported).
        ldb.insert_user(c, "carol", user_email="carol@example.com", user_role="proxy_admin",
                        password="correct horse battery staple")

        ldb.insert_organization(c, "org-acme", "Acme", "budget-acme", spend=3.0,
                                members=[("ann", "org_admin"), ("bob", "internal_user")])
        ldb.insert_team(c, "team-alpha", team_alias="Alpha", organization_id="org-acme",
                        models=["group-a", "group-b"], max_budget=100.0, spend=12.25, rpm_limit=1000,
                        members=[("ann", "ann@example.com", "admin", 5.0), ("bob", "bob@example.com", "user", 0.5)])
        ldb.insert_team(c, "team-beta", team_alias="Beta", blocked=True,
                        members=[("carol", "carol@example.com", "admin", 0.0)])
        ldb.insert_end_user(c, "customer-42", alias="Customer 42", budget_id="budget-customer", spend=0.75)
        # Tags as /tag/new makes them: one within its budget, one past it.
        ldb.insert_budget(c, "budget-tag-eng", max_budget=100.0, soft_budget=50.0, budget_duration="30d",
                          budget_reset_at=ldb.budget_reset_at(20))
        ldb.insert_budget(c, "budget-tag-spent", max_budget=1.0)
        ldb.insert_tag(c, "engineering", "budget-tag-eng", description="Engineering", spend=2.5)
        ldb.insert_tag(c, "spent-tag", "budget-tag-spent", spend=1.5)

        def key(name, **fields):
            keys[name] = ldb.new_key()
            hashes[name] = ldb.insert_key(c, keys[name], alias=f"key-{name}", **fields)

        now = ldb.utcnow()
        key("plain", metadata={"tags": ["imported"]})
        key("blocked", blocked=True, settings_updated_at=now)
        key("expired", expires=now - dt.timedelta(days=1))
        key("budget", max_budget=10.0, spend=9.5, total_spend=29.5, budget_duration="30d",
            budget_reset_at=ldb.budget_reset_at(20))
        key("over", max_budget=1.0, spend=1.5)
        key("models", models=["group-b"])
        key("rpm", rpm_limit=2)
        key("alias", aliases={"alias-x": "group-a"})
        key("team", team_id="team-alpha", user_id="ann", spend=4.0)
        key("team_blocked", team_id="team-beta", user_id="carol")
        key("user", user_id="bob", spend=1.25)
        key("org", organization_id="org-acme", spend=3.0)
        key("budget_link", budget_id="budget-key-tier")
        # For --follow: one gets blocked, one deleted, one's spend grows in LiteLLM.
        key("to_block")
        key("doomed")
        key("spend_bump", spend=2.0)
        # Deleted before the import: only its archive row (and its spend logs) remain.
        key("deleted_before", spend=0.4)
        ldb.delete_key(c, hashes["deleted_before"])

        # Models added with /model/new under a name the config does not have; one sealed the
        # legacy way, one with encryption_algorithm: aes-256-gcm.
        ldb.insert_db_model(c, sealer, "db-legacy", {"model": "openai/gpt-4o-mini", "api_base": db_model_mocks["legacy"],
                                                     "api_key": UPSTREAM_KEY_LEGACY}, algorithm="legacy")
        ldb.insert_db_model(c, sealer, "db-gcm", {"model": "openai/gpt-4o-mini", "api_base": db_model_mocks["gcm"],
                                                  "api_key": UPSTREAM_KEY_GCM, "rpm": 600}, algorithm="v2")
        ldb.insert_mcp_server(c, sealer, algorithm="v2", server_name="docs_mcp", alias="docs",
                              description="Team docs", url="http://127.0.0.1:9/mcp", transport="http",
                              auth_type="bearer_token", credentials={"auth_value": MCP_TOKEN},
                              static_headers={"X-Team": "alpha"},
                              mcp_info={"server_name": "docs_mcp", "description": "Team docs"},
                              allowed_tools=["search"])
        ldb.insert_guardrail(c, sealer, "lakera-prompt-check",
                             {"guardrail": "lakera_v2", "mode": "pre_call", "api_key": GUARDRAIL_KEY,
                              "api_base": "http://127.0.0.1:9", "default_on": False},
                             guardrail_info={"description": "prompt injection screen"}, algorithm="legacy")

        # 200 spend logs over the last ten days, several keys, a few failures.
        callers = [
            ldb.Caller(hashes["plain"], "key-plain"),
            ldb.Caller(hashes["budget"], "key-budget"),
            ldb.Caller(hashes["team"], "key-team", team_id="team-alpha", user_id="ann", organization_id="org-acme"),
            ldb.Caller(hashes["user"], "key-user", user_id="bob"),
            ldb.Caller(hashes["org"], "key-org", organization_id="org-acme"),
            ldb.Caller(hashes["deleted_before"], "key-deleted_before"),
        ]
        rng = random.Random(20260101)
        start = now.replace(hour=0, minute=0, second=0, microsecond=0) - dt.timedelta(days=10)
        logs = []
        for i in range(200):
            caller = callers[i % len(callers)]
            at = start + dt.timedelta(seconds=rng.randrange(10 * 86400 - 3600))
            ok = i % 25 != 7
            p, q = rng.randrange(10, 400), rng.randrange(5, 200)
            logs.append(ldb.spend_log(caller, at, model_group=rng.choice(["group-a", "group-b"]),
                                      spend=(p * 1.5e-7 + q * 6e-7) if ok else 0.0,
                                      prompt_tokens=p if ok else 0, completion_tokens=q if ok else 0,
                                      status="success" if ok else "failure",
                                      end_user="customer-42" if i % 10 == 3 else ""))
        ldb.insert_spend_logs(c, logs)

        def count(table):
            return c.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]

        expected = {
            "keys": count("LiteLLM_VerificationToken"),
            "teams": count("LiteLLM_TeamTable"),
            "users": count("LiteLLM_UserTable"),
            "organizations": count("LiteLLM_OrganizationTable"),
            "budgets": count("LiteLLM_BudgetTable"),
            "end_users": count("LiteLLM_EndUserTable"),
            "team_members": count("LiteLLM_TeamMembership"),
            "organization_members": count("LiteLLM_OrganizationMembership"),
            "models": count("LiteLLM_ProxyModelTable"),
            "mcp_servers": count("LiteLLM_MCPServerTable"),
            "guardrails": count("LiteLLM_GuardrailsTable"),
            "spend_logs": count("LiteLLM_SpendLogs"),
            "tags": count("LiteLLM_TagTable"),
        }
    return types.SimpleNamespace(url=url, keys=keys, hashes=hashes, expected=expected, logs=logs)


@pytest.fixture(scope="module")
def litellm(pg_server, db_model_mocks):
    """LiteLLM's database, sealed under the master key (LiteLLM without LITELLM_SALT_KEY)."""
    name, url = ldb.create_database(pg_server, "litellm_import")
    try:
        ldb.apply_schema(url)
        yield _populate(url, ldb.Sealer(MASTER_KEY), db_model_mocks)
    finally:
        ldb.drop_database(pg_server, name)


def _config_text(mock_upstream, database_url=None):
    """sluice's config: two model groups on the shared mock, LiteLLM's master key."""
    store = f"\n  database_url: {database_url}" if database_url else ""
    return f"""
model_list:
  - model_name: group-a
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
  - model_name: group-b
    litellm_params:
      model: openai/gpt-4.1-mini
      api_base: {mock_upstream}
      api_key: sk-upstream-never-shown
general_settings:
  master_key: {MASTER_KEY}
  store_model_in_db: true{store}
"""


def _serve(directory, mock_upstream, database_url=None):
    """`sluice serve` on the store in `directory` (sluice.db there, or `database_url`)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "config.yaml"
    config.write_text(_config_text(mock_upstream, database_url))
    proc, addr, log = _start(["serve", "--config", str(config), "--port", "0", "--data-dir", str(directory)], str(directory))
    return types.SimpleNamespace(proc=proc, root=f"http://{addr}", base_url=f"http://{addr}/v1", log=log,
                                 config=config, data_dir=directory)


def _stop_serve(served):
    assert _stop(served.proc) == 0, "sluice must exit 0 on SIGTERM"
    text = open(served.log).read()
    for secret in SECRETS:
        assert secret not in text, "a secret from LiteLLM's database reached sluice's log"


@pytest.fixture(scope="module")
def sluice(moddir, mock_upstream):
    """The gateway whose store (SQLite, in its data directory) the import writes to."""
    served = _serve(moddir / "sluice", mock_upstream)
    yield served
    _stop_serve(served)


def _import_env():
    """The import's environment: LITELLM_SALT_KEY and LITELLM_DATABASE_URL removed, so that only
    the arguments decide."""
    env = {k: v for k, v in os.environ.items() if k not in ("LITELLM_SALT_KEY", "LITELLM_DATABASE_URL")}
    return {**env, "SLUICE_LOG": "info"}


def _import_cmd(config, data_dir, litellm_url, *extra):
    return [BIN, "import", "litellm", "--database-url", litellm_url, "--config", str(config),
            "--data-dir", str(data_dir), "--json", *extra]


def _import(served, litellm_url, *extra, timeout=600):
    """Run `sluice import litellm --json` on `served`'s config and store; (exit code, reports,
    stderr)."""
    proc = subprocess.run(
        _import_cmd(served.config, served.data_dir, litellm_url, *extra),
        capture_output=True, text=True, timeout=timeout, cwd=served.data_dir, env=_import_env(),
    )
    for secret in SECRETS:
        assert secret not in proc.stdout + proc.stderr, "a secret reached the import's output"
    return proc.returncode, _reports(proc.stdout), proc.stderr


def _reports(stdout):
    """The JSON report of each pass: one object per line."""
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _why(rc, reports, stderr):
    """A failed run, explained: its exit code, the rows it listed as errors, its stderr's tail."""
    errors = [e for r in reports for e in r.get("errors", [])]
    return f"exit {rc}; errors: {json.dumps(errors, indent=1)}\nstderr:\n{stderr[-4000:]}"


def _only_report(rc, reports, stderr):
    assert len(reports) == 1, f"one JSON line expected on stdout; {_why(rc, reports, stderr)}"
    return reports[0]


@pytest.fixture(scope="module")
def imported(sluice, litellm):
    """The first real import into the running gateway's store; its report."""
    rc, reports, stderr = _import(sluice, litellm.url)
    assert rc == 0, _why(rc, reports, stderr)
    report = _only_report(rc, reports, stderr)
    # The running gateway polls its store: wait until it knows the keys.
    _eventually(10, lambda: _status(sluice, litellm.keys["plain"]) == 200, "an imported key to answer")
    return report


# --- helpers -------------------------------------------------------------------------------


def _admin(root, path, body=None, method="GET", key=MASTER_KEY):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(root + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode(errors="replace")


def _client(served, key):
    # No retries: a 429 must reach the test, not be waited out by the SDK.
    return openai.OpenAI(base_url=served.base_url, api_key=key, max_retries=0)


def _chat(served, key, model="group-a", **kw):
    return _client(served, key).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hello"}], **kw
    )


def _status(served, key, model="group-a"):
    """200, or the status sluice refused with."""
    try:
        _chat(served, key, model)
        return 200
    except openai.APIStatusError as e:
        return e.status_code


def _eventually(seconds, check, what):
    deadline = time.time() + seconds
    while True:
        last = check()
        if last:
            return last
        if time.time() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.2)


def _key_spend(served, plaintext):
    status, body = _admin(served.root, f"/key/info?key={plaintext}")
    assert status == 200, body
    return body["info"]["spend"]


def _team_spend(served, team_id):
    status, body = _admin(served.root, f"/team/info?team_id={team_id}")
    assert status == 200, body
    return body["team_info"]["spend"]


def _settled(read, quiet=1.5, limit=20):
    """A value read until it stays the same for `quiet` seconds (the spend writer batches once a
    second)."""
    deadline = time.time() + limit
    value, since = read(), time.time()
    while time.time() - since < quiet:
        assert time.time() < deadline, "the value never settled"
        time.sleep(0.25)
        now = read()
        if now != value:
            value, since = now, time.time()
    return value


def _spend_log_count(served):
    status, body = _admin(served.root, "/spend/logs?start_date=2000-01-01&limit=10000")
    assert status == 200, body
    return len(body)


def _found(value, want):
    """Whether `want` (a dict of fields) matches some object nested anywhere in `value`."""
    if isinstance(value, dict):
        if all(value.get(k) == v for k, v in want.items()):
            return True
        return any(_found(v, want) for v in value.values())
    if isinstance(value, list):
        return any(_found(v, want) for v in value)
    return False


# --- before the import: dry runs ---------------------------------------------------------------


def test_the_litellm_schema_is_litellms_own(litellm):
    # A guard for the fixture itself: LiteLLM's migrations were found (the package ships over
    # 200), and the sealed values open with LiteLLM's own read path.
    assert len(ldb.migrations()) >= 200
    with ldb.connect(litellm.url) as c:
        row = c.execute('SELECT litellm_params FROM "LiteLLM_ProxyModelTable" WHERE model_name = %s', ("db-gcm",)).fetchone()
        creds = c.execute('SELECT credentials FROM "LiteLLM_MCPServerTable"').fetchone()[0]
    sealer = ldb.Sealer(MASTER_KEY)
    assert row[0]["api_key"].startswith("v2:gcm:")
    assert sealer.open(row[0]["api_key"]) == UPSTREAM_KEY_GCM
    assert sealer.open(creds["auth_value"]) == MCP_TOKEN


def test_dry_run_reports_everything_new_and_writes_nothing(sluice, litellm):
    rc, reports, stderr = _import(sluice, litellm.url, "--dry-run")
    assert rc == 0, _why(rc, reports, stderr)
    report = _only_report(rc, reports, stderr)
    assert report["dry_run"] is True
    for kind in OBJECT_KINDS:
        counts = report["objects"][kind]
        assert counts["new"] == litellm.expected[kind], (kind, counts)
        assert counts.get("updated", 0) == 0 and counts.get("deleted", 0) == 0, (kind, counts)
    assert report["errors"] == []
    # What sluice has no place for is said, not dropped silently: the console password hash.
    assert any(
        n["table"] == "LiteLLM_UserTable" and n["id"] == "carol" and n["field"] == "password"
        for n in report["not_carried"]
    ), report["not_carried"]
    # Nothing written: no key, team or spend log in the store, no config file beside the config.
    status, body = _admin(sluice.root, "/key/list")
    assert status == 200 and body["total_count"] == 0, body
    status, body = _admin(sluice.root, "/team/list")
    assert status == 200 and body == [], body
    assert _spend_log_count(sluice) == 0
    assert not (sluice.config.parent / "litellm-import.yaml").exists()
    assert _status(sluice, litellm.keys["plain"]) == 401


def test_dry_run_selects_spend_logs_by_date_or_none(sluice, litellm):
    # --spend-logs DATE: rows whose startTime is at or after that day (UTC midnight).
    cut = (ldb.utcnow() - dt.timedelta(days=4)).date()
    since = dt.datetime.combine(cut, dt.time())
    want = sum(1 for log in litellm.logs if log["startTime"] >= since)
    assert 0 < want < len(litellm.logs)
    rc, reports, stderr = _import(sluice, litellm.url, "--dry-run", "--spend-logs", cut.isoformat())
    assert rc == 0, _why(rc, reports, stderr)
    assert _only_report(rc, reports, stderr)["objects"]["spend_logs"]["new"] == want
    rc, reports, stderr = _import(sluice, litellm.url, "--dry-run", "--spend-logs", "none")
    assert rc == 0, _why(rc, reports, stderr)
    report = _only_report(rc, reports, stderr)
    # Skipped spend logs may be left out of the report or counted as none new.
    assert report["objects"].get("spend_logs", {}).get("new", 0) == 0
    assert report["objects"]["keys"]["new"] == litellm.expected["keys"]


def test_a_wrong_decryption_key_is_an_error(sluice, litellm):
    # Values sealed under another key cannot be opened: the rows are listed and the exit is not 0.
    rc, reports, stderr = _import(sluice, litellm.url, "--dry-run", "--litellm-salt-key", "sk-not-the-key-litellm-used")
    assert rc != 0
    report = _only_report(rc, reports, stderr)
    assert any(e["table"] == "LiteLLM_ProxyModelTable" for e in report["errors"]), report["errors"]


# --- the import ----------------------------------------------------------------------------


def test_the_import_carries_every_row(imported, litellm):
    assert imported["dry_run"] is False
    assert imported["errors"] == []
    for kind in OBJECT_KINDS:
        assert imported["objects"][kind]["new"] == litellm.expected[kind], (kind, imported["objects"][kind])
    assert isinstance(imported["peak_memory_bytes"], int) and imported["peak_memory_bytes"] > 0


def test_an_ordinary_key_answers_with_its_plaintext(sluice, litellm, imported):
    r = _chat(sluice, litellm.keys["plain"])
    assert r.choices[0].message.content
    assert _status(sluice, litellm.keys["budget_link"]) == 200
    assert _status(sluice, litellm.keys["user"]) == 200
    assert _status(sluice, litellm.keys["org"]) == 200


def test_blocked_expired_and_deleted_keys_are_refused(sluice, litellm, imported):
    for name in ("blocked", "expired", "deleted_before"):
        with pytest.raises(openai.AuthenticationError):
            _chat(sluice, litellm.keys[name])
    # A key of a blocked team (LiteLLM refuses it with 401 too).
    assert _status(sluice, litellm.keys["team_blocked"]) == 401


def test_an_over_budget_key_is_refused_for_its_budget(sluice, litellm, imported):
    # LiteLLM answers 400 budget_exceeded.
    with pytest.raises(openai.APIStatusError) as e:
        _chat(sluice, litellm.keys["over"])
    assert "budget" in json.dumps(e.value.body).lower() + str(e.value).lower()


def test_a_tag_past_its_budget_refuses_every_request_that_carries_it(sluice, litellm, imported):
    # LiteLLM's tag budget check: spend 1.5 of a 1.0 budget refuses, whichever key sends it.
    with pytest.raises(openai.APIStatusError) as e:
        _chat(sluice, litellm.keys["plain"], extra_body={"tags": ["spent-tag"]})
    assert e.value.status_code == 400
    assert "tag budget" in json.dumps(e.value.body)
    _chat(sluice, litellm.keys["plain"], extra_body={"tags": ["engineering"]})


def test_a_model_restricted_key_reaches_only_its_model(sluice, litellm, imported):
    assert _status(sluice, litellm.keys["models"], "group-a") in (401, 403)
    assert _status(sluice, litellm.keys["models"], "group-b") == 200


def test_a_key_alias_routes_to_its_group(sluice, litellm, imported):
    r = _chat(sluice, litellm.keys["alias"], "alias-x")
    assert r.choices[0].message.content


def test_the_rpm_limit_is_carried(sluice, litellm, imported):
    assert _status(sluice, litellm.keys["rpm"]) == 200
    assert _status(sluice, litellm.keys["rpm"]) == 200
    with pytest.raises(openai.RateLimitError):
        _chat(sluice, litellm.keys["rpm"])


def test_db_models_are_decrypted_and_resealed(sluice, litellm, imported):
    # Only in LiteLLM's database; their mocks answer only with the decrypted upstream key.
    for model in ("db-legacy", "db-gcm"):
        _eventually(10, lambda: _status(sluice, litellm.keys["plain"], model) == 200, f"{model} to answer")


def test_teams_users_organizations_and_end_users_are_carried(sluice, litellm, imported):
    status, body = _admin(sluice.root, "/team/info?team_id=team-alpha")
    assert status == 200, body
    team = body["team_info"]
    assert team["max_budget"] == 100.0 and sorted(team["models"]) == ["group-a", "group-b"]
    assert _found(team["members_with_roles"], {"user_id": "ann", "role": "admin"}), team
    assert _found(team["members_with_roles"], {"user_id": "bob", "role": "user"}), team
    status, body = _admin(sluice.root, "/team/info?team_id=team-beta")
    assert status == 200 and body["team_info"]["blocked"] is True, body

    status, body = _admin(sluice.root, "/user/info?user_id=carol")
    assert status == 200, body
    assert _found(body, {"user_role": "proxy_admin"}), body
    assert "scrypt:" not in json.dumps(body)

    status, body = _admin(sluice.root, "/organization/info?organization_id=org-acme")
    assert status == 200, body
    assert _found(body, {"user_id": "ann"}) and _found(body, {"user_id": "bob"}), body
    assert _found(body, {"max_budget": 500.0}), body

    status, body = _admin(sluice.root, "/customer/info?end_user_id=customer-42")
    assert status == 200, body
    assert _found(body, {"spend": 0.75}) and _found(body, {"max_budget": 5.0}), body

    status, body = _admin(sluice.root, "/tag/info", {"names": ["engineering"]}, method="POST")
    assert status == 200, body
    eng = body["engineering"]
    # The imported 2.5, plus the cost of the request an earlier test sent with the tag once
    # the spend writer has written it (a few millionths of a dollar at the mock's price).
    assert eng["description"] == "Engineering" and 2.5 <= eng["spend"] < 2.51, body
    assert _found(eng, {"max_budget": 100.0}) and _found(eng, {"soft_budget": 50.0}), body

    # A spend log from LiteLLM, found by its request id.
    log = litellm.logs[0]
    status, body = _admin(sluice.root, f"/spend/logs?request_id={log['request_id']}")
    assert status == 200 and len(body) == 1, body
    assert body[0]["spend"] == pytest.approx(log["spend"])


def test_mcp_servers_and_guardrails_become_an_included_config(sluice, litellm, imported):
    out = sluice.config.parent / "litellm-import.yaml"
    # It holds decrypted credentials: readable by its owner only.
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text()
    doc = yaml.safe_load(text)
    assert {"docs", "docs_mcp"} & set(doc["mcp_servers"]), doc["mcp_servers"]
    assert [g["guardrail_name"] for g in doc["guardrails"]] == ["lakera-prompt-check"]
    # Opened: the bearer token (a sealed field of `credentials`), the guardrail's api_key
    # (stored as "litellm_enc::" + sealed) and the static headers (the whole map sealed into one
    # JSON string by encrypt_secret_map).
    assert MCP_TOKEN in text, "the MCP server's auth_value, decrypted"
    assert GUARDRAIL_KEY in text, "the guardrail's api_key, decrypted"
    assert "X-Team" in text, "the MCP server's static_headers, decrypted"
    assert "litellm_enc::" not in text and "v2:gcm:" not in text, "a value left sealed"
    # sluice itself accepts it as an `include:` of its config.
    check = sluice.config.parent / "check-include.yaml"
    check.write_text(sluice.config.read_text() + "include:\n  - litellm-import.yaml\n")
    proc = subprocess.run([BIN, "check-config", str(check)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_spend_continues_from_litellms(sluice, litellm, imported):
    # Right after the import, LiteLLM's figures (the budget period's spend, not total_spend).
    assert _key_spend(sluice, litellm.keys["budget"]) == pytest.approx(9.5)
    assert _team_spend(sluice, "team-alpha") == pytest.approx(12.25)
    _chat(sluice, litellm.keys["budget"])
    _chat(sluice, litellm.keys["team"])
    spent = _eventually(15, lambda: (s := _key_spend(sluice, litellm.keys["budget"])) > 9.5 and s, "key spend to grow")
    assert spent < 10.0
    _eventually(15, lambda: _team_spend(sluice, "team-alpha") > 12.25, "team spend to grow")


def test_a_second_import_changes_nothing(sluice, litellm, imported):
    logs = _settled(lambda: _spend_log_count(sluice))
    spend = _settled(lambda: _key_spend(sluice, litellm.keys["budget"]))
    rc, reports, stderr = _import(sluice, litellm.url)
    assert rc == 0, _why(rc, reports, stderr)
    report = _only_report(rc, reports, stderr)
    for kind in OBJECT_KINDS:
        counts = report["objects"][kind]
        assert counts["new"] == 0, (kind, counts)
        assert counts.get("updated", 0) == 0 and counts.get("deleted", 0) == 0, (kind, counts)
    assert report["objects"]["spend_logs"]["new"] == 0
    assert _spend_log_count(sluice) == logs
    # Spend made through sluice is kept (LiteLLM's did not change, so nothing is added).
    assert _key_spend(sluice, litellm.keys["budget"]) == pytest.approx(spend)


def test_follow_carries_changes_until_stopped(sluice, litellm, imported, moddir):
    keys, hashes = litellm.keys, litellm.hashes
    for name in ("to_block", "doomed"):
        assert _status(sluice, keys[name]) == 200
    # Spend made through sluice first, so that the later LiteLLM growth must be *added* to it.
    _chat(sluice, keys["spend_bump"])
    base = _settled(lambda: _key_spend(sluice, keys["spend_bump"]))
    assert base > 2.0

    out, err = moddir / "follow.out", moddir / "follow.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        proc = subprocess.Popen(
            _import_cmd(sluice.config, sluice.data_dir, litellm.url, "--follow", "1"),
            stdout=stdout, stderr=stderr, cwd=sluice.data_dir, env=_import_env(),
        )
    def first_pass():
        assert proc.poll() is None, f"--follow exited {proc.returncode}:\n{err.read_text()}"
        return out.read_text().strip()

    try:
        _eventually(120, first_pass, "the first pass")
        # What LiteLLM's proxy does meanwhile: a new key, a block, a delete, spend.
        born = ldb.new_key()
        with ldb.connect(litellm.url) as c:
            ldb.insert_key(c, born, alias="key-born-later")
            ldb.block_key(c, hashes["to_block"])
            ldb.delete_key(c, hashes["doomed"])
            ldb.add_spend(c, 1.0, token=hashes["spend_bump"])
            ldb.insert_spend_logs(c, [ldb.spend_log(ldb.Caller(hashes["spend_bump"], "key-spend_bump"), ldb.utcnow(),
                                                    model_group="group-a", spend=1.0, prompt_tokens=100,
                                                    completion_tokens=50, request_id="chatcmpl-follow-1")])
        _eventually(10, lambda: _status(sluice, born) == 200, "the new key to answer")
        _eventually(10, lambda: _status(sluice, keys["to_block"]) == 401, "the blocked key to be refused")
        _eventually(10, lambda: _status(sluice, keys["doomed"]) == 401, "the deleted key to be refused")
        _eventually(10, lambda: _key_spend(sluice, keys["spend_bump"]) == pytest.approx(base + 1.0),
                    "LiteLLM's spend growth (1.0) to be added to sluice's")
        status, body = _admin(sluice.root, "/spend/logs?request_id=chatcmpl-follow-1")
        assert status == 200 and len(body) == 1, body
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert rc == 0, err.read_text()
    passes = _reports(out.read_text())
    assert len(passes) >= 2, passes
    later = passes[1:]
    assert sum(p["objects"]["keys"]["new"] for p in later) >= 1
    assert sum(p["objects"]["keys"]["deleted"] for p in later) >= 1
    assert sum(p["objects"]["spend_logs"]["new"] for p in later) >= 1
    for secret in SECRETS:
        assert secret not in out.read_text() + err.read_text()


# --- the other store backend ---------------------------------------------------------------


def test_a_postgres_store_takes_the_import_too(pg_server, moddir, mock_upstream, db_model_mocks):
    # This LiteLLM sealed with LITELLM_SALT_KEY, which the import is given with --litellm-salt-key.
    lite_name, lite_url = ldb.create_database(pg_server, "litellm_import_salt")
    store_name, store_url = ldb.create_database(pg_server, "sluice_import_store")
    served = None
    try:
        ldb.apply_schema(lite_url)
        plain = ldb.new_key()
        with ldb.connect(lite_url) as c:
            token = ldb.insert_key(c, plain, alias="pg-plain", spend=0.5)
            ldb.insert_db_model(c, ldb.Sealer(SALT_KEY), "db-legacy",
                                {"model": "openai/gpt-4o-mini", "api_base": db_model_mocks["legacy"],
                                 "api_key": UPSTREAM_KEY_LEGACY}, algorithm="v2")
            now = ldb.utcnow()
            ldb.insert_spend_logs(c, [ldb.spend_log(ldb.Caller(token, "pg-plain"), now - dt.timedelta(hours=i),
                                                    model_group="group-a", spend=0.1) for i in range(5)])
        served = _serve(moddir / "sluice-pg", mock_upstream, database_url=store_url)
        rc, reports, stderr = _import(served, lite_url, "--litellm-salt-key", SALT_KEY)
        assert rc == 0, _why(rc, reports, stderr)
        report = _only_report(rc, reports, stderr)
        assert report["errors"] == []
        assert report["objects"]["keys"]["new"] == 1 and report["objects"]["spend_logs"]["new"] == 5
        _eventually(10, lambda: _status(served, plain) == 200, "the key to answer from the PostgreSQL store")
        _eventually(10, lambda: _status(served, plain, "db-legacy") == 200, "the DB model to answer")
        assert _key_spend(served, plain) >= 0.5
    finally:
        if served is not None:
            _stop_serve(served)
        ldb.drop_database(pg_server, store_name)
        ldb.drop_database(pg_server, lite_name)


# --- scale ---------------------------------------------------------------------------------


def _run_measured(cmd, timeout, stdout_path, stderr_path, **kw):
    """Run a command; (exit code, stdout, stderr, its peak RSS in bytes). The peak is the kernel's
    high-water mark (VmHWM, which starts afresh at exec) sampled every 0.1 s until it exits; not
    getrusage's ru_maxrss, which counts the forked pytest process the command was exec'd from."""
    peak = 0
    with open(stdout_path, "w+") as out, open(stderr_path, "w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, **kw)
        deadline = time.time() + timeout
        while proc.poll() is None:
            if time.time() > deadline:
                proc.kill()
                proc.wait()
                raise AssertionError(f"not done in {timeout} s")
            try:
                with open(f"/proc/{proc.pid}/status") as f:
                    hwm = next(line for line in f if line.startswith("VmHWM:"))
                peak = max(peak, int(hwm.split()[1]) * 1024)
            except (OSError, StopIteration):
                pass
            time.sleep(0.1)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read(), err.read(), peak


def test_a_million_spend_logs_import_in_bounded_memory(pg_server, moddir, mock_upstream):
    """1,000,000 spend log rows stream through in batches: peak memory under 256 MiB."""
    rows = 1_000_000
    name, url = ldb.create_database(pg_server, "litellm_import_million")
    try:
        ldb.apply_schema(url)
        t0 = time.time()
        with ldb.connect(url) as c:
            callers = []
            for i in range(4):
                plain = ldb.new_key()
                callers.append(ldb.Caller(ldb.insert_key(c, plain, alias=f"bulk-{i}"), f"bulk-{i}"))
            now = ldb.utcnow()
            ldb.generate_spend_logs(c, rows, callers, now - dt.timedelta(days=90), now - dt.timedelta(hours=1))
            assert c.execute('SELECT count(*) FROM "LiteLLM_SpendLogs"').fetchone()[0] == rows
        made = time.time() - t0

        store = moddir / "sluice-million"
        store.mkdir()
        config = store / "config.yaml"
        config.write_text(_config_text(mock_upstream))
        t0 = time.time()
        # The release build when the test script has one (CI does): the figure is the shipped
        # binary's, and the debug build's 1,000,000 rows take minutes.
        cmd = _import_cmd(config, store, url, "--spend-logs", "all")
        cmd[0] = os.environ.get("SLUICE_RELEASE_BIN") or BIN
        rc, stdout, stderr, rss = _run_measured(
            cmd,
            timeout=1800, cwd=store, env=_import_env(),
            stdout_path=store / "import.out", stderr_path=store / "import.err",
        )
        took = time.time() - t0
        reports = _reports(stdout)
        assert rc == 0, _why(rc, reports, stderr)
        report = _only_report(rc, reports, stderr)
        peak = report["peak_memory_bytes"]
        # In the run's summary (conftest's MEASUREMENTS), so the CI log carries the figure.
        MEASUREMENTS.append(f"sluice import litellm ({pathlib.Path(cmd[0]).parent.name} build): {rows:,} spend logs in {took:.1f} s "
              f"({rows / took:,.0f} rows/s; generated by PostgreSQL in {made:.1f} s); "
              f"peak_memory_bytes {peak:,} ({peak / 2**20:.1f} MiB), kernel peak RSS (VmHWM) {rss / 2**20:.1f} MiB")
        assert report["objects"]["spend_logs"]["new"] == rows
        assert report["errors"] == []
        assert peak < 256 * 2**20
        assert rss < 256 * 2**20
    finally:
        ldb.drop_database(pg_server, name)
