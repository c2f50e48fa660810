//! The LLM playground: chat endpoints an admin configures (any OpenAI-compatible
//! chat-completions API: DeepSeek, Qwen, vLLM, Ollama, …), and conversations
//! in which a model calls a listing's tools.
//!
//! - `mod.rs`: the endpoints (`chat_endpoints`), their validation and rules;
//!   the API key is sealed with [`crate::secrets::SecretBox`] and only opened
//!   on the way to the endpoint.
//! - `client.rs`: a small streaming chat-completions client on reqwest.
//! - `turn.rs`: one turn of a conversation: stream the model's answer, run the
//!   tool calls it asks for through the domain (validated, sandboxed, recorded
//!   like an MCP call, transport `playground`), feed the results back, repeat.

mod client;
mod turn;

use serde::{Deserialize, Serialize};
use sqlx::Row;

pub use client::{EndpointError, FunctionCall, Message, ToolCall};
pub use turn::{ListingRef, PlaygroundEvent, Turn, TurnRequest, MAX_MESSAGES, MAX_ROUNDS};

use crate::accounts::User;
use crate::names::{parse_text, Invalid};
use crate::secrets::SecretError;
use crate::store::StoreError;
use crate::tools::ToolError;
use crate::{audit, now_ms};

handle! {
    /// The chat playground: a model calling tools.
    Playground
}

/// Row ID of a chat endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChatEndpointId(pub i64);

impl std::fmt::Display for ChatEndpointId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PlaygroundError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("Only administrators may do that.")]
    Forbidden,
    /// Also for an endpoint that was deleted meanwhile.
    #[error("No such chat endpoint.")]
    UnknownEndpoint,
    #[error("A chat endpoint named “{0}” already exists.")]
    NameTaken(String),
    /// The listing does not exist, is not published, or the caller may not see it.
    #[error("No such listing.")]
    NotFound,
    #[error("This listing has been disabled by an administrator; it refuses calls.")]
    Disabled,
    /// The deployment's secrets key changed since the key was stored.
    #[error("The endpoint's stored API key cannot be opened (the secrets key changed?); an admin must enter it again.")]
    Unreadable(#[from] SecretError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for PlaygroundError {
    fn from(e: sqlx::Error) -> Self {
        PlaygroundError::Store(e.into())
    }
}

impl From<ToolError> for PlaygroundError {
    fn from(e: ToolError) -> Self {
        match e {
            ToolError::Store(e) => PlaygroundError::Store(e),
            ToolError::Invalid(e) => PlaygroundError::Invalid(e),
            ToolError::Disabled => PlaygroundError::Disabled,
            // Not found, not published, no such version: nothing to chat with.
            _ => PlaygroundError::NotFound,
        }
    }
}

/// A configured endpoint, as the pages show it: never the key, only whether there is one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatEndpoint {
    pub id: ChatEndpointId,
    pub name: String,
    /// Without a trailing slash; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    pub has_key: bool,
    pub timeout_secs: i64,
}

impl ChatEndpoint {
    fn audit_target(&self) -> String {
        format!("chat_endpoint:{}", self.name)
    }

    /// What the audit log keeps of the settings: the key only as set or not.
    fn audit_json(&self) -> serde_json::Value {
        serde_json::json!({
            "name": self.name, "base_url": self.base_url, "model": self.model,
            "key": if self.has_key { "set" } else { "not set" }, "timeout_secs": self.timeout_secs,
        })
    }
}

/// What to do with the stored API key when an endpoint is saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyChange {
    /// Keep the stored one (none, for a new endpoint): the form's key field left blank.
    Keep,
    Set(String),
    Clear,
}

/// An endpoint's settings as an admin typed them, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    pub name: String,
    pub base_url: String,
    pub model: String,
    pub key: KeyChange,
    pub timeout_secs: i64,
}

impl EndpointSpec {
    pub const MAX_NAME: usize = 60;
    pub const MAX_MODEL: usize = 200;
    pub const MAX_KEY: usize = 4096;
    pub const DEFAULT_TIMEOUT_SECS: i64 = 60;
    pub const MAX_TIMEOUT_SECS: i64 = 600;

