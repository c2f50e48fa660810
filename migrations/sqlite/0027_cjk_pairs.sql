-- Chinese, Japanese and Korean in full text. FTS5's unicode61 tokenizer takes a
-- run of such characters (written without spaces) as one word, so "报销" never
-- matched "差旅报销规定". The server writes each listing's pairs of such
-- characters ("差旅 旅报 报销 …", `words::cjk_pairs`) beside its text, and the
-- index reads them as a fifth column. NULL: not written yet (the server fills
-- those in when it starts).
ALTER TABLE tools ADD COLUMN cjk_pairs TEXT;

DROP TRIGGER tools_fts_insert;
DROP TRIGGER tools_fts_delete;
DROP TRIGGER tools_fts_update;
DROP TABLE tools_fts;

CREATE VIRTUAL TABLE tools_fts USING fts5(
    name, title, tags, description, cjk_pairs,
    content = 'tools', content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 0',
    prefix = '2 3'
);
INSERT INTO tools_fts (tools_fts) VALUES ('rebuild');

CREATE TRIGGER tools_fts_insert AFTER INSERT ON tools BEGIN
    INSERT INTO tools_fts (rowid, name, title, tags, description, cjk_pairs)
    VALUES (new.id, new.name, new.title, new.tags, new.description, new.cjk_pairs);
END;
CREATE TRIGGER tools_fts_delete AFTER DELETE ON tools BEGIN
    INSERT INTO tools_fts (tools_fts, rowid, name, title, tags, description, cjk_pairs)
    VALUES ('delete', old.id, old.name, old.title, old.tags, old.description, old.cjk_pairs);
END;
CREATE TRIGGER tools_fts_update AFTER UPDATE OF name, title, tags, description, cjk_pairs ON tools BEGIN
    INSERT INTO tools_fts (tools_fts, rowid, name, title, tags, description, cjk_pairs)
    VALUES ('delete', old.id, old.name, old.title, old.tags, old.description, old.cjk_pairs);
    INSERT INTO tools_fts (rowid, name, title, tags, description, cjk_pairs)
    VALUES (new.id, new.name, new.title, new.tags, new.description, new.cjk_pairs);
END;
