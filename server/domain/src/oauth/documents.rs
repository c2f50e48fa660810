//! Client ID metadata documents (MCP authorization 2025-11-25,
//! draft-ietf-oauth-client-id-metadata-document): a client that never
//! registered names itself by an https URL, and the JSON document at that URL
//! gives its name and redirect URIs. The URL is the proof: whoever controls
//! the site controls where codes go, so the consent page shows the site.
//!
//! Documents are fetched through the outbound rule ([`crate::outbound`]: no
//! internal addresses unless an operator allowed the host), never following
//! redirects, at most [`MAX_DOCUMENT_BYTES`], and kept for what their
//! `Cache-Control` says, within [`MIN_KEEP`]..[`MAX_KEEP`].

use std::time::Duration;

use serde::Deserialize;

use super::clients::{check_redirect_uri, client_name};
use super::OAuthError;

/// A client's metadata is a few hundred bytes; the draft suggests 5 KB.
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Kept when the document's answer says nothing about caching.
const DEFAULT_KEEP: Duration = Duration::from_secs(10 * 60);
/// Refetched at most this often, whatever the answer says (`no-store` included).
const MIN_KEEP: Duration = Duration::from_secs(60);
/// Refetched at least this often, so a changed document takes effect within a day.
const MAX_KEEP: Duration = Duration::from_secs(24 * 60 * 60);

/// Whether a `client_id` names a metadata document rather than a registration.
pub fn is_document_url(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// A `client_id` URL as the draft allows it (§3): https, a host, a path other
/// than `/`, no fragment, no credentials, no dot segments.
pub fn parse_client_url(client_id: &str) -> Result<url::Url, OAuthError> {
    let bad = |why: &str| OAuthError::InvalidClient(format!("The application's client_id {client_id:?} {why}."));
    if client_id.len() > 2000 {
        return Err(bad("is too long"));
    }
    let url = url::Url::parse(client_id).map_err(|_| bad("is not a URL"))?;
    if url.scheme() != "https" || url.host_str().is_none() {
        return Err(bad("must be an https URL"));
    }
    if url.path() == "/" {
        return Err(bad("must have a path"));
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(bad("must not carry a fragment or credentials"));
    }
    // The parser resolves `.` and `..`: a URL that changed by parsing had them.
    if url.as_str() != client_id {
        return Err(bad("must be written in its normal form (no dot segments, lower-case scheme and host)"));
    }
    Ok(url)
}

/// The fields of a document this server reads (RFC 7591 §2 names); others are ignored.
#[derive(Debug, Deserialize)]
struct Document {
    client_id: String,
    client_name: Option<String>,
    #[serde(default)]
    redirect_uris: Vec<String>,
    token_endpoint_auth_method: Option<String>,
    grant_types: Option<Vec<String>>,
    response_types: Option<Vec<String>>,
    client_secret: Option<serde_json::Value>,
}

/// What a valid document says about its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentClient {
    pub name: String,
    pub redirect_uris: Vec<String>,
}

/// Reads the document fetched from `url`.
pub fn read_document(url: &url::Url, body: &[u8]) -> Result<DocumentClient, OAuthError> {
    let bad = |why: String| OAuthError::InvalidClient(format!("The application's metadata document at {url} {why}."));
    let doc: Document = serde_json::from_slice(body).map_err(|e| bad(format!("is not a client metadata document ({e})")))?;
    if doc.client_id != url.as_str() {
        return Err(bad(format!("names another client_id ({:?})", doc.client_id)));
    }
    if doc.client_secret.is_some() {
        return Err(bad("contains a client_secret: a public document cannot hold one".into()));
    }
    match doc.token_endpoint_auth_method.as_deref() {
        None | Some("none") => {}
        Some(other) => return Err(bad(format!("asks for token_endpoint_auth_method {other:?}: only none is supported"))),
    }
    if doc.grant_types.as_ref().is_some_and(|g| g.iter().any(|g| g != "authorization_code" && g != "refresh_token")) {
        return Err(bad("asks for grant types other than authorization_code and refresh_token".into()));
    }
    if doc.response_types.as_ref().is_some_and(|r| r.iter().any(|r| r != "code")) {
        return Err(bad("asks for response types other than code".into()));
    }
    if doc.redirect_uris.is_empty() || doc.redirect_uris.len() > 10 {
        return Err(bad("must list 1 to 10 redirect_uris".into()));
    }
    for uri in &doc.redirect_uris {
        check_redirect_uri(uri).map_err(|e| bad(format!("has a bad redirect URI: {e}")))?;
    }
    let name = client_name(doc.client_name.as_deref(), url.host_str().unwrap_or("An MCP client"))
        .map_err(|_| bad("has a client_name that is not at most 100 printable characters".into()))?;
    Ok(DocumentClient { name, redirect_uris: doc.redirect_uris })
}

