"""A real LiteLLM database for the `sluice import litellm` tests.

The schema is LiteLLM's own: every `migration.sql` that the `litellm-proxy-extras` package ships,
applied in order to an empty PostgreSQL database (as `prisma migrate deploy` does for LiteLLM's
proxy). The rows are written as LiteLLM's proxy writes them; each writer below names the LiteLLM
code it follows (LiteLLM 1.110, `litellm/proxy/...`), so that a reader can check a column's form
against it:

- NULL vs default matters: `blocked` of a key is NULL unless the key was ever blocked or
  unblocked; `models` is `{}` (every model), not NULL; a spend log's `team_id`, `user`,
  `end_user` and `organization_id` are '' when there is none.
- secrets are sealed with LiteLLM's own functions (`encrypt_value`, `_encrypt_aes_gcm`) from the
  `litellm` package, in both of its formats: the legacy nacl SecretBox (base64url of
  nonce||ciphertext) and `v2:gcm:` AES-256-GCM, both under sha256(LITELLM_SALT_KEY or master key).
- timestamps are `timestamp(3) without time zone`, in UTC (Prisma's way): every connection here
  runs with TimeZone=UTC so that `now()` in SQL means the same.

`litellm` is imported lazily (it takes seconds), with LITELLM_LOCAL_MODEL_COST_MAP=True so that it
reads its bundled price map instead of fetching one.
"""

import base64
import dataclasses
import datetime as dt
import functools
import hashlib
import importlib.resources
import json
import os
import secrets
import types
import uuid

import psycopg
from psycopg.types.json import Jsonb

# Who LiteLLM records as the creator of what an admin makes with the master key
# (litellm_proxy_admin_name).
ADMIN = "default_user_id"


def utcnow():
    """Now, as LiteLLM stores it: UTC, naive (a `timestamp without time zone` column), to ms."""
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


# --- the database ------------------------------------------------------------------------


def connect(url):
    """A connection in autocommit mode whose session time zone is UTC."""
    return psycopg.connect(url, autocommit=True, options="-c TimeZone=UTC")


def create_database(server_url, prefix):
    """A new empty database on the server of `server_url` (a URL of any database there, e.g.
    .../postgres); returns (name, url)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with connect(server_url) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    base, _ = server_url.rsplit("/", 1)
    return name, f"{base}/{name}"


def drop_database(server_url, name):
    """Drop it, ending the sessions still open on it (a sluice that was killed, say)."""
    with connect(server_url) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrations():
    """LiteLLM's migrations, as shipped by litellm-proxy-extras: (name, SQL) in the order Prisma
    applies them (directory names sorted bytewise, as LC_ALL=C sorts; some names have spaces)."""
    root = importlib.resources.files("litellm_proxy_extras") / "migrations"
    names = sorted((d.name for d in root.iterdir() if d.is_dir()), key=lambda n: n.encode())
    return [(n, (root / n / "migration.sql").read_text(encoding="utf-8")) for n in names]


def apply_schema(url):
    """Apply every migration to the (empty) database at `url`; returns how many. Each file is
    one multi-statement script, run as Prisma runs it."""
    applied = migrations()
    with connect(url) as c:
        for name, sql in applied:
            try:
                c.execute(sql)
            except psycopg.Error as e:
                raise RuntimeError(f"LiteLLM migration {name} failed: {e}") from e
    return len(applied)


def columns(conn, table):
    """{column: data type} of a table, read from the applied schema."""
    rows = conn.execute(
        "SELECT column_name, udt_name FROM information_schema.columns WHERE table_name = %s",
        (table,),
    ).fetchall()
    return dict(rows)


def _insert(conn, table, row):
    """INSERT one row; jsonb columns take Python dicts and lists (wrapped here), text[] columns
    take lists. Columns left out keep the schema's default, as Prisma leaves them."""
    types = columns(conn, table)
    unknown = set(row) - set(types)
    assert not unknown, f"{table} has no column {sorted(unknown)}: LiteLLM's schema changed"
    names, values = [], []
    for name, value in row.items():
        names.append(f'"{name}"')
        if types[name] == "jsonb" and value is not None and not isinstance(value, Jsonb):
            value = Jsonb(value)
        values.append(value)
    marks = ", ".join(["%s"] * len(values))
    conn.execute(f'INSERT INTO "{table}" ({", ".join(names)}) VALUES ({marks})', values)


