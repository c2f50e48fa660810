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
        /// Their role in the department: member, author or maintainer.
        #[arg(long, default_value = "author")]
        role: String,
    },
    /// Create an API token for a user; the token is printed on the last line, once.
    CreateToken {
        #[arg(long)]
        username: String,
        /// What the token is for, e.g. "Claude Desktop on my laptop".
        #[arg(long)]
        name: String,
        #[arg(long)]
        expires_in_days: Option<u32>,
        /// Let the token publish tools from CI (`toolshed push`, `/api/v1`).
        #[arg(long)]
        publish: bool,
    },
}

pub async fn run(cmd: AdminCommand, toolshed: &Toolshed) -> anyhow::Result<()> {
    match cmd {
        AdminCommand::CreateUser { username, department, display_name, admin, role } => {
            let mut password = String::new();
            std::io::stdin().read_to_string(&mut password)?;
            // One trailing newline comes from `echo`/heredocs; it is not part of the password.
            let password = password.strip_suffix('\n').unwrap_or(&password);
            let password = password.strip_suffix('\r').unwrap_or(password);
            let display_name = display_name.unwrap_or_else(|| username.clone());
            let mut reg = Registration::parse(&username, &display_name, &department, password)?;
            reg.is_admin = admin;
            reg.role = toolshed_domain::names::Role::parse(&role)?;
            let user = toolshed.accounts().register(reg, None).await?;
            let what = if user.is_admin { "admin" } else { user.role.as_str() };
            println!("created {what} user {} in department {}", user.username, user.department.name);
            Ok(())
        }
        AdminCommand::CreateToken { username, name, expires_in_days, publish } => {
            let user = toolshed.accounts().user_by_username(&username).await?.ok_or_else(|| anyhow::anyhow!("no user named {username}"))?;
            let (info, token) = toolshed.tokens().create_token(&user, &name, expires_in_days, Vec::new(), publish).await?;
            let grant = if publish { ", may publish" } else { "" };
            println!("created token {} ({}{grant}) for {}", info.name, info.prefix, user.username);
            println!("{token}");
            Ok(())
        }
    }
}
