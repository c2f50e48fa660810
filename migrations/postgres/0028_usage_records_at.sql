-- no-transaction
-- The admins' health ranking reads every listing's last 24 hours. Built
-- without locking out the usage writer's inserts on a large table.
CREATE INDEX CONCURRENTLY IF NOT EXISTS usage_records_at ON usage_records(at_ms);
