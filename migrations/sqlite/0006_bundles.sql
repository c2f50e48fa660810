-- Bundles: a listing that serves a set of tools at one MCP endpoint.
--
-- A bundle is a row of `tools` with kind 'bundle', so tools and bundles share a
-- department's names, visibility, moderation status, forks and the search
-- index. A bundle version is a `tool_versions` row with empty code; its members
-- are the `bundle_items` of that version, immutable like the version itself.
ALTER TABLE tools ADD COLUMN kind TEXT NOT NULL DEFAULT 'tool';  -- tool | bundle

CREATE TABLE bundle_items (
    bundle_id       BIGINT NOT NULL REFERENCES tools(id),
    version         BIGINT NOT NULL,
    position        BIGINT NOT NULL,                 -- 0, 1, … in the author's order
    tool_id         BIGINT NOT NULL REFERENCES tools(id),
    pinned_version  BIGINT,                          -- NULL: follows the tool's published version
    exposed_name    TEXT NOT NULL,                   -- the MCP tool name inside the bundle
    PRIMARY KEY (bundle_id, version, position),
    UNIQUE (bundle_id, version, exposed_name)
);
CREATE INDEX bundle_items_tool ON bundle_items(tool_id);

-- Calls made through a bundle's endpoint count for the bundle too.
ALTER TABLE usage_records ADD COLUMN bundle_id BIGINT REFERENCES tools(id);
CREATE INDEX usage_records_bundle ON usage_records(bundle_id, at_ms);
