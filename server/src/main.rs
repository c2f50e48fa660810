//! `toolshed`: the one binary. `serve` (default) runs the web app, the MCP
//! endpoints and the REST API; `migrate` and `admin …` are for operators and
//! scripts; `push` publishes a tool file to a server (CI).

mod admin;
mod config;
mod mcp;
mod oauth;
mod playground;
mod push;
mod registry;
mod rest;
mod sso;
mod web;

use anyhow::Context;
use clap::{Parser, Subcommand};
use toolshed_domain::{Db, Settings, Toolshed};

use crate::config::Config;

// glibc's malloc was a tenth of the server's CPU under MCP load: tokio's tasks are
// allocated on one thread and freed on another (see BENCHMARKS.md, per-call cost).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "toolshed", version, about = "Toolshed: write one JavaScript function, every agent in the company gains a tool.")]
struct Cli {
    #[command(flatten)]
    config: Config,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the web app and the MCP endpoints (the default).
    Serve(web::ServeArgs),
    /// Create or upgrade the database schema, then exit.
    Migrate,
    /// Operator commands.
    #[command(subcommand)]
    Admin(admin::AdminCommand),
    /// Save, test and publish a tool from a file on a Toolshed server (needs a
    /// token with the publish scope; no database).
    Push(push::PushArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,sqlx=warn,tower_sessions=warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let command = match cli.command {
        Some(Command::Push(args)) => return push::run(args).await,
        other => other.unwrap_or(Command::Serve(web::ServeArgs::default())),
    };
    let config = cli.config;
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
    let settings = Settings { secrets, internal_hosts, trusted_proxies, registration, sentence_model, sandbox, ..sign_in };
    let toolshed = Toolshed::new(db, settings);
    match command {
        Command::Serve(args) => web::serve(config, args, toolshed).await,
        Command::Migrate => {
            println!("database is up to date");
            Ok(())
        }
        Command::Admin(cmd) => admin::run(cmd, &toolshed).await,
        Command::Push(_) => unreachable!("push runs before the database is opened"),
    }
}
