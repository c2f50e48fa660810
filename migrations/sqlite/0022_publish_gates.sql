-- Test cases that gate publishing: a case asserts on the result in one of
-- several ways, and a department (or the whole instance, the settings row
-- `policy.tests_required`) can require passing cases before any publish.
ALTER TABLE test_cases ADD COLUMN check_kind TEXT NOT NULL DEFAULT 'equals';  -- succeeds | equals | contains | json_path | schema
ALTER TABLE test_cases ADD COLUMN check_path TEXT;                            -- the JSONPath of a json_path check
UPDATE test_cases SET check_kind = 'succeeds' WHERE expected IS NULL;

ALTER TABLE departments ADD COLUMN tests_required BIGINT NOT NULL DEFAULT 0;  -- publishes need passing test cases

-- Publishes held for what the scan found in the texts models read (title,
-- description, argument descriptions): hidden characters or markup, sentences
-- addressed to the model. An admin's acceptance holds for exactly the texts
-- scanned (their fingerprint), so a later change is scanned again.
CREATE TABLE publish_findings (
    id            INTEGER PRIMARY KEY,
    tool_id       BIGINT NOT NULL REFERENCES tools(id),
    version       BIGINT NOT NULL,
    fingerprint   TEXT NOT NULL,
    findings_json TEXT NOT NULL,
    requested_by  BIGINT NOT NULL REFERENCES users(id),
    created_at    BIGINT NOT NULL,
    accepted_by   BIGINT REFERENCES users(id),
    accepted_at   BIGINT,
    note          TEXT,
    UNIQUE (tool_id, fingerprint)
);

-- In a department that requires review, an editor's new title or description
-- (what models read) waits here for an admin, like a version does; the
-- listing keeps serving the approved text.
ALTER TABLE tools ADD COLUMN pending_title TEXT;
ALTER TABLE tools ADD COLUMN pending_description TEXT;
