-- Each published tool's meaning as a sentence model sees it (tool search by
-- meaning, `semantic`): the text that was encoded, so a changed title or
-- description is noticed, and the vector as little-endian f32. Written by
-- whichever replica gets there first; every replica keeps them in memory.
CREATE TABLE listing_vectors (
    tool_id     BIGINT PRIMARY KEY REFERENCES tools(id),
    model       TEXT NOT NULL,
    source      TEXT NOT NULL,
    vector      BYTEA NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX listing_vectors_updated ON listing_vectors(updated_at);
