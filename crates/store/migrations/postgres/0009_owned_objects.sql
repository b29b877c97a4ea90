-- Who owns the files and batches sluice hands out (issue: objects had no owner). One row per
-- upstream object: its kind (`file` or `batch`), the deployment that holds it and the
-- upstream's own id (together the key), the id sluice showed its creator, the creator's key
-- hash (NULL for the master key or an open gateway) and team, and for a batch whether its
-- usage was charged (0/1, flipped once by a conditional UPDATE so that a fleet charges once).
CREATE TABLE owned_objects (
    kind        TEXT NOT NULL,
    deployment  TEXT NOT NULL,
    upstream_id TEXT NOT NULL,
    sluice_id   TEXT NOT NULL,
    owner_key   TEXT,
    team_id     TEXT,
    created_at  BIGINT NOT NULL,
    charged     BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, deployment, upstream_id)
);
CREATE INDEX owned_objects_owner ON owned_objects (owner_key);