/// How long an answer may be kept, from its `Cache-Control`.
pub fn keep_for(cache_control: Option<&str>) -> Duration {
    let Some(value) = cache_control else { return DEFAULT_KEEP };
    let mut keep = DEFAULT_KEEP;
    for directive in value.split(',').map(|d| d.trim().to_ascii_lowercase()) {
        if directive == "no-store" || directive == "no-cache" {
            return MIN_KEEP;
        }
        if let Some(secs) = directive.strip_prefix("max-age=").and_then(|s| s.trim_matches('"').parse::<u64>().ok()) {
            keep = Duration::from_secs(secs);
        }
    }
    keep.clamp(MIN_KEEP, MAX_KEEP)
}

/// Fetches the document at `url`: its body and how long it may be kept.
pub async fn fetch(http: &reqwest::Client, url: &url::Url) -> Result<(Vec<u8>, Duration), OAuthError> {
    let unreadable =
        |why: String| OAuthError::InvalidClient(format!("The application's metadata document at {url} could not be read: {why}."));
    let mut res = tokio::time::timeout(FETCH_TIMEOUT, http.get(url.clone()).header("Accept", "application/json").send())
        .await
        .map_err(|_| unreadable(format!("no answer within {} s", FETCH_TIMEOUT.as_secs())))?
        .map_err(|e| unreadable(crate::outbound::describe(&e)))?;
    if !res.status().is_success() {
        return Err(unreadable(format!("the site answered {}", res.status())));
    }
    if res.content_length().is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
        return Err(unreadable(format!("it is larger than {MAX_DOCUMENT_BYTES} bytes")));
    }
    let keep = keep_for(res.headers().get(reqwest::header::CACHE_CONTROL).and_then(|v| v.to_str().ok()));
    let mut body = Vec::new();
    let read = async {
        while let Some(chunk) = res.chunk().await.map_err(|e| unreadable(e.to_string()))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(unreadable(format!("it is larger than {MAX_DOCUMENT_BYTES} bytes")));
            }
        }
        Ok(())
    };
    tokio::time::timeout(FETCH_TIMEOUT, read).await.map_err(|_| unreadable("it arrived too slowly".into()))??;
    Ok((body, keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_url_is_https_with_a_path_and_nothing_hidden() {
        assert!(parse_client_url("https://app.example.com/oauth/client.json").is_ok());
        for bad in [
            "http://app.example.com/client.json",
            "https://app.example.com/",
            "https://app.example.com",
            "https://app.example.com/client.json#x",
            "https://user:pw@app.example.com/client.json",
            "https://app.example.com/a/../client.json",
            "https://APP.example.com/client.json",
            "cursor://client",
        ] {
            assert!(parse_client_url(bad).is_err(), "{bad}");
        }
    }

    fn doc(fields: serde_json::Value) -> Vec<u8> {
        let mut d = serde_json::json!({
            "client_id": "https://app.example.com/client.json",
            "client_name": "Example",
            "redirect_uris": ["http://127.0.0.1/callback"],
        });
        d.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        serde_json::to_vec(&d).unwrap()
    }

    #[test]
    fn a_document_must_name_itself_and_hold_no_secret() {
        let url = parse_client_url("https://app.example.com/client.json").unwrap();
        let ok = read_document(&url, &doc(serde_json::json!({}))).unwrap();
        assert_eq!(ok, DocumentClient { name: "Example".into(), redirect_uris: vec!["http://127.0.0.1/callback".into()] });
        // Without a name, the site stands for the client.
        assert_eq!(read_document(&url, &doc(serde_json::json!({"client_name": null}))).unwrap().name, "app.example.com");
        for (fields, says) in [
            (serde_json::json!({"client_id": "https://evil.example/client.json"}), "names another client_id"),
            (serde_json::json!({"client_secret": "s"}), "client_secret"),
            (serde_json::json!({"token_endpoint_auth_method": "private_key_jwt"}), "only none"),
            (serde_json::json!({"redirect_uris": []}), "1 to 10"),
            (serde_json::json!({"redirect_uris": ["javascript:alert(1)"]}), "bad redirect URI"),
            (serde_json::json!({"grant_types": ["client_credentials"]}), "grant types"),
            (serde_json::json!({"client_name": "a\u{202e}b"}), "printable"),
        ] {
            let e = read_document(&url, &doc(fields.clone())).unwrap_err().to_string();
            assert!(e.contains(says), "{fields}: {e}");
        }
        assert!(read_document(&url, b"<html>").unwrap_err().to_string().contains("is not a client metadata document"));
    }

    #[test]
    fn documents_are_kept_as_their_answer_says_within_bounds() {
        assert_eq!(keep_for(None), DEFAULT_KEEP);
        assert_eq!(keep_for(Some("public, max-age=3600")), Duration::from_secs(3600));
        assert_eq!(keep_for(Some("max-age=0")), MIN_KEEP);
        assert_eq!(keep_for(Some("no-store")), MIN_KEEP);
        assert_eq!(keep_for(Some("max-age=99999999")), MAX_KEEP);
        assert_eq!(keep_for(Some("nonsense")), DEFAULT_KEEP);
    }
}
