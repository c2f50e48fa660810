//! The server's integration tests, as one test binary: every binary links the
//! whole server, so one instead of eleven saves most of the link time.

#[macro_use]
mod common;

mod accounts;
mod admin;
mod approvals;
mod asking;
mod cli;
mod hardening;
mod in_process;
mod market;
mod mcp;
mod mcp_rmcp_client;
mod me;
mod membership;
mod metrics;
mod moderation;
mod oauth;
mod permissions;
mod playground;
mod prompts;
mod publish_api;
mod registry;
mod secrets;
mod server_fns;
mod shutdown;
mod site;
mod tasks;
mod tools;
mod traces;
mod upstream;
