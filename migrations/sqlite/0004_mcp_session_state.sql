-- The logging level an MCP client set (logging/setLevel), so a session resumed
-- on another replica keeps forwarding console output at that level.
ALTER TABLE mcp_sessions ADD COLUMN log_level TEXT;
CREATE INDEX mcp_sessions_updated ON mcp_sessions(updated_at);
