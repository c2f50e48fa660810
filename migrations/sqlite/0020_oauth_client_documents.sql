-- Clients named by the URL of their metadata document: when the copy kept
-- here must be fetched again (NULL for clients that registered themselves).
ALTER TABLE oauth_clients ADD COLUMN document_expires_at BIGINT;
