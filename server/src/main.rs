//! `toolshed`: the one binary. `serve` (default) runs the web app, the MCP
//! endpoints and the REST API; `migrate` and `admin …` are for operators and
//! scripts; `push` publishes a tool file to a server (CI).

use clap::{Parser, Subcommand};
use toolshed::config::Config;
use toolshed::{admin, push, web};

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
    let toolshed = toolshed::open(&config).await?;
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
