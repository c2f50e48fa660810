-- Accounts made by single sign-on: the provider's (issuer, subject) pair names
-- the person for good, whatever their username or email becomes there.
CREATE TABLE user_identities (
    issuer      TEXT NOT NULL,
    subject     TEXT NOT NULL,
    user_id     BIGINT NOT NULL REFERENCES users(id),
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX user_identities_user ON user_identities(user_id);

-- Which department (and role there) a provider group puts a new account in;
-- admins keep the list on the admin page.
CREATE TABLE sso_group_mappings (
    group_name     TEXT PRIMARY KEY,
    department_id  BIGINT NOT NULL REFERENCES departments(id),
    role           TEXT NOT NULL CHECK (role IN ('member', 'author', 'maintainer')),
    created_at     BIGINT NOT NULL
);
