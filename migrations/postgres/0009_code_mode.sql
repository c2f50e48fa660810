-- Code mode of a bundle: `off`, `instead` (run_code replaces the tools) or
-- `beside` (run_code next to them). Tools keep `off`.
ALTER TABLE tools ADD COLUMN code_mode TEXT NOT NULL DEFAULT 'off';
