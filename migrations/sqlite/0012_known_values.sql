-- The database refuses values the code does not know, so a typo or a newer
-- replica's status can never be read as "active" (the code fails closed too).
-- SQLite cannot add a CHECK to an existing table: triggers do the same.
CREATE TRIGGER tools_known_values_insert BEFORE INSERT ON tools
WHEN NEW.status NOT IN ('active', 'hidden', 'disabled', 'deleted')
  OR NEW.kind NOT IN ('tool', 'bundle')
  OR NEW.visibility NOT IN ('everyone', 'department', 'private')
  OR NEW.code_mode NOT IN ('off', 'instead', 'beside')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: tools status, kind, visibility or code_mode');
END;

CREATE TRIGGER tools_known_values_update BEFORE UPDATE OF status, kind, visibility, code_mode ON tools
WHEN NEW.status NOT IN ('active', 'hidden', 'disabled', 'deleted')
  OR NEW.kind NOT IN ('tool', 'bundle')
  OR NEW.visibility NOT IN ('everyone', 'department', 'private')
  OR NEW.code_mode NOT IN ('off', 'instead', 'beside')
BEGIN
    SELECT RAISE(ABORT, 'CHECK constraint failed: tools status, kind, visibility or code_mode');
END;
