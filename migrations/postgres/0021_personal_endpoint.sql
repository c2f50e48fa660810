-- The personal endpoint (/mcp/me): people star listings to have them at hand
-- as tools of their own there, and its sessions belong to a person but to no
-- one listing (listing_id NULL).
CREATE TABLE favourites (
    user_id     BIGINT NOT NULL REFERENCES users(id),
    tool_id     BIGINT NOT NULL REFERENCES tools(id),
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (user_id, tool_id)
);

ALTER TABLE mcp_session_owners ALTER COLUMN listing_id DROP NOT NULL;

-- An OAuth grant may be for the personal endpoint (listing_id NULL) rather than one listing's.
ALTER TABLE oauth_grants ALTER COLUMN listing_id DROP NOT NULL;
