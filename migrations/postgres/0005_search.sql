-- The marketplace: full-text search over listings, and featured listings.
--
-- Search text is split on every non-alphanumeric character and lowercased, with
-- no stemming and no stop words, so SQLite (FTS5, unicode61) and PostgreSQL
-- ('simple' configuration over the same text with ASCII punctuation blanked)
-- find the same listings for the same words. Weights: A name and title,
-- B tags, C description (for ts_rank).
ALTER TABLE tools ADD COLUMN featured BIGINT NOT NULL DEFAULT 0;  -- set by admins
CREATE INDEX tools_forked_from ON tools(forked_from_tool_id);

-- Every ASCII punctuation character, and as many spaces to replace them with.
ALTER TABLE tools ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple'::regconfig, translate(name || ' ' || title,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                ')), 'A') ||
    setweight(to_tsvector('simple'::regconfig, translate(tags,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                ')), 'B') ||
    setweight(to_tsvector('simple'::regconfig, translate(description,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                ')), 'C')
) STORED;
CREATE INDEX tools_search ON tools USING GIN (search_vector);
