-- The spend store at scale (docs/store.md, "A spend store that stays flat").
--
-- 1. spend_logs becomes a table partitioned by UTC day on start_time (Unix ms): one partition
--    per day, `spend_logs_YYYYMMDD`, made ahead by the writer's maintenance and on demand for a
--    batch that brings another day (an import's old rows). Retention drops whole partitions
--    instead of deleting rows, so a day goes in one catalog change and leaves no dead tuples
--    to vacuum. A partitioned table's unique keys must hold the partition key: the key is
--    (id, start_time). Ids are UUIDs made by sluice (imports: `litellm:<request_id>`) and a
--    replayed record keeps its start time, so a replay still meets its own row and is skipped.
--    The same indexes as before exist on every partition, so a keyset page reads each day's
--    index in order and stops at the page's end.
--
-- 2. Rows already stored are not copied: the old table is attached whole as one partition,
--    `spend_logs_legacy`, for every time before the end of today (its indexes are reused; only
--    the new key is built). Retention deletes from it in batches until its whole range has
--    passed, then drops it. An empty old table is simply dropped.
ALTER TABLE spend_logs RENAME TO spend_logs_legacy;
ALTER INDEX spend_logs_pkey RENAME TO spend_logs_legacy_pkey;
ALTER INDEX spend_logs_key_time RENAME TO spend_logs_legacy_key_time;
ALTER INDEX spend_logs_request RENAME TO spend_logs_legacy_request;
ALTER INDEX spend_logs_user_time RENAME TO spend_logs_legacy_user_time;
ALTER INDEX spend_logs_team_time RENAME TO spend_logs_legacy_team_time;
ALTER INDEX spend_logs_model_time RENAME TO spend_logs_legacy_model_time;
ALTER INDEX spend_logs_time_id RENAME TO spend_logs_legacy_time_id;
ALTER INDEX spend_logs_failures RENAME TO spend_logs_legacy_failures;

CREATE TABLE spend_logs (LIKE spend_logs_legacy INCLUDING DEFAULTS)
    PARTITION BY RANGE (start_time);
ALTER TABLE spend_logs ADD PRIMARY KEY (id, start_time);
CREATE INDEX spend_logs_key_time ON spend_logs (api_key, start_time);
CREATE INDEX spend_logs_request ON spend_logs (request_id);
CREATE INDEX spend_logs_user_time ON spend_logs (user_id, start_time);
CREATE INDEX spend_logs_team_time ON spend_logs (team_id, start_time);
CREATE INDEX spend_logs_model_time ON spend_logs (model_group, start_time);
CREATE INDEX spend_logs_time_id ON spend_logs (start_time, id);
CREATE INDEX spend_logs_failures ON spend_logs (start_time, id) WHERE status = 'failure';

DO $$
DECLARE
    newest BIGINT;
    bound  BIGINT;
BEGIN
    IF EXISTS (SELECT 1 FROM spend_logs_legacy) THEN
        SELECT GREATEST(MAX(start_time), CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT))
            INTO newest FROM spend_logs_legacy;
        bound := (newest / 86400000 + 1) * 86400000;
        ALTER TABLE spend_logs_legacy DROP CONSTRAINT spend_logs_legacy_pkey;
        EXECUTE format(
            'ALTER TABLE spend_logs ATTACH PARTITION spend_logs_legacy '
            'FOR VALUES FROM (MINVALUE) TO (%s)', bound);
    ELSE
        DROP TABLE spend_logs_legacy;
    END IF;
END $$;

-- 3. Daily rollups by user, end user and request tag, beside `daily_spend` (key × team × model
--    group): what `/spend/groups` and `/spend/tags` (and the console's spend page) read
--    instead of summing the log. One table with a `kind` column: the three have the same
--    columns, the writer upserts them in one statement per batch, and a new dimension needs
--    no new table. `first_seen` / `last_seen`: the day's first and last start time (Unix ms),
--    what `/tag/list` shows for a tag no row describes.
CREATE TABLE daily_spend_by (
    kind         TEXT NOT NULL,
    day          TEXT NOT NULL,
    name         TEXT NOT NULL,
    requests     BIGINT NOT NULL,
    spend        DOUBLE PRECISION NOT NULL,
    total_tokens BIGINT NOT NULL,
    first_seen   BIGINT NOT NULL,
    last_seen    BIGINT NOT NULL,
    PRIMARY KEY (kind, day, name)
);

INSERT INTO daily_spend_by
SELECT 'user', to_char(to_timestamp(start_time / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
       COALESCE(user_id, ''), COUNT(*), SUM(spend),
       CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT), MIN(start_time), MAX(start_time)
FROM spend_logs GROUP BY 2, 3;

INSERT INTO daily_spend_by
SELECT 'end_user', to_char(to_timestamp(start_time / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
       COALESCE(end_user, ''), COUNT(*), SUM(spend),
       CAST(SUM(prompt_tokens + completion_tokens) AS BIGINT), MIN(start_time), MAX(start_time)
FROM spend_logs GROUP BY 2, 3;

-- A tag listed twice in one request counts it once (as `Store::spend_by_tag` always did).
INSERT INTO daily_spend_by
SELECT 'tag', to_char(to_timestamp(start_time / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
       tag, COUNT(*), SUM(spend), CAST(SUM(tokens) AS BIGINT), MIN(start_time), MAX(start_time)
FROM (SELECT DISTINCT s.id, s.start_time, j.value AS tag, s.spend,
             s.prompt_tokens + s.completion_tokens AS tokens
      FROM spend_logs s CROSS JOIN jsonb_array_elements_text(CAST(s.request_tags AS jsonb)) AS j(value)
      WHERE s.request_tags <> '[]') t
GROUP BY 2, 3;
