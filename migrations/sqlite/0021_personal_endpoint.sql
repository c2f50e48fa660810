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

-- An OAuth grant may be for the personal endpoint (listing_id NULL) rather than
-- one listing's. SQLite cannot drop a NOT NULL, and the codes and tokens refer to
-- the grants: the three tables are rebuilt (SQLite's documented 12-step way, with
-- the new children referring to the new grants table, renamed in place last).
CREATE TABLE oauth_grants_new (
    id             INTEGER PRIMARY KEY,
    user_id        BIGINT NOT NULL REFERENCES users(id),
    client_id      TEXT NOT NULL REFERENCES oauth_clients(id),
    listing_id     BIGINT REFERENCES tools(id),
    resource       TEXT NOT NULL,
    scope          TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    last_used_at   BIGINT,
    revoked_at     BIGINT
);
CREATE TABLE oauth_codes_new (
    code_hash       TEXT PRIMARY KEY,
    grant_id        BIGINT NOT NULL REFERENCES oauth_grants_new(id),
    redirect_uri    TEXT NOT NULL,
    code_challenge  TEXT NOT NULL,
    expires_at      BIGINT NOT NULL,
    used_at         BIGINT
);
CREATE TABLE oauth_tokens_new (
    token_hash  TEXT PRIMARY KEY,
    grant_id    BIGINT NOT NULL REFERENCES oauth_grants_new(id),
    kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
INSERT INTO oauth_grants_new SELECT id, user_id, client_id, listing_id, resource, scope, created_at, last_used_at, revoked_at FROM oauth_grants;
INSERT INTO oauth_codes_new SELECT code_hash, grant_id, redirect_uri, code_challenge, expires_at, used_at FROM oauth_codes;
INSERT INTO oauth_tokens_new SELECT token_hash, grant_id, kind, expires_at, used_at FROM oauth_tokens;
DROP TABLE oauth_codes;
DROP TABLE oauth_tokens;
DROP TABLE oauth_grants;
ALTER TABLE oauth_grants_new RENAME TO oauth_grants;
ALTER TABLE oauth_codes_new RENAME TO oauth_codes;
ALTER TABLE oauth_tokens_new RENAME TO oauth_tokens;
CREATE INDEX oauth_grants_user ON oauth_grants(user_id);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
