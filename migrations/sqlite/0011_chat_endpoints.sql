-- OpenAI-compatible chat endpoints an admin configured for the playground.
-- The API key is sealed (`secrets::SecretBox`, purpose `chat_endpoint:{id}`)
-- and never leaves the server.
CREATE TABLE chat_endpoints (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    base_url      TEXT NOT NULL,              -- e.g. https://api.deepseek.com/v1 (no trailing slash)
    model         TEXT NOT NULL,
    api_key       BLOB,                       -- sealed; NULL: no key sent
    timeout_secs  BIGINT NOT NULL,            -- longest wait for the endpoint's next bytes
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
