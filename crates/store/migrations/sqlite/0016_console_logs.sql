-- The console's request logs (issue 41). What the client got when a request failed: the HTTP
-- status, the error's type and its message (capped; never a key's plaintext), beside the
-- existing `error` ("429 rpm_limit_exceeded"). Older rows read as unknown.
ALTER TABLE spend_logs ADD COLUMN http_status INTEGER;
ALTER TABLE spend_logs ADD COLUMN error_type TEXT;
ALTER TABLE spend_logs ADD COLUMN error_message TEXT;
-- Pages of the log are read by keyset, newest first: `(start_time, id) < (cursor)`, ordered by
-- both. This index serves that order whole (it replaces the one on start_time alone, which it
-- covers); the filters' own indexes (key, team, model group, user) narrow first.
CREATE INDEX spend_logs_time_id ON spend_logs (start_time, id);
DROP INDEX spend_logs_time;
-- Failures are what an operator looks for, and few: a small index of their own, so that
-- "status = failure" reads only failures however rare they are.
CREATE INDEX spend_logs_failures ON spend_logs (start_time, id) WHERE status = 'failure';
