-- Roles within one's department: member (browse, run, connect), author (create
-- and publish), maintainer (invitations, approvals). Accounts made before roles
-- existed could publish, so they stay authors.
ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'author' CHECK (role IN ('member', 'author', 'maintainer'));

-- One-use invitations to a department with a role. The link carries a random
-- token; only its SHA-256 is stored. Claimed (used_at) in the registration's
-- own transaction, so two people cannot join with one link.
CREATE TABLE invites (
    id             INTEGER PRIMARY KEY,
    token_hash     TEXT NOT NULL UNIQUE,
    department_id  BIGINT NOT NULL REFERENCES departments(id),
    role           TEXT NOT NULL CHECK (role IN ('member', 'author', 'maintainer')),
    created_by     BIGINT NOT NULL REFERENCES users(id),
    created_at     BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    used_by        BIGINT REFERENCES users(id),
    used_at        BIGINT
);
CREATE INDEX invites_department ON invites(department_id, expires_at);

-- Someone who registered without an invitation asks to join a department; the
-- account stays inactive (cannot sign in) until a maintainer or admin decides.
CREATE TABLE join_requests (
    user_id        BIGINT PRIMARY KEY REFERENCES users(id),
    department_id  BIGINT NOT NULL REFERENCES departments(id),
    created_at     BIGINT NOT NULL
);
CREATE INDEX join_requests_department ON join_requests(department_id);
