-- The marketplace: full-text search over listings, and featured listings.
--
-- Search text is split on every non-alphanumeric character and lowercased, with
-- no stemming and no stop words, so SQLite (FTS5, unicode61) and PostgreSQL
-- ('simple' configuration over the same text with ASCII punctuation blanked)
-- find the same listings for the same words.
ALTER TABLE tools ADD COLUMN featured BIGINT NOT NULL DEFAULT 0;  -- set by admins
CREATE INDEX tools_forked_from ON tools(forked_from_tool_id);

-- External content: the index reads nothing but what the triggers hand it.
CREATE VIRTUAL TABLE tools_fts USING fts5(
    name, title, tags, description,
    content = 'tools', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 0',
    prefix = '2 3'                      -- words are matched as prefixes: index short ones
);
INSERT INTO tools_fts (tools_fts) VALUES ('rebuild');

CREATE TRIGGER tools_fts_insert AFTER INSERT ON tools BEGIN
    INSERT INTO tools_fts (rowid, name, title, tags, description)
    VALUES (new.id, new.name, new.title, new.tags, new.description);
END;
CREATE TRIGGER tools_fts_delete AFTER DELETE ON tools BEGIN
    INSERT INTO tools_fts (tools_fts, rowid, name, title, tags, description)
    VALUES ('delete', old.id, old.name, old.title, old.tags, old.description);
END;
CREATE TRIGGER tools_fts_update AFTER UPDATE OF name, title, tags, description ON tools BEGIN
    INSERT INTO tools_fts (tools_fts, rowid, name, title, tags, description)
    VALUES ('delete', old.id, old.name, old.title, old.tags, old.description);
    INSERT INTO tools_fts (rowid, name, title, tags, description)
    VALUES (new.id, new.name, new.title, new.tags, new.description);
END;
