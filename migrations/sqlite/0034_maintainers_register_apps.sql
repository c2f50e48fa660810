-- Where an admin allows, a department's maintainers register (and edit and
-- remove) the upstream OAuth apps of their own department.
ALTER TABLE departments ADD COLUMN maintainers_register_apps BIGINT NOT NULL DEFAULT 0;
