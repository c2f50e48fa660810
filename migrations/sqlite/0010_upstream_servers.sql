-- External MCP servers: their tools can be bundle members, exposed as `server__tool`.
--
-- The tool list is imported into the database (not held in memory), so every
-- replica serves the same list. The credential is sealed with the deployment's
-- secrets key (bound to `mcp_server:{id}`) and never leaves the server.
CREATE TABLE mcp_servers (
    id                 INTEGER PRIMARY KEY,
    department_id      BIGINT NOT NULL REFERENCES departments(id),
    name               TEXT NOT NULL UNIQUE,             -- the `server` in `server__tool`
    url                TEXT NOT NULL,
    transport          TEXT NOT NULL,                    -- streamable_http | sse
    credential_kind    TEXT NOT NULL DEFAULT 'none',     -- none | header | query
    credential_name    TEXT NOT NULL DEFAULT '',         -- header or query parameter name
    credential_sealed  BLOB,                             -- its value, sealed
    timeout_ms         BIGINT NOT NULL DEFAULT 30000,
    refreshed_at       BIGINT,                           -- last successful import
    last_error         TEXT,                             -- last failed import, cleared by a good one
    created_by         BIGINT NOT NULL REFERENCES users(id),
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);

CREATE TABLE mcp_server_tools (
    server_id      BIGINT NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
    position       BIGINT NOT NULL,
    name           TEXT NOT NULL,
    title          TEXT NOT NULL DEFAULT '',
    description    TEXT NOT NULL DEFAULT '',
    input_schema   TEXT NOT NULL,                        -- JSON
    output_schema  TEXT,                                 -- JSON
    annotations    TEXT,                                 -- JSON, as the server sent it
    PRIMARY KEY (server_id, name)
);

-- External members of a bundle version, served after its tools. Not a foreign
-- key: a removed server's members stay in the (immutable) version, unserved.
CREATE TABLE bundle_external_items (
    bundle_id  BIGINT NOT NULL REFERENCES tools(id),
    version    BIGINT NOT NULL,
    position   BIGINT NOT NULL,
    server_id  BIGINT NOT NULL,
    tool_name  TEXT NOT NULL,
    PRIMARY KEY (bundle_id, version, position)
);

-- Admins may let a department's authors register servers for it.
ALTER TABLE departments ADD COLUMN authors_register_servers BIGINT NOT NULL DEFAULT 0;

-- A call to an external tool is recorded against the bundle it came through.
ALTER TABLE usage_records ADD COLUMN upstream_server_id BIGINT;
ALTER TABLE usage_records ADD COLUMN upstream_tool TEXT;
