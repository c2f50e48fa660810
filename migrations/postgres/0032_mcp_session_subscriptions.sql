-- The resources a 2025 session subscribed to (one URI a line), so that a
-- session resumed on another replica goes on hearing their updates.
ALTER TABLE mcp_sessions ADD COLUMN subscribed TEXT;