# --- LiteLLM's sealing of secrets ------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _litellm():
    """LiteLLM's own modules used here (imported once; `import litellm` takes seconds)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.litellm_core_utils.safe_json_dumps import safe_dumps
    from litellm.proxy._types import NewMCPServerRequest
    from litellm.proxy.common_utils import encrypt_decrypt_utils as crypt
    from litellm.proxy.common_utils.callback_utils import (
        CALLBACK_VAR_ENCRYPTED_PREFIX,
        is_sensitive_callback_key,
    )
    from litellm.types.guardrails import LitellmParams
    from litellm.types.router import Deployment

    return types.SimpleNamespace(
        crypt=crypt,
        Deployment=Deployment,
        LitellmParams=LitellmParams,
        NewMCPServerRequest=NewMCPServerRequest,
        safe_dumps=safe_dumps,
        enc_prefix=CALLBACK_VAR_ENCRYPTED_PREFIX,
        sensitive=is_sensitive_callback_key,
    )


class Sealer:
    """Seals values as LiteLLM's `encrypt_value_helper` does, under `signing_key` (what LiteLLM
    reads from LITELLM_SALT_KEY, else its master key).

    `encrypt_value_helper` itself cannot be called outside a running proxy: it finds the key and
    the algorithm through `litellm.proxy.proxy_server` (FastAPI and the rest). Its two branches
    are called instead, with the key passed in: `encrypt_value` + urlsafe base64 (the default,
    "legacy") and `_encrypt_aes_gcm` (general_settings.encryption_algorithm: aes-256-gcm)."""

    def __init__(self, signing_key):
        self.signing_key = signing_key

    def legacy(self, value):
        crypt = _litellm().crypt
        return base64.urlsafe_b64encode(crypt.encrypt_value(value=value, signing_key=self.signing_key)).decode("utf-8")

    def v2(self, value):
        return _litellm().crypt._encrypt_aes_gcm(value=value, signing_key=self.signing_key)

    def seal(self, value, algorithm):
        return self.v2(value) if algorithm == "v2" else self.legacy(value)

    def open(self, value):
        """LiteLLM's own read path (`_decrypt_with_signing_key`, which `decrypt_value_helper`
        calls): detects the format by the `v2:gcm:` prefix."""
        return _litellm().crypt._decrypt_with_signing_key(value=value, signing_key=self.signing_key)

    def secret_map(self, mapping, algorithm="legacy"):
        """`encrypt_secret_map`: the whole map as compact JSON, sealed as one value, stored as a
        JSON *string* (so the jsonb column holds a string, not an object); an empty map is {}."""
        crypt = _litellm().crypt
        if not mapping:
            return {}
        plain = crypt._SECRET_MAP.dump_json(mapping).decode()
        return self.seal(plain, algorithm)


# --- rows ----------------------------------------------------------------------------------


def key_hash(plaintext):
    """What LiteLLM keeps of a key: sha256 hex of the plaintext (`hash_token`)."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


def new_key():
    """A key as `/key/generate` makes one: sk- + token_urlsafe(16)."""
    return f"sk-{secrets.token_urlsafe(16)}"


def budget_reset_at(days):
    """A `budget_reset_at` in the future, at midnight UTC as LiteLLM's standardized resets are."""
    return utcnow().replace(hour=0, minute=0, second=0, microsecond=0) + dt.timedelta(days=days)


def insert_key(conn, plaintext, *, alias=None, spend=0.0, total_spend=None, **fields):
    """A LiteLLM_VerificationToken row as `generate_key_helper_fn` writes it
    (management_endpoints/key_management_endpoints.py, then PrismaClient.insert_data): the token
    hashed, `blocked` NULL unless given, `models` [] for every model, the JSON columns as
    written. `total_spend` is the lifetime spend (`spend` resets with budget_duration; the spend
    writer adds every cost to both). Returns the hash."""
    now = utcnow()
    token = key_hash(plaintext)
    row = {
        "token": token,
        # abbreviate_api_key
        "key_name": f"sk-...{plaintext[-4:]}",
        "key_alias": alias,
        "expires": None,
        "models": [],
        "aliases": {},
        "config": {},
        "spend": spend,
        "total_spend": spend if total_spend is None else total_spend,
        "max_budget": None,
        "user_id": None,
        "team_id": None,
        "max_parallel_requests": None,
        "metadata": {},
        "tpm_limit": None,
        "rpm_limit": None,
        "budget_duration": None,
        "budget_reset_at": None,
        "allowed_cache_controls": [],
        "permissions": {},
        "model_max_budget": {},
        "budget_fallbacks": {},
        "organization_id": None,
        "budget_id": None,
        "blocked": None,
        "created_by": ADMIN,
        "updated_by": ADMIN,
        "allowed_routes": [],
        "key_type": "default",
        "object_permission_id": None,
        "router_settings": {},
        "access_group_ids": [],
        "auto_rotate": False,
        "created_at": now,
        "updated_at": now,
    }
    row.update(fields)
    _insert(conn, "LiteLLM_VerificationToken", row)
    return token


