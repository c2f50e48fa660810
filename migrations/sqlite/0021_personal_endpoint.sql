-- The personal endpoint (/mcp/me): people star listings to have them at hand
-- as tools of their own there, and its sessions belong to a person but to no
-- one listing (listing_id NULL).
CREATE TABLE favourites (
    user_id     BIGINT NOT NULL REFERENCES users(id),
    tool_id     BIGINT NOT NULL REFERENCES tools(id),
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, tool_id)
);

-- SQLite cannot drop a NOT NULL: the table is rebuilt (nothing refers to it).
CREATE TABLE mcp_session_owners_new (
    session_id  TEXT PRIMARY KEY,
    user_id     BIGINT NOT NULL,
    listing_id  BIGINT,
    created_at  BIGINT NOT NULL
);
INSERT INTO mcp_session_owners_new (session_id, user_id, listing_id, created_at)
    SELECT session_id, user_id, listing_id, created_at FROM mcp_session_owners;
DROP TABLE mcp_session_owners;
ALTER TABLE mcp_session_owners_new RENAME TO mcp_session_owners;
CREATE INDEX mcp_session_owners_created ON mcp_session_owners(created_at);
