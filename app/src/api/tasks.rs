//! The person's own tasks (long MCP calls running in the background): listed
//! on the Account page, cancellable there.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskView {
    pub id: String,
    /// The tool's name on the endpoint it was called on.
    pub tool: String,
    /// `department/name` of the endpoint's listing, and its page.
    pub listing: Option<(String, String)>,
    /// `working`, `input_required`, `completed`, `failed` or `cancelled`.
    pub status: String,
    pub status_message: Option<String>,
    pub outcome: Option<String>,
    pub is_error: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

impl TaskView {
    /// Still running (or waiting for answers): it can be cancelled.
    pub fn running(&self) -> bool {
        matches!(self.status.as_str(), "working" | "input_required")
    }
}

#[server(endpoint = "tasks/mine")]
pub async fn my_tasks() -> Result<Vec<TaskView>, AppError> {
    let user = server::require_user().await?;
    let tasks = server::toolshed()?.tasks().mine(&user).await.map_err(|e| {
        tracing::error!(error = %e, "tasks");
        server::fail(AppError::Internal)
    })?;
    Ok(tasks
        .into_iter()
        .map(|t| TaskView {
            id: t.id,
            tool: t.tool_name,
            listing: t.listing.map(|(kind, slug)| (format!("/{}/{slug}", kind.plural()), slug)),
            status: t.status.as_str().to_owned(),
            status_message: t.status_message,
            outcome: t.outcome,
            is_error: t.is_error,
            created_at: t.created_at,
            updated_at: t.updated_at,
        })
        .collect())
}

/// A plain form's post too: cancels the person's own task (anyone else's is unknown).
#[server(endpoint = "tasks/cancel")]
pub async fn cancel_my_task(id: String) -> Result<(), AppError> {
    let user = server::require_user().await?;
    match server::toolshed()?.tasks().cancel(&user, &id).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(server::fail(AppError::NotFound)),
        Err(e) => {
            tracing::error!(error = %e, "cancel a task");
            Err(server::fail(AppError::Internal))
        }
    }
}
