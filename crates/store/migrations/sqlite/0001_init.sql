-- sluice store, SQLite dialect. Times are Unix milliseconds (UTC); money is USD as REAL;
-- flags are 0/1 integers; JSON is TEXT. The PostgreSQL set has the same tables and columns.

CREATE TABLE teams (
    team_id               TEXT PRIMARY KEY,
    team_alias            TEXT,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            REAL,
    budget_duration       TEXT,
    budget_reset_at       INTEGER,
    rpm_limit             INTEGER,
    tpm_limit             INTEGER,
    max_parallel_requests INTEGER,
    metadata              TEXT NOT NULL DEFAULT '{}',
    blocked               INTEGER NOT NULL DEFAULT 0,
    spend                 REAL NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE users (
    user_id               TEXT PRIMARY KEY,
    user_alias            TEXT,
    user_email            TEXT,
    user_role             TEXT,
    team_id               TEXT,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            REAL,
    budget_duration       TEXT,
    budget_reset_at       INTEGER,
    rpm_limit             INTEGER,
    tpm_limit             INTEGER,
    max_parallel_requests INTEGER,
    metadata              TEXT NOT NULL DEFAULT '{}',
    spend                 REAL NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE keys (
    token                 TEXT PRIMARY KEY,
    key_alias             TEXT UNIQUE,
    key_name              TEXT NOT NULL,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            REAL,
    budget_duration       TEXT,
    budget_reset_at       INTEGER,
    rpm_limit             INTEGER,
    tpm_limit             INTEGER,
    max_parallel_requests INTEGER,
    expires               INTEGER,
    metadata              TEXT NOT NULL DEFAULT '{}',
    user_id               TEXT,
    team_id               TEXT,
    blocked               INTEGER NOT NULL DEFAULT 0,
    spend                 REAL NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX keys_team ON keys (team_id);
CREATE INDEX keys_user ON keys (user_id);
CREATE INDEX keys_updated ON keys (updated_at);
CREATE INDEX teams_updated ON teams (updated_at);
CREATE INDEX users_updated ON users (updated_at);

-- End users: the `user` field of a request body (LiteLLM's customers), each with an
-- optional budget of its own.
CREATE TABLE end_users (
    user_id               TEXT PRIMARY KEY,
    alias                 TEXT,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            REAL,
    budget_duration       TEXT,
    budget_reset_at       INTEGER,
    rpm_limit             INTEGER,
    tpm_limit             INTEGER,
    max_parallel_requests INTEGER,
    metadata              TEXT NOT NULL DEFAULT '{}',
    blocked               INTEGER NOT NULL DEFAULT 0,
    spend                 REAL NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

-- Keys removed (deleted, or replaced by /key/regenerate) and when: the auth cache polls
-- `updated_at` and this table to learn about revocations without reloading every key.
CREATE TABLE deleted_keys (
    token                 TEXT PRIMARY KEY,
    deleted_at            INTEGER NOT NULL
);
CREATE INDEX deleted_keys_at ON deleted_keys (deleted_at);

CREATE INDEX end_users_updated ON end_users (updated_at);

CREATE TABLE spend_logs (
    -- One id per record, made by sluice: request ids come from clients and may repeat,
    -- and replaying a spooled batch must not count it twice.
    id                    TEXT PRIMARY KEY,
    request_id            TEXT NOT NULL,
    api_key               TEXT,
    team_id               TEXT,
    user_id               TEXT,
    end_user              TEXT,
    model_group           TEXT NOT NULL,
    deployment_id         TEXT,
    provider              TEXT,
    prompt_tokens         INTEGER NOT NULL,
    completion_tokens     INTEGER NOT NULL,
    cached_tokens         INTEGER NOT NULL,
    cache_creation_tokens INTEGER NOT NULL,
    reasoning_tokens      INTEGER NOT NULL,
    spend                 REAL NOT NULL,
    status                TEXT NOT NULL,
    start_time            INTEGER NOT NULL,
    end_time              INTEGER NOT NULL,
    ttfb_ms               INTEGER,
    cache_hit             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX spend_logs_key_time ON spend_logs (api_key, start_time);
CREATE INDEX spend_logs_time ON spend_logs (start_time);
CREATE INDEX spend_logs_request ON spend_logs (request_id);
CREATE INDEX spend_logs_user_time ON spend_logs (user_id, start_time);

CREATE TABLE daily_spend (
    day                   TEXT NOT NULL,
    api_key               TEXT NOT NULL,
    team_id               TEXT NOT NULL,
    model_group           TEXT NOT NULL,
    requests              INTEGER NOT NULL,
    failed_requests       INTEGER NOT NULL,
    prompt_tokens         INTEGER NOT NULL,
    completion_tokens     INTEGER NOT NULL,
    cached_tokens         INTEGER NOT NULL,
    cache_creation_tokens INTEGER NOT NULL,
    spend                 REAL NOT NULL,
    PRIMARY KEY (day, api_key, team_id, model_group)
);
