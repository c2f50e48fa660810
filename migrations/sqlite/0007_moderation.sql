-- Moderation and administration: reports, the admin's note on a listing,
-- review before publish per department.

-- A user's report of a listing. Open until an admin acts on the listing
-- (hide, disable, restore, delete, dismiss), which resolves every open report.
CREATE TABLE reports (
    id           INTEGER PRIMARY KEY,
    tool_id      BIGINT NOT NULL REFERENCES tools(id),
    reporter_id  BIGINT NOT NULL REFERENCES users(id),
    reason       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    resolved_at  BIGINT,                   -- NULL while open
    resolved_by  BIGINT REFERENCES users(id),
    resolution   TEXT                      -- the action that resolved it, e.g. tool.hidden
);
CREATE INDEX reports_open ON reports(resolved_at, tool_id);

-- status gains 'deleted' (a soft delete: seen by admins only, the name stays taken).
ALTER TABLE tools ADD COLUMN moderation_note TEXT;   -- the admin's note on the last status change, shown to the author
ALTER TABLE tools ADD COLUMN pending_version BIGINT; -- published by the author, waiting for an admin's review
ALTER TABLE tools ADD COLUMN review_note TEXT;       -- why the last version waiting for review was rejected

ALTER TABLE departments ADD COLUMN review_required BIGINT NOT NULL DEFAULT 0;  -- publishes wait for an admin