def block_key(conn, token, blocked=True):
    """`/key/block` (`/key/unblock`): `blocked` and `settings_updated_at`; Prisma's @updatedAt
    moves `updated_at` too."""
    now = utcnow()
    conn.execute(
        'UPDATE "LiteLLM_VerificationToken" SET blocked = %s, settings_updated_at = %s, updated_at = %s WHERE token = %s',
        (blocked, now, now, token),
    )


def delete_key(conn, token):
    """`/key/delete`: the row is copied to LiteLLM_DeletedVerificationToken (every column the
    two tables share, plus id, deleted_at, deleted_by, deleted_by_api_key;
    `_transform_verification_tokens_to_deleted_records`) and deleted, in one transaction."""
    shared = sorted(set(columns(conn, "LiteLLM_VerificationToken")) & set(columns(conn, "LiteLLM_DeletedVerificationToken")) - {"id"})
    listed = ", ".join(f'"{c}"' for c in shared)
    with conn.transaction():
        conn.execute(
            f'INSERT INTO "LiteLLM_DeletedVerificationToken" (id, {listed}, deleted_at, deleted_by, deleted_by_api_key) '
            f'SELECT %s, {listed}, %s, %s, %s FROM "LiteLLM_VerificationToken" WHERE token = %s',
            (str(uuid.uuid4()), utcnow(), ADMIN, None, token),
        )
        conn.execute('DELETE FROM "LiteLLM_VerificationToken" WHERE token = %s', (token,))


def add_spend(conn, cost, *, token=None, team_id=None, user_id=None, organization_id=None, end_user=None):
    """What the spend writer does after a request (db/db_spend_update_writer.py): each entity's
    `spend` incremented (a key's `total_spend` too, and `last_active` set)."""
    now = utcnow()
    if token:
        conn.execute(
            'UPDATE "LiteLLM_VerificationToken" SET spend = spend + %s, total_spend = total_spend + %s, '
            "last_active = %s, updated_at = %s WHERE token = %s",
            (cost, cost, now, now, token),
        )
    if team_id:
        conn.execute('UPDATE "LiteLLM_TeamTable" SET spend = spend + %s, updated_at = %s WHERE team_id = %s', (cost, now, team_id))
    if user_id:
        conn.execute('UPDATE "LiteLLM_UserTable" SET spend = spend + %s, updated_at = %s WHERE user_id = %s', (cost, now, user_id))
    if organization_id:
        conn.execute(
            'UPDATE "LiteLLM_OrganizationTable" SET spend = spend + %s, updated_at = %s WHERE organization_id = %s',
            (cost, now, organization_id),
        )
    if end_user:
        conn.execute('UPDATE "LiteLLM_EndUserTable" SET spend = spend + %s WHERE user_id = %s', (cost, end_user))


def insert_budget(conn, budget_id=None, **fields):
    """A LiteLLM_BudgetTable row as `/budget/new`, `/organization/new` and `/customer/new` write
    it (`build_budget_write_data`): `budget_reset_at` follows `budget_duration`. Returns its id."""
    now = utcnow()
    row = {
        "budget_id": budget_id or str(uuid.uuid4()),
        "created_by": ADMIN,
        "updated_by": ADMIN,
        "created_at": now,
        "updated_at": now,
    }
    row.update(fields)
    _insert(conn, "LiteLLM_BudgetTable", row)
    return row["budget_id"]


