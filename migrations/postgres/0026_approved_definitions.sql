-- The approved definition of each external tool, kept beside its fingerprint,
-- so a changed one is reviewed as a diff against what was approved.
ALTER TABLE mcp_server_tools ADD COLUMN approved_definition TEXT;  -- JSON of the approved definition; NULL: unknown or never approved
