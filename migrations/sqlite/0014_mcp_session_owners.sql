-- Who opened each Streamable HTTP session, on which listing. A session answers
-- only that user on that listing: anyone else gets 404, as for no session.
CREATE TABLE mcp_session_owners (
    session_id  TEXT PRIMARY KEY,
    user_id     BIGINT NOT NULL,
    listing_id  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX mcp_session_owners_created ON mcp_session_owners(created_at);
