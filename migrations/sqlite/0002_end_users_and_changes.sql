-- End users (the `user` field of a request; LiteLLM's "customers") with their own budget and
-- limits, tombstones so that other instances learn of deletions, and indexes for the change poll.

CREATE TABLE end_users (
    user_id               TEXT PRIMARY KEY,
    alias                 TEXT,
    blocked               INTEGER NOT NULL DEFAULT 0,
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

CREATE TABLE deletions (
    kind                  TEXT NOT NULL,
    id                    TEXT NOT NULL,
    deleted_at            INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX deletions_time ON deletions (deleted_at);

CREATE INDEX keys_updated ON keys (updated_at);
CREATE INDEX teams_updated ON teams (updated_at);
CREATE INDEX users_updated ON users (updated_at);
CREATE INDEX end_users_updated ON end_users (updated_at);
