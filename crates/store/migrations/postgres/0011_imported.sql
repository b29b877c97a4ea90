-- What `sluice import litellm` wrote (issue 39): one row per object it brought over from
-- another gateway's database (`source`: `litellm`), by kind (`key`, `team`, `team_member`, ...)
-- and the source's id. `fingerprint` digests the fields it wrote, so a re-run rewrites only
-- what changed at the source; `spend` is the source's spend at that time, so a re-run adds
-- only what the source's spend grew by and spend made through sluice is kept. An object in
-- this table that is gone from the source was deleted there (`--follow` deletes it here too).
CREATE TABLE imported (
    source      TEXT NOT NULL,
    kind        TEXT NOT NULL,
    id          TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    spend       DOUBLE PRECISION NOT NULL DEFAULT 0,
    imported_at BIGINT NOT NULL,
    PRIMARY KEY (source, kind, id)
);

-- Where an import's incremental reads stand (the newest spend log start time it has read),
-- by source and name.
CREATE TABLE import_cursors (
    source TEXT NOT NULL,
    name   TEXT NOT NULL,
    value  BIGINT NOT NULL,
    PRIMARY KEY (source, name)
);
