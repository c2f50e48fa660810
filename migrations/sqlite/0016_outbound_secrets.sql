-- Outbound-only secrets: a tool_env row with hosts here is never handed to the
-- tool's code; `$fetch` fills its value into header values or the query of
-- requests to these hosts only (newline-separated, the allow-list's syntax).
-- NULL: a plain variable, or a secret the code may read (`secret`).
ALTER TABLE tool_env ADD COLUMN outbound_hosts TEXT;

-- SQLite cannot add a CHECK to an existing table: triggers do the same.
-- Hosts without `secret` would be shown to editors; an empty list reaches nothing.
CREATE TRIGGER tool_env_outbound_insert BEFORE INSERT ON tool_env
WHEN NEW.outbound_hosts IS NOT NULL AND (NEW.secret <> 1 OR NEW.outbound_hosts = '')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: tool_env outbound_hosts needs secret = 1 and a host');
END;

CREATE TRIGGER tool_env_outbound_update BEFORE UPDATE OF secret, outbound_hosts ON tool_env
WHEN NEW.outbound_hosts IS NOT NULL AND (NEW.secret <> 1 OR NEW.outbound_hosts = '')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: tool_env outbound_hosts needs secret = 1 and a host');
END;
