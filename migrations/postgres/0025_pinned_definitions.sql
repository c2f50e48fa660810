-- External servers' tool definitions, pinned (trust on first use): a tool is
-- served only while its definition is the one approved. A definition first
-- seen is approved unless the scan finds hidden instructions in it; a changed
-- one waits for someone who manages the server (an admin, if the scan found
-- something) instead of reaching every model at once. A tool the server stops
-- listing keeps its row, unlisted, so it cannot come back changed as new.
ALTER TABLE mcp_server_tools ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';  -- SHA-256 of this definition
ALTER TABLE mcp_server_tools ADD COLUMN approved TEXT;                         -- the approved definition's; NULL: never approved
ALTER TABLE mcp_server_tools ADD COLUMN findings_json TEXT;                    -- what the scan found in this definition
ALTER TABLE mcp_server_tools ADD COLUMN held_since BIGINT;                     -- when this definition was first held
ALTER TABLE mcp_server_tools ADD COLUMN listed BIGINT NOT NULL DEFAULT 1;      -- 0: no longer listed, its approval kept
-- Imported before pinning: served as they were; the next refresh scans and pins them.
UPDATE mcp_server_tools SET fingerprint = 'before-pinning', approved = 'before-pinning';
