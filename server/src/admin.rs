//! `toolshed admin …`: scriptable operator commands.

use std::io::Read;

use clap::Subcommand;
use toolshed_domain::accounts::{Registration, DEFAULT_DEPARTMENT};
use toolshed_domain::Toolshed;

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a user; the password is read from standard input.
    CreateUser {
        #[arg(long)]
        username: String,
        /// Department slug; created when missing.
        #[arg(long, default_value = DEFAULT_DEPARTMENT)]
        department: String,
        /// Shown next to their work (default: the username).
        #[arg(long)]
        display_name: Option<String>,
        /// Make the user an administrator.
        #[arg(long)]
        admin: bool,
    },
}

pub async fn run(cmd: AdminCommand, toolshed: &Toolshed) -> anyhow::Result<()> {
    match cmd {
        AdminCommand::CreateUser { username, department, display_name, admin } => {
            let mut password = String::new();
            std::io::stdin().read_to_string(&mut password)?;
            // One trailing newline comes from `echo`/heredocs; it is not part of the password.
            let password = password.strip_suffix('\n').unwrap_or(&password);
            let password = password.strip_suffix('\r').unwrap_or(password);
            let display_name = display_name.unwrap_or_else(|| username.clone());
            let mut reg = Registration::parse(&username, &display_name, &department, password)?;
            reg.is_admin = admin;
            let user = toolshed.register(reg, None).await?;
            println!(
                "created {}user {} in department {}",
                if user.is_admin { "admin " } else { "" },
                user.username,
                user.department.name
            );
            Ok(())
        }
    }
}
