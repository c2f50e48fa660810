-- Departments own tools and bundles; every user belongs to exactly one.
CREATE TABLE departments (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,      -- URL slug, lowercase
    title       TEXT NOT NULL,
    created_at  BIGINT NOT NULL            -- unix milliseconds, like every *_at column
);

CREATE TABLE users (
    id             INTEGER PRIMARY KEY,
    username       TEXT NOT NULL UNIQUE,   -- lowercase
    display_name   TEXT NOT NULL,
    department_id  BIGINT NOT NULL REFERENCES departments(id),
    password_hash  TEXT NOT NULL,          -- argon2id PHC string
    is_admin       BIGINT NOT NULL DEFAULT 0,    -- flags are 0/1: portable across both backends
    is_active      BIGINT NOT NULL DEFAULT 1,
    -- Bumped on password change and deactivation: sessions carrying an older
    -- value are dead, on every replica, without scanning the sessions table.
    session_epoch  BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
CREATE INDEX users_department ON users(department_id);

-- tower-sessions records, shared by all replicas.
CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    data       TEXT NOT NULL,              -- JSON of the session record
    expiry_ms  BIGINT NOT NULL
);
CREATE INDEX sessions_expiry ON sessions(expiry_ms);

-- Failed sign-ins, counted per account and per client address.
CREATE TABLE login_failures (
    id         INTEGER PRIMARY KEY,
    username   TEXT NOT NULL,
    client     TEXT NOT NULL,
    at_ms      BIGINT NOT NULL
);
CREATE INDEX login_failures_username ON login_failures(username, at_ms);
CREATE INDEX login_failures_client ON login_failures(client, at_ms);

-- Every state change, with who, what and before/after (JSON).
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY,
    at_ms       BIGINT NOT NULL,
    actor_id    BIGINT REFERENCES users(id),
    action      TEXT NOT NULL,             -- e.g. user.registered, tool.published
    target      TEXT NOT NULL,             -- e.g. user:alice, tool:demo/echo
    before_json TEXT,
    after_json  TEXT
);
CREATE INDEX audit_log_at ON audit_log(at_ms);
CREATE INDEX audit_log_action ON audit_log(action, at_ms);
