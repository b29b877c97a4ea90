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

-- Teams, users, end users, organizations and tags deleted (`kind`: team, user, end_user,
-- organization, tag), so that every instance's directory drops them and their live counters (as
-- `deleted_keys` does for keys): an id made again starts from zero. One row per holder, moved
-- on by a later deletion.
CREATE TABLE deleted_holders (
    kind       TEXT NOT NULL,
    id         TEXT NOT NULL,
    deleted_at INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX deleted_holders_at ON deleted_holders (deleted_at);