def insert_user(conn, user_id, *, password=None, **fields):
    """A LiteLLM_UserTable row as `/user/new` writes it (`user_data` in
    `generate_key_helper_fn`); a password as `hash_password` stores it."""
    now = utcnow()
    row = {
        "user_id": user_id,
        "user_alias": None,
        "user_email": None,
        "user_role": "internal_user",
        "team_id": None,
        "organization_id": None,
        "max_budget": None,
        "spend": 0.0,
        "models": [],
        "metadata": {},
        "max_parallel_requests": None,
        "tpm_limit": None,
        "rpm_limit": None,
        "budget_duration": None,
        "budget_reset_at": None,
        "allowed_cache_controls": [],
        "sso_user_id": None,
        "teams": [],
        "created_at": now,
        "updated_at": now,
    }
    if password is not None:
        row["password"] = hash_password(password)
    row.update(fields)
    _insert(conn, "LiteLLM_UserTable", row)


def hash_password(password):
    """`litellm.proxy.utils.hash_password` outside FIPS mode: "scrypt:" + base64(salt || key),
    scrypt n=16384, r=8, p=1, 32 bytes. (Written from its source: importing litellm.proxy.utils
    needs the whole proxy.)"""
    salt = os.urandom(16)
    dk = hashlib.scrypt(password.encode(), salt=salt, n=16384, r=8, p=1, dklen=32)
    return "scrypt:" + base64.b64encode(salt + dk).decode()


def insert_team(conn, team_id, *, members=(), **fields):
    """A LiteLLM_TeamTable row as `/team/new` writes it (management_endpoints/team_endpoints.py),
    then its members as `_add_team_members_to_team` adds them (management_helpers/utils.py
    `add_new_member`): `members_with_roles` a JSON list of {user_id, user_email, role} (the
    column's default is the object {}), the team id appended to each user's `teams`, and a
    LiteLLM_TeamMembership row per member (budget_id only when a member budget applies).
    `members` is a list of (user_id, user_email, role, member_spend)."""
    now = utcnow()
    row = {
        "team_id": team_id,
        "team_alias": None,
        "organization_id": None,
        "admins": [],
        "members": [],
        "members_with_roles": [{"user_id": u, "user_email": e, "role": r} for u, e, r, _ in members],
        "metadata": {},
        "max_budget": None,
        "spend": 0.0,
        "models": [],
        "tpm_limit": None,
        "rpm_limit": None,
        "budget_duration": None,
        "budget_reset_at": None,
        "blocked": False,
        "router_settings": {},
        "model_spend": {},
        "model_max_budget": {},
        "allow_team_guardrail_config": False,
        "created_at": now,
        "updated_at": now,
    }
    row.update(fields)
    _insert(conn, "LiteLLM_TeamTable", row)
    for user_id, _, _, member_spend in members:
        conn.execute(
            'UPDATE "LiteLLM_UserTable" SET teams = array_append(teams, %s) WHERE user_id = %s AND NOT (%s = ANY(teams))',
            (team_id, user_id, team_id),
        )
        _insert(conn, "LiteLLM_TeamMembership", {"user_id": user_id, "team_id": team_id, "spend": member_spend, "total_spend": member_spend})


def insert_organization(conn, organization_id, alias, budget_id, *, members=(), **fields):
    """A LiteLLM_OrganizationTable row as `/organization/new` writes it (a budget row is required:
    `budget_id` is NOT NULL), and its members as `/organization/member_add` adds them
    (LiteLLM_OrganizationMembership with the member's role; the user's own `organization_id`
    is left as it was). `members` is a list of (user_id, role)."""
    now = utcnow()
    row = {
        "organization_id": organization_id,
        "organization_alias": alias,
        "budget_id": budget_id,
        "metadata": {},
        "models": [],
        "spend": 0.0,
        "model_spend": {},
        "created_by": ADMIN,
        "updated_by": ADMIN,
        "created_at": now,
        "updated_at": now,
    }
    row.update(fields)
    _insert(conn, "LiteLLM_OrganizationTable", row)
    for user_id, role in members:
        _insert(
            conn,
            "LiteLLM_OrganizationMembership",
            {"user_id": user_id, "organization_id": organization_id, "user_role": role, "created_at": now, "updated_at": now},
        )


def insert_tag(conn, tag_name, budget_id=None, **fields):
    """A LiteLLM_TagTable row as `/tag/new` writes it (its limits live in the budget row named by
    `budget_id`, which `/tag/new` makes from its budget fields)."""
    now = utcnow()
    row = {
        "tag_name": tag_name,
        "description": None,
        "models": [],
        "model_info": {},
        "spend": 0.0,
        "budget_id": budget_id,
        "created_by": ADMIN,
        "created_at": now,
        "updated_at": now,
    }
    row.update(fields)
    _insert(conn, "LiteLLM_TagTable", row)


