-- A request's tags (LiteLLM's `request_tags`), a JSON list of strings; `[]` for none, as every
-- older row reads. `Store::spend_by_tag` (LiteLLM's `/spend/tags`) sums spend, requests and
-- tokens per tag from it.
ALTER TABLE spend_logs ADD COLUMN request_tags TEXT NOT NULL DEFAULT '[]';
