-- The spend store at scale (docs/store.md). SQLite keeps its simple layout: one spend_logs
-- table, whose retention deletes old rows in batches by the (start_time, id) index. What it
-- gains is the rollups PostgreSQL gains: daily spend by user, end user and request tag beside
-- `daily_spend` (key × team × model group), what `/spend/groups` and `/spend/tags` read instead
-- of summing the log. One table with a `kind` column: the three have the same columns, the
-- writer upserts them in one statement per batch, and a new dimension needs no new table.
CREATE TABLE daily_spend_by (
    kind         TEXT NOT NULL,
    day          TEXT NOT NULL,
    name         TEXT NOT NULL,
    requests     INTEGER NOT NULL,
    spend        REAL NOT NULL,
    total_tokens INTEGER NOT NULL,
    first_seen   INTEGER NOT NULL,
    last_seen    INTEGER NOT NULL,
    PRIMARY KEY (kind, day, name)
);

INSERT INTO daily_spend_by
SELECT 'user', strftime('%Y-%m-%d', start_time / 1000, 'unixepoch'), COALESCE(user_id, ''),
       COUNT(*), SUM(spend), SUM(prompt_tokens + completion_tokens), MIN(start_time),
       MAX(start_time)
FROM spend_logs GROUP BY 2, 3;

INSERT INTO daily_spend_by
SELECT 'end_user', strftime('%Y-%m-%d', start_time / 1000, 'unixepoch'), COALESCE(end_user, ''),
       COUNT(*), SUM(spend), SUM(prompt_tokens + completion_tokens), MIN(start_time),
       MAX(start_time)
FROM spend_logs GROUP BY 2, 3;

-- A tag listed twice in one request counts it once (as `Store::spend_by_tag` always did).
INSERT INTO daily_spend_by
SELECT 'tag', strftime('%Y-%m-%d', start_time / 1000, 'unixepoch'), tag, COUNT(*), SUM(spend),
       SUM(tokens), MIN(start_time), MAX(start_time)
FROM (SELECT DISTINCT s.id AS id, s.start_time AS start_time, j.value AS tag, s.spend AS spend,
             s.prompt_tokens + s.completion_tokens AS tokens
      FROM spend_logs s CROSS JOIN json_each(s.request_tags) AS j
      WHERE s.request_tags <> '[]') t
GROUP BY 2, 3;