def insert_end_user(conn, user_id, **fields):
    """A LiteLLM_EndUserTable row as `/customer/new` writes it (its limits live in the budget row
    named by `budget_id`)."""
    row = {"user_id": user_id, "alias": None, "spend": 0.0, "blocked": False, "budget_id": None, "models": []}
    row.update(fields)
    _insert(conn, "LiteLLM_EndUserTable", row)


def insert_db_model(conn, sealer, model_name, litellm_params, *, algorithm="legacy", model_id=None):
    """A LiteLLM_ProxyModelTable row as `/model/new` writes it (`add_model_to_db`,
    management_endpoints/model_management_endpoints.py): LiteLLM's own `Deployment` type fills
    the defaults, every *string* value of litellm_params is sealed on its own (the model name
    and api_base too; booleans and numbers are not), then dumped with exclude_none. Returns
    the model id."""
    lib = _litellm()
    model_id = model_id or str(uuid.uuid4())
    deployment = lib.Deployment(model_name=model_name, litellm_params=dict(litellm_params), model_info={"id": model_id})
    for k, v in deployment.litellm_params.model_dump(exclude_none=True).items():
        if isinstance(v, str):
            deployment.litellm_params[k] = sealer.seal(v, algorithm)
    now = utcnow()
    _insert(
        conn,
        "LiteLLM_ProxyModelTable",
        {
            "model_id": model_id,
            "model_name": model_name,
            "litellm_params": Jsonb(json.loads(deployment.litellm_params.model_dump_json(exclude_none=True))),
            "model_info": Jsonb(json.loads(deployment.model_info.model_dump_json(exclude_none=True))),
            "created_by": ADMIN,
            "updated_by": ADMIN,
            "created_at": now,
            "updated_at": now,
        },
    )
    return model_id


# The credential fields `encrypt_credentials` seals (mcp_server/db.py).
_MCP_SEALED = (
    "auth_value", "client_id", "client_secret", "client_private_key", "id_jag_resource_client_secret",
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token",
)


def insert_mcp_server(conn, sealer, *, algorithm="legacy", **request):
    """A LiteLLM_MCPServerTable row as `/v1/mcp/server` writes it (`_prepare_mcp_server_data`,
    mcp_server/db.py): LiteLLM's `NewMCPServerRequest` dumped with exclude_none; `credentials`
    a JSON object whose secret fields are each sealed; `static_headers` and `env` sealed whole by
    `encrypt_secret_map` (a JSON string in the jsonb column). Returns the server id."""
    lib = _litellm()
    data = lib.NewMCPServerRequest(**request)
    if data.server_id is None:
        data.server_id = str(uuid.uuid4())
    row = data.model_dump(exclude_none=True)
    row.setdefault("alias", None)
    if row.get("credentials") is not None:
        creds = dict(row["credentials"])
        for field in _MCP_SEALED:
            if creds.get(field) is not None:
                creds[field] = sealer.seal(creds[field], algorithm)
        row["credentials"] = creds
    if row.get("static_headers") is not None:
        row["static_headers"] = Jsonb(sealer.secret_map(row["static_headers"], algorithm))
    if row.get("env") is not None:
        row["env"] = Jsonb(sealer.secret_map(row["env"], algorithm))
    row["is_byok"] = bool(getattr(data, "is_byok", False))
    row["created_by"] = ADMIN
    row["updated_by"] = ADMIN
    now = utcnow()
    row["created_at"] = now
    row["updated_at"] = now
    _insert(conn, "LiteLLM_MCPServerTable", row)
    return data.server_id


def _sealed_guardrail_param(key, value, sealer, algorithm):
    """`_encrypted_param` (proxy/guardrails/guardrail_registry.py): at any depth, a non-empty
    string under a key LiteLLM's `is_sensitive_callback_key` calls sensitive becomes
    "litellm_enc::" + the sealed value. (Called with the key given instead of through
    `encrypt_value_helper`, which needs the running proxy.)"""
    lib = _litellm()
    if isinstance(value, dict):
        return {k: _sealed_guardrail_param(k, v, sealer, algorithm) for k, v in value.items()}
    if isinstance(value, list):
        return [_sealed_guardrail_param(key, v, sealer, algorithm) for v in value]
    if isinstance(value, str) and value and lib.sensitive(key) and not value.startswith(lib.enc_prefix):
        return lib.enc_prefix + sealer.seal(value, algorithm)
    return value


