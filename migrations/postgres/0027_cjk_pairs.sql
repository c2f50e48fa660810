-- Chinese, Japanese and Korean in full text. The 'simple' parser takes a run
-- of such characters (written without spaces) as one word, so "报销" never
-- matched "差旅报销规定". The server writes each listing's pairs of such
-- characters ("差旅 旅报 报销 …", `words::cjk_pairs`) beside its text, and the
-- search vector reads them with the tags' weight. NULL: not written yet (the
-- server fills those in when it starts).
ALTER TABLE tools ADD COLUMN cjk_pairs TEXT;

ALTER TABLE tools DROP COLUMN search_vector;  -- and its index
ALTER TABLE tools ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple'::regconfig, translate(name || ' ' || title,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                ')), 'A') ||
    setweight(to_tsvector('simple'::regconfig, translate(tags,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                ')), 'B') ||
    setweight(to_tsvector('simple'::regconfig, translate(description,
        '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~', '                                ')), 'C') ||
    setweight(to_tsvector('simple'::regconfig, COALESCE(cjk_pairs, '')), 'B')
) STORED;
CREATE INDEX tools_search ON tools USING GIN (search_vector);
