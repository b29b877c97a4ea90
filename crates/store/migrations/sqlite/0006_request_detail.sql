-- What the console's request detail shows beyond spend: the model group the client asked for
-- (a fallback serves another), sluice's own time, each upstream attempt (JSON: deployment,
-- hedge, timing, how it ended) and the retry, fallback and hedge counts. Prompt and answer
-- only with general_settings.store_prompts_in_spend_logs. Older rows read as unknown / none.
ALTER TABLE spend_logs ADD COLUMN requested_model TEXT;
ALTER TABLE spend_logs ADD COLUMN overhead_us INTEGER;
ALTER TABLE spend_logs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_logs ADD COLUMN fallbacks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_logs ADD COLUMN hedges INTEGER NOT NULL DEFAULT 0;
ALTER TABLE spend_logs ADD COLUMN attempts TEXT;
ALTER TABLE spend_logs ADD COLUMN messages TEXT;
ALTER TABLE spend_logs ADD COLUMN response TEXT;
-- The console's log filters by team and by model group, newest first.
CREATE INDEX spend_logs_team_time ON spend_logs (team_id, start_time);
CREATE INDEX spend_logs_model_time ON spend_logs (model_group, start_time);