    /// The admin form's fields. `base_url` is where `/chat/completions` lives
    /// (e.g. `https://api.deepseek.com/v1`); a blank `api_key` keeps the stored
    /// key unless `clear_key`; a blank timeout is the default.
    pub fn parse(name: &str, base_url: &str, model: &str, api_key: &str, clear_key: bool, timeout_secs: &str) -> Result<Self, Invalid> {
        let bad = |field, reason: &str| Invalid { field, reason: reason.into() };
        let name = parse_text("Name", name, Self::MAX_NAME)?;
        let url = url::Url::parse(base_url.trim()).map_err(|_| bad("Base URL", "must be a URL like https://api.deepseek.com/v1"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(bad("Base URL", "must be an http:// or https:// URL"));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
            return Err(bad("Base URL", "must have no query, fragment or credentials (put the key in the API key field)"));
        }
        let base_url = url.as_str().trim_end_matches('/').to_owned();
        let model = parse_text("Model", model, Self::MAX_MODEL)?;
        let api_key = api_key.trim();
        let key = match (clear_key, api_key.is_empty()) {
            (true, _) => KeyChange::Clear,
            (false, true) => KeyChange::Keep,
            (false, false) if api_key.len() > Self::MAX_KEY => return Err(bad("API key", "is too long")),
            (false, false) if api_key.chars().any(char::is_control) => return Err(bad("API key", "must not contain control characters")),
            (false, false) => KeyChange::Set(api_key.to_owned()),
        };
        let timeout_secs = match timeout_secs.trim() {
            "" => Self::DEFAULT_TIMEOUT_SECS,
            t => t.parse().ok().filter(|t| (1..=Self::MAX_TIMEOUT_SECS).contains(t)).ok_or_else(|| Invalid {
                field: "Timeout",
                reason: format!("must be a whole number of seconds from 1 to {}", Self::MAX_TIMEOUT_SECS),
            })?,
        };
        Ok(Self { name, base_url, model, key, timeout_secs })
    }
}

/// How a sealed key is bound to its row.
fn key_purpose(id: ChatEndpointId) -> String {
    format!("chat_endpoint:{id}")
}

const ENDPOINT_SELECT: &str = "SELECT id, name, base_url, model, api_key, timeout_secs FROM chat_endpoints";

fn endpoint_row(r: &sqlx::any::AnyRow) -> Result<(ChatEndpoint, Option<Vec<u8>>), sqlx::Error> {
    let key: Option<Vec<u8>> = r.try_get("api_key")?;
    Ok((
        ChatEndpoint {
            id: ChatEndpointId(r.try_get("id")?),
            name: r.try_get("name")?,
            base_url: r.try_get("base_url")?,
            model: r.try_get("model")?,
            has_key: key.is_some(),
            timeout_secs: r.try_get("timeout_secs")?,
        },
        key,
    ))
}

impl Playground<'_> {
    /// Every configured endpoint, by name: any signed-in user may pick one.
    pub async fn chat_endpoints(self, _user: &User) -> Result<Vec<ChatEndpoint>, PlaygroundError> {
        let rows = sqlx::query(&format!("{ENDPOINT_SELECT} ORDER BY name")).fetch_all(self.core.db().pool()).await?;
        Ok(rows.iter().map(|r| endpoint_row(r).map(|(e, _)| e)).collect::<Result<_, _>>()?)
    }

    /// An endpoint with its key opened, for the client only.
    async fn chat_endpoint_with_key(self, id: ChatEndpointId) -> Result<(ChatEndpoint, Option<String>), PlaygroundError> {
        let row = sqlx::query(&format!("{ENDPOINT_SELECT} WHERE id = $1")).bind(id.0).fetch_optional(self.core.db().pool()).await?;
        let (endpoint, sealed) = endpoint_row(&row.ok_or(PlaygroundError::UnknownEndpoint)?)?;
        let key = sealed.map(|s| self.core.secrets().open(&key_purpose(id), &s)).transpose()?;
        Ok((endpoint, key))
    }

    /// Adds an endpoint (admins only).
    pub async fn create_chat_endpoint(self, admin: &User, spec: EndpointSpec) -> Result<ChatEndpoint, PlaygroundError> {
        self.save_chat_endpoint(admin, None, spec).await
    }

    /// Changes an endpoint's settings (admins only); the key as `spec.key` says.
    pub async fn update_chat_endpoint(self, admin: &User, id: ChatEndpointId, spec: EndpointSpec) -> Result<ChatEndpoint, PlaygroundError> {
        self.save_chat_endpoint(admin, Some(id), spec).await
    }

