-- Budgets as objects (LiteLLM's LiteLLM_BudgetTable) and organizations (LiteLLM's
-- LiteLLM_OrganizationTable) with their members. An object that names a budget (`budget_id`)
-- carries a copy of the budget's limits in its own columns, rewritten by /budget/update, so the
-- request path and the budget-reset job read one row as before.
CREATE TABLE budgets (
    budget_id             TEXT PRIMARY KEY,
    max_budget            REAL,
    soft_budget           REAL,
    max_parallel_requests INTEGER,
    tpm_limit             INTEGER,
    rpm_limit             INTEGER,
    budget_duration       TEXT,
    budget_reset_at       INTEGER,
    model_max_budget      TEXT,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

-- An organization: the same limit columns as a team (copied from its budget), and its spend,
-- which every key and team under it adds to.
CREATE TABLE organizations (
    organization_id       TEXT PRIMARY KEY,
    organization_alias    TEXT,
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
CREATE INDEX organizations_updated ON organizations (updated_at);

-- Who belongs to an organization, with which role (`org_admin`, `internal_user`,
-- `internal_user_viewer`) and their budget within it.
CREATE TABLE organization_members (
    organization_id            TEXT NOT NULL,
    user_id                    TEXT NOT NULL,
    role                       TEXT NOT NULL,
    max_budget_in_organization REAL,
    created_at                 INTEGER NOT NULL,
    updated_at                 INTEGER NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX organization_members_user ON organization_members (user_id);

-- Keys and teams under an organization; every budget holder may name a budget.
ALTER TABLE keys ADD COLUMN organization_id TEXT;
ALTER TABLE keys ADD COLUMN budget_id TEXT;
ALTER TABLE teams ADD COLUMN organization_id TEXT;
ALTER TABLE teams ADD COLUMN budget_id TEXT;
ALTER TABLE users ADD COLUMN budget_id TEXT;
ALTER TABLE end_users ADD COLUMN budget_id TEXT;
CREATE INDEX keys_organization ON keys (organization_id);
CREATE INDEX teams_organization ON teams (organization_id);
