-- Connected accounts: a tool's `$fetch(url, {account: 'name'})` sends the
-- caller's own token for an upstream OAuth app, so the upstream's permissions
-- and audit trail are the caller's, not a service account's.

-- An upstream OAuth app an admin registered, for every department (NULL) or one.
CREATE TABLE oauth_apps (
    id                  INTEGER PRIMARY KEY,
    -- What tools call it by: `$fetch(url, {account: name})`.
    name                TEXT NOT NULL UNIQUE,
    department_id       BIGINT REFERENCES departments(id) ON DELETE CASCADE,
    authorize_url       TEXT NOT NULL,
    token_url           TEXT NOT NULL,
    -- RFC 7009; NULL when the provider has none (a disconnect then only forgets).
    revoke_url          TEXT,
    client_id           TEXT NOT NULL,
    client_secret       BLOB,                      -- sealed
    scopes              TEXT NOT NULL DEFAULT '',  -- space-separated
    -- The hosts its tokens may be sent to, one a line, in the allow-list's syntax.
    hosts               TEXT NOT NULL,
    created_by          BIGINT NOT NULL REFERENCES users(id),
    created_at          BIGINT NOT NULL
);

-- One person's account at one app: its tokens sealed, never in clear.
CREATE TABLE connected_accounts (
    user_id             BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    app_id              BIGINT NOT NULL REFERENCES oauth_apps(id) ON DELETE CASCADE,
    access_token        BLOB NOT NULL,
    refresh_token       BLOB,
    -- When the access token expires; NULL when the provider did not say.
    expires_at          BIGINT,
    -- The scopes the provider granted (they may be fewer than asked for).
    scopes              TEXT NOT NULL DEFAULT '',
    -- 'reconnect': a refresh failed; calls ask the person to connect again.
    status              TEXT NOT NULL DEFAULT 'ok' CHECK (status IN ('ok', 'reconnect')),
    -- Bumped by every refresh: replicas refresh by compare-and-set on it.
    generation          BIGINT NOT NULL DEFAULT 0,
    connected_at        BIGINT NOT NULL,
    refreshed_at        BIGINT,
    PRIMARY KEY (user_id, app_id)
);

-- The apps a tool acts as its caller at, one name a line.
ALTER TABLE tools ADD COLUMN accounts TEXT NOT NULL DEFAULT '';
