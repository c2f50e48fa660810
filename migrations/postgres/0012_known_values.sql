-- The database refuses values the code does not know, so a typo or a newer
-- replica's status can never be read as "active" (the code fails closed too).
ALTER TABLE tools ADD CONSTRAINT tools_status_known CHECK (status IN ('active', 'hidden', 'disabled', 'deleted'));
ALTER TABLE tools ADD CONSTRAINT tools_kind_known CHECK (kind IN ('tool', 'bundle'));
ALTER TABLE tools ADD CONSTRAINT tools_visibility_known CHECK (visibility IN ('everyone', 'department', 'private'));
ALTER TABLE tools ADD CONSTRAINT tools_code_mode_known CHECK (code_mode IN ('off', 'instead', 'beside'));
