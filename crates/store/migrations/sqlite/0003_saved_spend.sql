-- What a response-cache hit saved: the upstream cost of the stored answer it replayed (USD).
-- Rows written before it existed saved nothing they could know of.
ALTER TABLE spend_logs ADD COLUMN saved_spend REAL NOT NULL DEFAULT 0;
