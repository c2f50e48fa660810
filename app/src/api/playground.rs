//! The playground's server functions: what a user can chat with (listings and
//! endpoints, one call for the page), and the admins' endpoint settings. The
//! chat itself streams from `POST /playground/chat` (server/src/playground.rs).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::server;
use crate::error::AppError;

/// A listing the user may chat with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaygroundListing {
    /// `tool` or `bundle`.
    pub kind: String,
    pub department: String,
    pub name: String,
    pub title: String,
}

impl PlaygroundListing {
    /// `bundle:demo/text_kit`: the picker's value.
    pub fn key(&self) -> String {
        format!("{}:{}/{}", self.kind, self.department, self.name)
    }
}

/// An endpoint as members see it: no URL, never the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointChoice {
    pub id: i64,
    pub name: String,
    pub model: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaygroundChoices {
    pub listings: Vec<PlaygroundListing>,
    pub endpoints: Vec<EndpointChoice>,
}

/// How many listings the picker offers (the most used first).
#[cfg(feature = "ssr")]
const PICKER_SIZE: i64 = 100;

#[server(endpoint = "playground/options")]
pub async fn playground_options() -> Result<PlaygroundChoices, AppError> {
    let user = server::require_user().await?;
    let ts = server::toolshed()?;
    let query = toolshed_domain::market::BrowseQuery {
        sort: toolshed_domain::market::BrowseSort::MostUsed,
        per_page: PICKER_SIZE,
        ..Default::default()
    };
    let page = ts.market().browse(&user, &query).await.map_err(server::fail)?;
    let endpoints = ts.playground().chat_endpoints(&user).await.map_err(server::fail)?;
    Ok(PlaygroundChoices {
        listings: page
            .cards
            .into_iter()
            .map(|c| PlaygroundListing { kind: c.kind.as_str().to_owned(), department: c.department, name: c.name, title: c.title })
            .collect(),
        endpoints: endpoints.into_iter().map(|e| EndpointChoice { id: e.id.0, name: e.name, model: e.model }).collect(),
    })
}

/// An endpoint as the admin page shows it: whether a key is set, never the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatEndpointView {
    pub id: i64,
    pub name: String,
    pub base_url: String,
    pub model: String,
    pub has_key: bool,
    pub timeout_secs: i64,
}

#[server(endpoint = "admin/chat_endpoints")]
pub async fn admin_chat_endpoints() -> Result<Vec<ChatEndpointView>, AppError> {
    let user = server::require_admin().await?;
    let rows = server::toolshed()?.playground().chat_endpoints(&user).await.map_err(server::fail)?;
    Ok(rows
        .into_iter()
        .map(|e| ChatEndpointView {
            id: e.id.0,
            name: e.name,
            base_url: e.base_url,
            model: e.model,
            has_key: e.has_key,
            timeout_secs: e.timeout_secs,
        })
        .collect())
}

#[cfg(feature = "ssr")]
fn spec(
    name: &str,
    base_url: &str,
    model: &str,
    api_key: &str,
    clear_key: bool,
    timeout_secs: &str,
) -> Result<toolshed_domain::playground::EndpointSpec, AppError> {
    toolshed_domain::playground::EndpointSpec::parse(name, base_url, model, api_key, clear_key, timeout_secs)
        .map_err(|e| server::fail(AppError::Invalid(e.to_string())))
}

/// A blank `api_key` means no key (a local Ollama needs none).
#[server(endpoint = "admin/chat_endpoints/create")]
pub async fn create_chat_endpoint(
    name: String,
    base_url: String,
    model: String,
    api_key: String,
    timeout_secs: String,
) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let spec = spec(&name, &base_url, &model, &api_key, false, &timeout_secs)?;
    server::toolshed()?.playground().create_chat_endpoint(&user, spec).await.map_err(server::fail)?;
    Ok(())
}

/// A blank `api_key` keeps the stored key; `clear_key` (a checkbox) removes it.
#[server(endpoint = "admin/chat_endpoints/update")]
pub async fn update_chat_endpoint(
    id: i64,
    name: String,
    base_url: String,
    model: String,
    api_key: String,
    clear_key: Option<String>,
    timeout_secs: String,
) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let spec = spec(&name, &base_url, &model, &api_key, clear_key.is_some(), &timeout_secs)?;
    let id = toolshed_domain::playground::ChatEndpointId(id);
    server::toolshed()?.playground().update_chat_endpoint(&user, id, spec).await.map_err(server::fail)?;
    Ok(())
}

#[server(endpoint = "admin/chat_endpoints/delete")]
pub async fn delete_chat_endpoint(id: i64) -> Result<(), AppError> {
    let user = server::require_admin().await?;
    let id = toolshed_domain::playground::ChatEndpointId(id);
    server::toolshed()?.playground().delete_chat_endpoint(&user, id).await.map_err(server::fail)
}
