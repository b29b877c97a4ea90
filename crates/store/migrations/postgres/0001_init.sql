-- sluice store, PostgreSQL dialect. Times are Unix milliseconds (UTC); money is USD as
-- DOUBLE PRECISION; flags are 0/1 BIGINTs and JSON is TEXT so that both backends decode
-- the same Rust types. The SQLite set has the same tables and columns.

CREATE TABLE teams (
    team_id               TEXT PRIMARY KEY,
    team_alias            TEXT,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            DOUBLE PRECISION,
    budget_duration       TEXT,
    budget_reset_at       BIGINT,
    rpm_limit             BIGINT,
    tpm_limit             BIGINT,
    max_parallel_requests BIGINT,
    metadata              TEXT NOT NULL DEFAULT '{}',
    blocked               BIGINT NOT NULL DEFAULT 0,
    spend                 DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);

CREATE TABLE users (
    user_id               TEXT PRIMARY KEY,
    user_alias            TEXT,
    user_email            TEXT,
    user_role             TEXT,
    team_id               TEXT,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            DOUBLE PRECISION,
    budget_duration       TEXT,
    budget_reset_at       BIGINT,
    rpm_limit             BIGINT,
    tpm_limit             BIGINT,
    max_parallel_requests BIGINT,
    metadata              TEXT NOT NULL DEFAULT '{}',
    spend                 DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);

CREATE TABLE keys (
    token                 TEXT PRIMARY KEY,
    key_alias             TEXT UNIQUE,
    key_name              TEXT NOT NULL,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            DOUBLE PRECISION,
    budget_duration       TEXT,
    budget_reset_at       BIGINT,
    rpm_limit             BIGINT,
    tpm_limit             BIGINT,
    max_parallel_requests BIGINT,
    expires               BIGINT,
    metadata              TEXT NOT NULL DEFAULT '{}',
    user_id               TEXT,
    team_id               TEXT,
    blocked               BIGINT NOT NULL DEFAULT 0,
    spend                 DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
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
    max_budget            DOUBLE PRECISION,
    budget_duration       TEXT,
    budget_reset_at       BIGINT,
    rpm_limit             BIGINT,
    tpm_limit             BIGINT,
    max_parallel_requests BIGINT,
    metadata              TEXT NOT NULL DEFAULT '{}',
    blocked               BIGINT NOT NULL DEFAULT 0,
    spend                 DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at            BIGINT NOT NULL,
    updated_at            BIGINT NOT NULL
);

-- Keys removed (deleted, or replaced by /key/regenerate) and when: the auth cache polls
-- `updated_at` and this table to learn about revocations without reloading every key.
CREATE TABLE deleted_keys (
    token                 TEXT PRIMARY KEY,
    deleted_at            BIGINT NOT NULL
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
    prompt_tokens         BIGINT NOT NULL,
    completion_tokens     BIGINT NOT NULL,
    cached_tokens         BIGINT NOT NULL,
    cache_creation_tokens BIGINT NOT NULL,
    reasoning_tokens      BIGINT NOT NULL,
    spend                 DOUBLE PRECISION NOT NULL,
    status                TEXT NOT NULL,
    start_time            BIGINT NOT NULL,
    end_time              BIGINT NOT NULL,
    ttfb_ms               BIGINT,
    cache_hit             BIGINT NOT NULL DEFAULT 0
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
    requests              BIGINT NOT NULL,
    failed_requests       BIGINT NOT NULL,
    prompt_tokens         BIGINT NOT NULL,
    completion_tokens     BIGINT NOT NULL,
    cached_tokens         BIGINT NOT NULL,
    cache_creation_tokens BIGINT NOT NULL,
    spend                 DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (day, api_key, team_id, model_group)
);
