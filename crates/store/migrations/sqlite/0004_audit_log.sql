-- Every change made through the management API or the console: who, what, to which object,
-- and its value before and after (secrets masked before they are written).
CREATE TABLE audit_log (
    id             TEXT PRIMARY KEY,
    changed_at     BIGINT NOT NULL,
    changed_by     TEXT NOT NULL,
    action         TEXT NOT NULL,
    table_name     TEXT NOT NULL,
    object_id      TEXT NOT NULL,
    before_value   TEXT,
    updated_values TEXT
);
CREATE INDEX audit_log_time ON audit_log (changed_at);
CREATE INDEX audit_log_object ON audit_log (table_name, object_id);
