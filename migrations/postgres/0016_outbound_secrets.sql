-- Outbound-only secrets: a tool_env row with hosts here is never handed to the
-- tool's code; `$fetch` fills its value into header values or the query of
-- requests to these hosts only (newline-separated, the allow-list's syntax).
-- NULL: a plain variable, or a secret the code may read (`secret`).
ALTER TABLE tool_env ADD COLUMN outbound_hosts TEXT;

-- Hosts without `secret` would be shown to editors; an empty list reaches nothing.
ALTER TABLE tool_env ADD CONSTRAINT tool_env_outbound_is_secret
    CHECK (outbound_hosts IS NULL OR (secret = 1 AND outbound_hosts <> ''));
