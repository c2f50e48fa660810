-- Calls that failed (the code threw, timed out, ran out of memory...), kept
-- for the tool's editors to replay: the arguments, console and `$fetch`
-- exchanges, secrets and arguments marked sensitive redacted. Kept 14 days
-- and at most a hundred a tool (the usage writer prunes; reads filter too).
CREATE TABLE failed_calls (
    id            INTEGER PRIMARY KEY,
    tool_id       BIGINT NOT NULL REFERENCES tools(id),
    version       BIGINT NOT NULL,
    user_id       BIGINT NOT NULL REFERENCES users(id),
    at_ms         BIGINT NOT NULL,
    transport     TEXT NOT NULL,
    error         TEXT NOT NULL,
    args_json     TEXT NOT NULL,
    console_json  TEXT NOT NULL,
    fetches_json  TEXT NOT NULL,
    duration_ms   BIGINT NOT NULL
);
CREATE INDEX failed_calls_tool ON failed_calls(tool_id, at_ms);
CREATE INDEX failed_calls_at ON failed_calls(at_ms);

-- A test case made from a failed call answers `$fetch` from that call's
-- recorded exchanges, so it runs without the network, the same every time.
ALTER TABLE test_cases ADD COLUMN fetches_json TEXT;
