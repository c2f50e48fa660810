-- When a version was first served (published, or approved after review).
-- People who cannot edit a tool may run by number, or pin in a bundle, only
-- versions that have been: an unreviewed version reaches nobody else.
ALTER TABLE tool_versions ADD COLUMN published_at BIGINT;
UPDATE tool_versions SET published_at = created_at
WHERE EXISTS (SELECT 1 FROM tools t WHERE t.id = tool_versions.tool_id AND t.published_version = tool_versions.version);
