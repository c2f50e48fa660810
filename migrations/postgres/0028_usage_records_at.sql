-- The admins' health ranking reads every listing's last 24 hours.
CREATE INDEX usage_records_at ON usage_records(at_ms);
