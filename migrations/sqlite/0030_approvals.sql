-- Approvals: a department may require that calls of its tools that write
-- (their derived permissions, not the author's say) wait for a person who
-- may decide: the department's maintainers, its named approvers, an admin.
ALTER TABLE departments ADD COLUMN approval_required BIGINT NOT NULL DEFAULT 0;

-- Named approvers: where a department names any, they decide (with admins)
-- instead of its maintainers.
CREATE TABLE department_approvers (
    department_id  BIGINT NOT NULL REFERENCES departments(id) ON DELETE CASCADE,
    user_id        BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    PRIMARY KEY (department_id, user_id)
);

-- One call waiting for (or given) approval, with its arguments frozen: an
-- approval admits exactly those arguments, of that version, for its
-- requester, once.
CREATE TABLE approvals (
    id             TEXT PRIMARY KEY,
    tool_id        BIGINT NOT NULL REFERENCES tools(id) ON DELETE CASCADE,
    department_id  BIGINT NOT NULL REFERENCES departments(id),
    requester_id   BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    -- The version that is to run: a tool republished since runs nothing approved before.
    version        BIGINT NOT NULL,
    -- The arguments as called (JSON) and the hash of their canonical form.
    arguments      TEXT NOT NULL,
    arguments_hash TEXT NOT NULL,
    status         TEXT NOT NULL
                   CHECK (status IN ('pending', 'approved', 'declined', 'withdrawn', 'used', 'expired')),
    decided_by     BIGINT REFERENCES users(id) ON DELETE SET NULL,
    decided_at     BIGINT,
    note           TEXT,
    -- A decline is told to the next call with those arguments once; after
    -- that a call asks afresh.
    reported_at    BIGINT,
    used_at        BIGINT,
    -- The call it admitted holds this key for its further rounds; each round
    -- takes a new one, so a key (a replayed requestState) admits one round.
    call_key       TEXT,
    -- The call it admitted ended: no further round of it is admitted.
    finished_at    BIGINT,
    created_at     BIGINT NOT NULL,
    -- Pending: a day after the request; approved: an hour after the decision.
    expires_at     BIGINT NOT NULL
);
-- At most one open request per caller, tool and arguments: retries find it.
CREATE UNIQUE INDEX approvals_one_pending ON approvals(requester_id, tool_id, version, arguments_hash) WHERE status = 'pending';
CREATE INDEX approvals_department ON approvals(department_id, status, created_at);
CREATE INDEX approvals_requester ON approvals(requester_id, created_at);