    async fn save_chat_endpoint(
        self,
        admin: &User,
        id: Option<ChatEndpointId>,
        spec: EndpointSpec,
    ) -> Result<ChatEndpoint, PlaygroundError> {
        if !admin.is_admin {
            return Err(PlaygroundError::Forbidden);
        }
        let mut tx = self.core.begin().await?;
        let taken = sqlx::query("SELECT id FROM chat_endpoints WHERE name = $1 AND id <> $2")
            .bind(&spec.name)
            .bind(id.map_or(-1, |i| i.0))
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Err(PlaygroundError::NameTaken(spec.name));
        }
        let now = now_ms();
        let (id, before) = match id {
            Some(id) => {
                let row = sqlx::query(&format!("{ENDPOINT_SELECT} WHERE id = $1")).bind(id.0).fetch_optional(&mut *tx).await?;
                let (before, _) = endpoint_row(&row.ok_or(PlaygroundError::UnknownEndpoint)?)?;
                sqlx::query(
                    "UPDATE chat_endpoints SET name = $1, base_url = $2, model = $3, timeout_secs = $4, updated_at = $5 WHERE id = $6",
                )
                .bind(&spec.name)
                .bind(&spec.base_url)
                .bind(&spec.model)
                .bind(spec.timeout_secs)
                .bind(now)
                .bind(id.0)
                .execute(&mut *tx)
                .await?;
                (id, Some(before))
            }
            None => {
                let row = sqlx::query(
                    "INSERT INTO chat_endpoints (name, base_url, model, timeout_secs, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
                )
                .bind(&spec.name)
                .bind(&spec.base_url)
                .bind(&spec.model)
                .bind(spec.timeout_secs)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                (ChatEndpointId(row.try_get("id")?), None)
            }
        };
        // Sealed after the insert: the ciphertext is bound to the row's ID.
        let sealed = match &spec.key {
            KeyChange::Keep => None,
            KeyChange::Set(key) => Some(Some(self.core.secrets().seal(&key_purpose(id), key))),
            KeyChange::Clear => Some(None),
        };
        if let Some(sealed) = sealed {
            sqlx::query("UPDATE chat_endpoints SET api_key = $1 WHERE id = $2").bind(sealed).bind(id.0).execute(&mut *tx).await?;
        }
        let row = sqlx::query(&format!("{ENDPOINT_SELECT} WHERE id = $1")).bind(id.0).fetch_one(&mut *tx).await?;
        let (after, _) = endpoint_row(&row)?;
        let action = if before.is_some() { "chat_endpoint.updated" } else { "chat_endpoint.created" };
        audit::record(&mut tx, Some(admin.id), action, &after.audit_target(), before.map(|b| b.audit_json()), Some(after.audit_json()))
            .await?;
        tx.commit().await?;
        Ok(after)
    }

    /// Removes an endpoint (admins only); its sealed key goes with it.
    pub async fn delete_chat_endpoint(self, admin: &User, id: ChatEndpointId) -> Result<(), PlaygroundError> {
        if !admin.is_admin {
            return Err(PlaygroundError::Forbidden);
        }
        let mut tx = self.core.begin().await?;
        let row = sqlx::query(&format!("{ENDPOINT_SELECT} WHERE id = $1")).bind(id.0).fetch_optional(&mut *tx).await?;
        let (before, _) = endpoint_row(&row.ok_or(PlaygroundError::UnknownEndpoint)?)?;
        sqlx::query("DELETE FROM chat_endpoints WHERE id = $1").bind(id.0).execute(&mut *tx).await?;
        audit::record(&mut tx, Some(admin.id), "chat_endpoint.deleted", &before.audit_target(), Some(before.audit_json()), None).await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_spec_normalises_the_base_url_and_reads_the_key_field() {
        let spec = EndpointSpec::parse(" DeepSeek ", "https://api.deepseek.com/v1/", "deepseek-chat", " sk-1 ", false, "").unwrap();
        assert_eq!(spec.name, "DeepSeek");
        assert_eq!(spec.base_url, "https://api.deepseek.com/v1");
        assert_eq!(spec.key, KeyChange::Set("sk-1".into()));
        assert_eq!(spec.timeout_secs, EndpointSpec::DEFAULT_TIMEOUT_SECS);
        assert_eq!(EndpointSpec::parse("o", "http://localhost:11434/v1", "qwen", "", false, "5").unwrap().key, KeyChange::Keep);
        assert_eq!(EndpointSpec::parse("o", "http://localhost:11434/v1", "qwen", "sk", true, "5").unwrap().key, KeyChange::Clear);
    }

    #[test]
    fn an_endpoint_spec_refuses_bad_urls_models_and_timeouts() {
        let field = |r: Result<EndpointSpec, Invalid>| r.unwrap_err().field;
        assert_eq!(field(EndpointSpec::parse("o", "ftp://x/v1", "m", "", false, "")), "Base URL");
        assert_eq!(field(EndpointSpec::parse("o", "not a url", "m", "", false, "")), "Base URL");
        assert_eq!(field(EndpointSpec::parse("o", "https://u:p@x/v1", "m", "", false, "")), "Base URL");
        assert_eq!(field(EndpointSpec::parse("o", "https://x/v1?key=1", "m", "", false, "")), "Base URL");
        assert_eq!(field(EndpointSpec::parse("o", "https://x/v1", " ", "", false, "")), "Model");
        assert_eq!(field(EndpointSpec::parse("o", "https://x/v1", "m", "", false, "0")), "Timeout");
        assert_eq!(field(EndpointSpec::parse("o", "https://x/v1", "m", "", false, "ten")), "Timeout");
        assert_eq!(field(EndpointSpec::parse("", "https://x/v1", "m", "", false, "")), "Name");
    }
}
