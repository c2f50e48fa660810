//! The Connect panel's per-client configurations, made on the server (the wasm
//! only shows them): each client's own format, checked against its documentation.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::AppError;

/// One MCP client's way in: what to paste where, and a one-click install link
/// where the client has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSnippet {
    pub key: String,
    pub label: String,
    pub note: String,
    pub snippet: String,
    /// An install link: its label and address.
    pub link: Option<(String, String)>,
}

/// The signed-in person's own MCP endpoint, and how each client connects to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersonalEndpointView {
    pub endpoint: String,
    pub connect: Vec<ClientSnippet>,
}

#[server(endpoint = "connect/personal")]
pub async fn personal_endpoint() -> Result<PersonalEndpointView, AppError> {
    super::server::require_user().await?;
    let base = use_context::<crate::PublicUrl>().map(|p| p.0).unwrap_or_default();
    let endpoint = format!("{base}/mcp/me");
    Ok(PersonalEndpointView { connect: connect_clients("toolshed", &endpoint), endpoint })
}

/// The name a listing's server gets in a client's configuration: its
/// department with its name (`demo-table`), so a fork (`finance-table`) or a
/// pinned version (`demo-table-v3`) sits beside it instead of overwriting it.
#[cfg(feature = "ssr")]
pub(crate) fn config_key(department: &str, name: &str, pinned: Option<i64>) -> String {
    match pinned {
        Some(n) => format!("{department}-{name}-v{n}"),
        None => format!("{department}-{name}"),
    }
}

/// `%XX` for everything but unreserved characters (RFC 3986), as `encodeURIComponent` does.
pub(crate) fn uri_component(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(feature = "ssr")]
pub(crate) fn connect_clients(name: &str, endpoint: &str) -> Vec<ClientSnippet> {
    use serde_json::{json, Value};
    struct Client {
        key: &'static str,
        label: &'static str,
        note: &'static str,
        snippet: String,
        link: Option<(&'static str, String)>,
    }
    let pretty = |v: Value| serde_json::to_string_pretty(&v).unwrap_or_default();
    let bearer = "Bearer <your token>";
    // Clients that speak MCP authorization need the URL alone: the first
    // connection opens Toolshed's consent page in the browser (OAuth).
    let vscode_server = json!({"type": "http", "url": endpoint});
    let mut vscode_install = vscode_server.clone();
    vscode_install["name"] = json!(name);
    let cursor_server = json!({"url": endpoint});
    let cursor_config = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(cursor_server.to_string())
    };
    // A session: initialize (keep the Mcp-Session-Id), confirm, then list the tools.
    let curl = format!(
        "URL={endpoint}\nH=(-H 'Authorization: {bearer}' -H 'Content-Type: application/json' \\\n   -H 'Accept: application/json, text/event-stream')\n\
         SID=$(curl -si \"$URL\" \"${{H[@]}}\" -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{{}},\"clientInfo\":{{\"name\":\"curl\",\"version\":\"1\"}}}}}}' \\\n\
         \x20 | awk 'tolower($1) == \"mcp-session-id:\" {{ print $2 }}' | tr -d '\\r')\n\
         curl -s \"$URL\" \"${{H[@]}}\" -H \"Mcp-Session-Id: $SID\" -d '{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}'\n\
         curl -s \"$URL\" \"${{H[@]}}\" -H \"Mcp-Session-Id: $SID\" -d '{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}}'"
    );
    vec![
        Client {
            key: "vscode",
            label: "VS Code",
            note: "In .vscode/mcp.json (or “MCP: Open User Configuration”), or install with the link. On the first start VS Code opens Toolshed in your browser: sign in and allow it (OAuth); no token to paste.",
            snippet: pretty(json!({"servers": {name: vscode_server}})),
            link: Some(("Install in VS Code", format!("vscode:mcp/install?{}", uri_component(&vscode_install.to_string())))),
        },
        Client {
            key: "cursor",
            label: "Cursor",
            note: "In ~/.cursor/mcp.json (every project) or .cursor/mcp.json (this project), or install with the link. Cursor signs in with OAuth in your browser (“Needs login” → Connect).",
            snippet: pretty(json!({"mcpServers": {name: cursor_server}})),
            link: Some((
                "Install in Cursor",
                format!("cursor://anysphere.cursor-deeplink/mcp/install?name={}&config={}", uri_component(name), uri_component(&cursor_config)),
            )),
        },
        Client {
            key: "claude-code",
            label: "Claude Code",
            note: "In a terminal (add --scope user to have it in every project), then /mcp in Claude Code to sign in with OAuth in your browser.",
            snippet: format!("claude mcp add --transport http {name} {endpoint}"),
            link: None,
        },
        Client {
            key: "claude-desktop",
            label: "Claude Desktop",
            note: "Its configuration file (Settings → Developer → Edit Config) starts local servers only: mcp-remote (from npm) bridges to this endpoint and signs in with OAuth in your browser.",
            snippet: pretty(json!({"mcpServers": {name: {"command": "npx", "args": ["-y", "mcp-remote", endpoint]}}})),
            link: None,
        },
        Client {
            key: "connectors",
            label: "Claude.ai / ChatGPT",
            note: "Settings → Connectors → Add custom connector: the URL alone; it signs in with OAuth. These connect from the vendor's cloud, so the URL must be reachable from the internet.",
            snippet: endpoint.to_owned(),
            link: None,
        },
        Client {
            key: "cherry",
            label: "Cherry Studio",
            note: "Settings → MCP Servers → Add → Import from JSON, with a personal token from your Account page.",
            snippet: pretty(json!({"mcpServers": {name: {"type": "streamableHttp", "baseUrl": endpoint, "headers": {"Authorization": bearer}}}})),
            link: None,
        },
        Client { key: "curl", label: "curl", note: "A session by hand: initialize, then list the tools.", snippet: curl, link: None },
    ]
    .into_iter()
    .map(|c| ClientSnippet {
        key: c.key.to_owned(),
        label: c.label.to_owned(),
        note: c.note.to_owned(),
        snippet: c.snippet,
        link: c.link.map(|(label, href)| (label.to_owned(), href)),
    })
    .collect()
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn a_listing_and_its_fork_get_different_names_in_a_client_configuration() {
        let (original, fork) = (config_key("demo", "table", None), config_key("finance", "table", None));
        assert_ne!(original, fork);
        assert_eq!(config_key("demo", "table", Some(3)), "demo-table-v3");
        let snippets = |key: &str| connect_clients(key, "http://127.0.0.1:3000/mcp/tools/demo/table");
        let cursor = |key: &str| snippets(key).into_iter().find(|c| c.key == "cursor").unwrap().snippet;
        let servers: serde_json::Value = serde_json::from_str(&cursor(&original)).unwrap();
        assert_eq!(servers["mcpServers"].as_object().unwrap().keys().collect::<Vec<_>>(), ["demo-table"]);
    }
}
