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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let telemetry = match toolshed::telemetry::init(cli.config.otlp_endpoint.as_ref()) {
        Ok(telemetry) => telemetry,
        Err(e) => return failed(&e),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => return failed(&e.into()),
    };
    let ran = runtime.block_on(run(cli));
    // The runtime first, so the spans of its last tasks are among those flushed.
    drop(runtime);
    drop(telemetry);
    match ran {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => failed(&e),
    }
}

fn failed(e: &anyhow::Error) -> std::process::ExitCode {
    eprintln!("error: {e:#}");
    std::process::ExitCode::FAILURE
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
