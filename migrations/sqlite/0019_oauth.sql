-- Toolshed as an OAuth 2.1 authorization server for MCP clients. Every secret
-- (client secret, code, access and refresh token) is stored as its SHA-256 only.

-- A client: registered by itself (RFC 7591, a random id) or named by the URL of
-- its metadata document (client ID metadata document, the URL is the id).
CREATE TABLE oauth_clients (
    id             TEXT PRIMARY KEY,
    secret_hash    TEXT,
    name           TEXT NOT NULL,
    redirect_uris  TEXT NOT NULL,
    created_at     BIGINT NOT NULL
);

-- What a person allowed a client: one listing's endpoint (the resource, RFC
-- 8707) with a scope. Revoking it (or deactivating the person) ends every
-- token issued under it at once.
CREATE TABLE oauth_grants (
    id             INTEGER PRIMARY KEY,
    user_id        BIGINT NOT NULL REFERENCES users(id),
    client_id      TEXT NOT NULL REFERENCES oauth_clients(id),
    listing_id     BIGINT NOT NULL REFERENCES tools(id),
    resource       TEXT NOT NULL,
    scope          TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    last_used_at   BIGINT,
    revoked_at     BIGINT
);
CREATE INDEX oauth_grants_user ON oauth_grants(user_id);

-- Authorization codes: one use, minutes long, bound to the PKCE challenge and
-- the redirect URI they were issued for.
CREATE TABLE oauth_codes (
    code_hash       TEXT PRIMARY KEY,
    grant_id        BIGINT NOT NULL REFERENCES oauth_grants(id),
    redirect_uri    TEXT NOT NULL,
    code_challenge  TEXT NOT NULL,
    expires_at      BIGINT NOT NULL,
    used_at         BIGINT
);

-- Access tokens (short) and refresh tokens (rotated: a refresh token is spent
-- when used, and a spent one presented again revokes its grant).
CREATE TABLE oauth_tokens (
    token_hash  TEXT PRIMARY KEY,
    grant_id    BIGINT NOT NULL REFERENCES oauth_grants(id),
    kind        TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at  BIGINT NOT NULL,
    used_at     BIGINT
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens(grant_id);
