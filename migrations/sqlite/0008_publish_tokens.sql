-- Tokens that may publish from CI (`/api/v1`): a grant on top of the listing
-- scope, off unless asked for when the token is created.
ALTER TABLE api_tokens ADD COLUMN can_publish BIGINT NOT NULL DEFAULT 0;
