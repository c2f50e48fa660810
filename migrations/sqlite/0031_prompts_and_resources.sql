-- What a tool is served as on MCP endpoints: a tool (the default), a prompt
-- (its code returns the messages), or a resource at a URI or URI template
-- (its code returns the contents; a template's variables are its arguments).
ALTER TABLE tools ADD COLUMN serves TEXT NOT NULL DEFAULT 'tool'
    CHECK (serves IN ('tool', 'prompt', 'resource'));
ALTER TABLE tools ADD COLUMN resource_uri TEXT;
ALTER TABLE tools ADD COLUMN resource_mime TEXT;
