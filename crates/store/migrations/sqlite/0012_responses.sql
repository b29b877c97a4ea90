-- The Responses API's state (issue 43): answers kept for `previous_response_id`,
-- `GET /v1/responses/{id}` and `/input_items`, and the Conversations API's conversations and
-- items. Content (`sealed`) is sealed with the gateway's key before it reaches the database, as
-- stored provider keys are; the owner is the hash of the key that made it (NULL for the master
-- key), the only one (besides the master key) that reads it. Times are Unix milliseconds.
CREATE TABLE stored_responses (
    id              TEXT PRIMARY KEY,
    owner_key       TEXT,
    team_id         TEXT,
    model           TEXT NOT NULL,
    previous_id     TEXT,
    conversation_id TEXT,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT,
    sealed          TEXT NOT NULL
);
CREATE INDEX stored_responses_expiry ON stored_responses (expires_at);

CREATE TABLE conversations (
    id         TEXT PRIMARY KEY,
    owner_key  TEXT,
    team_id    TEXT,
    created_at BIGINT NOT NULL,
    metadata   TEXT NOT NULL
);

-- A conversation's items in order (`seq`), each sealed; `id` is the item's own id.
CREATE TABLE conversation_items (
    conversation_id TEXT NOT NULL,
    seq             BIGINT NOT NULL,
    id              TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    sealed          TEXT NOT NULL,
    PRIMARY KEY (conversation_id, seq)
);
CREATE UNIQUE INDEX conversation_items_id ON conversation_items (conversation_id, id);
