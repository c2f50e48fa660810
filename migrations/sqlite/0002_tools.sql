-- Tools: a department's JS functions, each with immutable versions.
CREATE TABLE tools (
    id                  INTEGER PRIMARY KEY,
    department_id       BIGINT NOT NULL REFERENCES departments(id),
    name                TEXT NOT NULL,          -- MCP tool name; slug is department/name
    title               TEXT NOT NULL,
    description         TEXT NOT NULL,          -- Markdown, what a model reads
    tags                TEXT NOT NULL DEFAULT '', -- space-separated, lowercase
    visibility          TEXT NOT NULL,          -- everyone | department | private
    owner_id            BIGINT NOT NULL REFERENCES users(id),
    published_version   BIGINT,                 -- NULL until first publish
    status              TEXT NOT NULL DEFAULT 'active', -- active | hidden | disabled (moderation)
    read_only_hint      BIGINT NOT NULL DEFAULT 0,
    destructive_hint    BIGINT NOT NULL DEFAULT 0,
    fetch_allow         TEXT NOT NULL DEFAULT '', -- host patterns $fetch may reach, one per line
    timeout_ms          BIGINT NOT NULL DEFAULT 2000,
    memory_mib          BIGINT NOT NULL DEFAULT 32,
    forked_from_tool_id BIGINT REFERENCES tools(id),
    forked_from_version BIGINT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    UNIQUE (department_id, name)
);
CREATE INDEX tools_owner ON tools(owner_id);

-- Saved versions never change: code, argument rows and output schema as saved.
CREATE TABLE tool_versions (
    tool_id             BIGINT NOT NULL REFERENCES tools(id),
    version             BIGINT NOT NULL,
    code                TEXT NOT NULL,
    args_json           TEXT NOT NULL,          -- argument rows, see domain::schema
    output_schema_json  TEXT,
    changelog           TEXT NOT NULL,
    created_by          BIGINT NOT NULL REFERENCES users(id),
    created_at          BIGINT NOT NULL,
    PRIMARY KEY (tool_id, version)
);

-- Autosaved work in progress, one per tool and author.
CREATE TABLE tool_drafts (
    tool_id             BIGINT NOT NULL REFERENCES tools(id),
    user_id             BIGINT NOT NULL REFERENCES users(id),
    code                TEXT NOT NULL,
    args_json           TEXT NOT NULL,
    output_schema_json  TEXT,
    updated_at          BIGINT NOT NULL,
    PRIMARY KEY (tool_id, user_id)
);

-- Per-tool configuration ($env); secret values are never sent back out.
CREATE TABLE tool_env (
    tool_id   BIGINT NOT NULL REFERENCES tools(id),
    name      TEXT NOT NULL,
    value     TEXT NOT NULL,
    secret    BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tool_id, name)
);

-- Named mock-parameter sets with an optional expected result.
CREATE TABLE test_cases (
    id          INTEGER PRIMARY KEY,
    tool_id     BIGINT NOT NULL REFERENCES tools(id),
    name        TEXT NOT NULL,
    args_json   TEXT NOT NULL,
    expected    TEXT,                           -- expected result text, if any
    created_at  BIGINT NOT NULL,
    UNIQUE (tool_id, name)
);

-- Admin-set maxima and other instance-wide settings.
CREATE TABLE settings (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
);
