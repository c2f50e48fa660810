//! The Toolshed server as a library: the router and how it is served (`web`),
//! configuration, the CLI's commands. The `toolshed` binary (`main.rs`) parses
//! the command line and calls in here; the integration tests build the same
//! server in their own process.

pub mod admin;
pub mod config;
mod connect;
pub mod mcp;
mod metrics;
mod oauth;
mod playground;
pub mod push;
mod registry;
mod rest;
mod sso;
pub mod telemetry;
pub mod web;

use anyhow::Context;
use toolshed_domain::{Db, Settings, Toolshed};

use crate::config::Config;

/// The domain over the configured database, migrated, with every setting the
/// configuration makes: what `serve`, `migrate` and `admin …` start from.
pub async fn open(config: &Config) -> anyhow::Result<Toolshed> {
    let db = Db::connect(&config.database_url()).await?;
    db.migrate().await?;
    let secrets = toolshed_domain::secrets::SecretBox::new(&config.secrets_key()?);
    let internal_hosts = toolshed_domain::outbound::InternalHosts::parse(&config.internal_hosts);
    let trusted_proxies = toolshed_domain::signin::TrustedProxies::parse(&config.trusted_proxies)
        .map_err(|e| anyhow::anyhow!("TOOLSHED_TRUSTED_PROXIES: {e}"))?;
    let registration = toolshed_domain::membership::RegistrationPolicy::parse(&config.registration)
        .map_err(|e| anyhow::anyhow!("TOOLSHED_REGISTRATION: {e}"))?;
    let sign_in = config.sign_in()?;
    let sentence_model = match &config.embedding_model {
        Some(dir) => Some(toolshed_domain::semantic::SentenceModel::load(dir).context("TOOLSHED_EMBEDDING_MODEL")?),
        None => None,
    };
    let sandbox = config.sandbox()?;
    let metrics_token = config.metrics_token()?;
    let public_url = config.base_url().to_string();
    let settings =
        Settings { secrets, internal_hosts, trusted_proxies, registration, sentence_model, sandbox, metrics_token, public_url, ..sign_in };
    Ok(Toolshed::new(db, settings))
}
