-- Personal API tokens: only a SHA-256 of the token is kept; it is shown once.
CREATE TABLE api_tokens (
    id            INTEGER PRIMARY KEY,
    user_id       BIGINT NOT NULL REFERENCES users(id),
    name          TEXT NOT NULL,
    prefix        TEXT NOT NULL,              -- first characters, to recognise it in lists
    token_hash    TEXT NOT NULL UNIQUE,       -- hex SHA-256 of the whole token
    scope         TEXT NOT NULL DEFAULT '',   -- '' = every listing the user can see, else slugs, one per line
    expires_at    BIGINT,
    last_used_at  BIGINT,
    revoked_at    BIGINT,
    created_at    BIGINT NOT NULL
);
CREATE INDEX api_tokens_user ON api_tokens(user_id);

-- One row per tool call, written in batches off the request path.
CREATE TABLE usage_records (
    id           INTEGER PRIMARY KEY,
    at_ms        BIGINT NOT NULL,
    tool_id      BIGINT NOT NULL REFERENCES tools(id),
    version      BIGINT,
    user_id      BIGINT NOT NULL REFERENCES users(id),
    token_id     BIGINT REFERENCES api_tokens(id),
    transport    TEXT NOT NULL,               -- mcp-http | mcp-sse | ui | api
    duration_us  BIGINT NOT NULL,
    outcome      TEXT NOT NULL                -- ok | tool_error | timeout | oom | invalid_arguments | busy
);
CREATE INDEX usage_records_tool ON usage_records(tool_id, at_ms);

-- MCP sessions (their initialize parameters), so any replica can resume one.
CREATE TABLE mcp_sessions (
    id          TEXT PRIMARY KEY,
    state_json  TEXT NOT NULL,
    updated_at  BIGINT NOT NULL
);