def insert_guardrail(conn, sealer, guardrail_name, litellm_params, *, guardrail_info=None, algorithm="legacy"):
    """A LiteLLM_GuardrailsTable row as `/guardrails` writes it (`add_guardrail_to_db`):
    LiteLLM's `LitellmParams` dumped WITHOUT exclude_none (every one of its ~170 fields, most
    null, many with defaults meant for other vendors), sensitive strings sealed with the
    "litellm_enc::" prefix. Returns the guardrail id."""
    lib = _litellm()
    params = lib.LitellmParams(**litellm_params).model_dump()
    sealed = {k: _sealed_guardrail_param(k, v, sealer, algorithm) for k, v in params.items()}
    guardrail_id = str(uuid.uuid4())
    now = utcnow()
    _insert(
        conn,
        "LiteLLM_GuardrailsTable",
        {
            "guardrail_id": guardrail_id,
            "guardrail_name": guardrail_name,
            "litellm_params": Jsonb(json.loads(lib.safe_dumps(sealed))),
            "guardrail_info": Jsonb(json.loads(lib.safe_dumps(guardrail_info or {}))),
            "created_at": now,
            "updated_at": now,
        },
    )
    return guardrail_id


# --- spend logs ------------------------------------------------------------------------------


@dataclasses.dataclass
class Caller:
    """Who a spend log row is for: the key (its hash and alias) and what it belongs to."""

    token: str
    alias: str | None = None
    team_id: str | None = None
    user_id: str | None = None
    organization_id: str | None = None


def _spend_metadata(caller, status, requester_ip="127.0.0.1"):
    """The `metadata` column as `_get_spend_logs_metadata` fills it
    (proxy/spend_tracking/spend_tracking_utils.py), for a request made with a virtual key."""
    return {
        "user_api_key": caller.token,
        "user_api_key_alias": caller.alias,
        "user_api_key_team_id": caller.team_id,
        "user_api_key_project_id": None,
        "user_api_key_project_alias": None,
        "user_api_key_org_id": caller.organization_id,
        "user_api_key_user_id": caller.user_id,
        "user_api_key_user_email": None,
        "user_api_key_team_alias": None,
        "spend_logs_metadata": None,
        "requester_ip_address": requester_ip,
        "user_agent": "OpenAI/Python 2.54.0",
        "applied_guardrails": [],
        "status": status,
        "error_information": None if status == "success" else {"error_code": "429", "error_class": "RateLimitError", "llm_provider": "openai"},
        "proxy_server_request": None,
        "batch_models": None,
        "mcp_tool_call_metadata": None,
        "vector_store_request_metadata": None,
        "model_map_information": None,
        "usage_object": None,
        "guardrail_information": None,
        "cold_storage_object_key": None,
        "litellm_overhead_time_ms": 3.2,
        "attempted_retries": 0,
        "max_retries": 0,
        "additional_usage_values": {},
    }


def spend_log(caller, start, *, model_group, model="gpt-4o-mini", spend=0.0, prompt_tokens=0, completion_tokens=0,
              status="success", end_user="", request_id=None, api_base="https://api.openai.com/v1", model_id=None):
    """One LiteLLM_SpendLogs row as `get_logging_payload` builds it for a chat completion:
    request_id the response id, api_key the key's hash, '' (not NULL) for a missing team,
    user, end user or organization, cache_hit a string, request_tags [], messages/response {}
    (prompts are not stored by default)."""
    duration = dt.timedelta(milliseconds=420)
    call_id = str(uuid.uuid4())
    return {
        "request_id": request_id or f"chatcmpl-{uuid.uuid4()}",
        "call_type": "acompletion",
        "api_key": caller.token,
        "spend": spend,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "startTime": start,
        "endTime": start + duration,
        "completionStartTime": start + duration,
        "model": model,
        "model_id": model_id or hashlib.sha256(model_group.encode()).hexdigest(),
        "model_group": model_group,
        "custom_llm_provider": "openai",
        "api_base": api_base,
        "user": caller.user_id or "",
        "metadata": _spend_metadata(caller, status),
        "cache_hit": "False",
        "cache_key": "Cache OFF",
        "request_tags": [],
        "team_id": caller.team_id or "",
        "organization_id": caller.organization_id or "",
        "end_user": end_user,
        "requester_ip_address": "127.0.0.1",
        "messages": {},
        "response": {},
        "proxy_server_request": {},
        "session_id": call_id,
        "status": status,
        "request_duration_ms": 420,
        "litellm_call_id": call_id,
        "created_at": start + duration,
        "updated_at": start + duration,
    }


