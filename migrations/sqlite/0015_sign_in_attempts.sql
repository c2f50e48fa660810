-- Sign-in attempts not known to have succeeded. An attempt is stored before
-- its password is checked, so concurrent guesses all count, and removed when
-- it succeeds. Limits are per source (an address, or a device that signed in
-- as that user before), so an attacker locks out only themselves.
DROP TABLE login_failures;
CREATE TABLE login_attempts (
    id         INTEGER PRIMARY KEY,
    username   TEXT NOT NULL,
    client     TEXT NOT NULL,             -- the client's address
    device     TEXT,                      -- hash of a known device's token, if one was presented
    at_ms      BIGINT NOT NULL
);
CREATE INDEX login_attempts_username ON login_attempts(username, at_ms);
CREATE INDEX login_attempts_client ON login_attempts(client, at_ms);

-- Browsers that signed in as a user: their device cookie holds a random
-- token, this table its SHA-256. Such a browser keeps signing in while an
-- attacker elsewhere is being refused.
CREATE TABLE login_devices (
    token_hash  TEXT PRIMARY KEY,
    user_id     BIGINT NOT NULL REFERENCES users(id),
    created_at  BIGINT NOT NULL
);
CREATE INDEX login_devices_user ON login_devices(user_id);
