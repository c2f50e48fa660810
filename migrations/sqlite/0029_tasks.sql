-- Long calls as tasks (MCP's tasks extension): whether a tool may run as
-- one, and the tasks themselves, kept here so any replica answers for them.
ALTER TABLE tools ADD COLUMN task_support TEXT NOT NULL DEFAULT 'forbidden'
    CHECK (task_support IN ('forbidden', 'optional', 'required'));

CREATE TABLE tasks (
    id              TEXT PRIMARY KEY,
    user_id         INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- The endpoint's listing the call was made on, and the tool's name there.
    listing_id      INTEGER REFERENCES tools(id) ON DELETE CASCADE,
    tool_name       TEXT NOT NULL,
    status          TEXT NOT NULL
                    CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message  TEXT,
    -- input_required: the questions by key (MCP inputRequests) and the answers given so far.
    input_requests  TEXT,
    answers         TEXT NOT NULL DEFAULT '{}',
    -- completed: the CallToolResult; failed: the JSON-RPC error.
    result          TEXT,
    error           TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    -- The replica running it says it still is; a silent one has stopped.
    heartbeat_at    INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL
);
CREATE INDEX tasks_expires ON tasks(expires_at);
CREATE INDEX tasks_user ON tasks(user_id, created_at);