def insert_spend_logs(conn, rows):
    """Write spend log rows (dicts from `spend_log`) in one batch."""
    if not rows:
        return
    types = columns(conn, "LiteLLM_SpendLogs")
    names = list(rows[0])
    listed = ", ".join(f'"{n}"' for n in names)
    marks = ", ".join(["%s"] * len(names))
    values = [[Jsonb(r[n]) if types[n] == "jsonb" else r[n] for n in names] for r in rows]
    with conn.cursor() as cur:
        cur.executemany(f'INSERT INTO "LiteLLM_SpendLogs" ({listed}) VALUES ({marks})', values)


def generate_spend_logs(conn, count, callers, first, last, *, model_group="group-a", prefix="gen"):
    """`count` spend log rows made by PostgreSQL itself (INSERT ... SELECT generate_series: a
    million in well under a minute), shaped as `spend_log` shapes them, spread evenly over the
    callers and over [first, last]; request ids `chatcmpl-<prefix>-<n>`."""
    span_ms = max(1, int((last - first).total_seconds() * 1000))
    conn.execute(
        """
        INSERT INTO "LiteLLM_SpendLogs" (
            request_id, call_type, api_key, spend, total_tokens, prompt_tokens, completion_tokens,
            "startTime", "endTime", "completionStartTime", model, model_id, model_group,
            custom_llm_provider, api_base, "user", metadata, cache_hit, cache_key, request_tags,
            team_id, organization_id, end_user, requester_ip_address, messages, response,
            proxy_server_request, session_id, status, request_duration_ms, litellm_call_id,
            created_at, updated_at)
        SELECT
            'chatcmpl-' || %(prefix)s || '-' || g,
            'acompletion',
            c.token,
            (20 + g %% 50) * 0.00000015 + (10 + g %% 30) * 0.0000006,
            30 + g %% 50 + g %% 30,
            20 + g %% 50,
            10 + g %% 30,
            t.at, t.at + interval '420 milliseconds', t.at + interval '420 milliseconds',
            'gpt-4o-mini', md5(%(group)s), %(group)s, 'openai', 'https://api.openai.com/v1',
            coalesce(c.user_id, ''),
            jsonb_build_object(
                'user_api_key', c.token, 'user_api_key_alias', c.alias,
                'user_api_key_team_id', c.team_id, 'user_api_key_org_id', c.organization_id,
                'user_api_key_user_id', c.user_id, 'requester_ip_address', '127.0.0.1',
                'status', 'success', 'applied_guardrails', '[]'::jsonb,
                'additional_usage_values', '{}'::jsonb, 'litellm_overhead_time_ms', 3.2),
            'False', 'Cache OFF', '[]'::jsonb,
            coalesce(c.team_id, ''), coalesce(c.organization_id, ''), '', '127.0.0.1',
            '{}'::jsonb, '{}'::jsonb, '{}'::jsonb,
            md5(%(prefix)s || g), 'success', 420, md5(%(prefix)s || g),
            t.at + interval '420 milliseconds', t.at + interval '420 milliseconds'
        FROM generate_series(1, %(count)s) AS g
        CROSS JOIN LATERAL (
            SELECT %(first)s::timestamp + ((g::bigint * %(span)s) / %(count)s) * interval '1 millisecond' AS at
        ) AS t
        CROSS JOIN LATERAL (
            SELECT (%(tokens)s::text[])[1 + g %% %(n)s] AS token,
                   (%(aliases)s::text[])[1 + g %% %(n)s] AS alias,
                   (%(teams)s::text[])[1 + g %% %(n)s] AS team_id,
                   (%(users)s::text[])[1 + g %% %(n)s] AS user_id,
                   (%(orgs)s::text[])[1 + g %% %(n)s] AS organization_id
        ) AS c
        """,
        {
            "prefix": prefix,
            "group": model_group,
            "count": count,
            "first": first,
            "span": span_ms,
            "n": len(callers),
            "tokens": [c.token for c in callers],
            "aliases": [c.alias for c in callers],
            "teams": [c.team_id for c in callers],
            "users": [c.user_id for c in callers],
            "orgs": [c.organization_id for c in callers],
        },
    )
