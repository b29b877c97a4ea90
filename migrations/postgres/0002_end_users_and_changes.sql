-- End users (the `user` field of a request; LiteLLM's "customers") with their own budget and
-- limits, tombstones so that other instances learn of deletions, and indexes for the change poll.

CREATE TABLE end_users (
    user_id               TEXT PRIMARY KEY,
    alias                 TEXT,
    blocked               BIGINT NOT NULL DEFAULT 0,
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

CREATE TABLE deletions (
    kind                  TEXT NOT NULL,
    id                    TEXT NOT NULL,
    deleted_at            BIGINT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX deletions_time ON deletions (deleted_at);

CREATE INDEX keys_updated ON keys (updated_at);
CREATE INDEX teams_updated ON teams (updated_at);
CREATE INDEX users_updated ON users (updated_at);
CREATE INDEX end_users_updated ON end_users (updated_at);
