-- Tags as budget holders (LiteLLM's LiteLLM_TagTable, `/tag/*`): a cost centre, project or
-- feature that requests name in their tags. A tag carries the same limit columns as a team
-- (copied from its budget object, as an organization's are), and its spend grows with every
-- request that names it, whoever made it. Requests may name tags no row describes: those are
-- only counted (`/spend/tags`).
CREATE TABLE tags (
    tag_name              TEXT PRIMARY KEY,
    description           TEXT,
    -- Model names or deployment ids the tag routes to (LiteLLM's `models`), and their names.
    model_info            TEXT NOT NULL DEFAULT '{}',
    created_by            TEXT,
    models                TEXT NOT NULL DEFAULT '[]',
    max_budget            REAL,
    budget_duration       TEXT,
    budget_reset_at       INTEGER,
    rpm_limit             INTEGER,
    tpm_limit             INTEGER,
    max_parallel_requests INTEGER,
    metadata              TEXT NOT NULL DEFAULT '{}',
    budget_id             TEXT,
    spend                 REAL NOT NULL DEFAULT 0,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);
CREATE INDEX tags_updated ON tags (updated_at);

-- Tags deleted, so that every instance's directory stops holding requests to their limits
-- (as `deleted_keys` does for keys).
CREATE TABLE deleted_tags (
    tag_name   TEXT PRIMARY KEY,
    deleted_at INTEGER NOT NULL
);
CREATE INDEX deleted_tags_at ON deleted_tags (deleted_at);
