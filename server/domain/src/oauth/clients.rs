//! Clients: registered ones (RFC 7591), ones named by the URL of their
//! metadata document, their redirect URIs and how they prove who they are.

use super::*;

/// A redirect URI a client may register: https anywhere, http only to this
/// machine (native apps, RFC 8252 §7.3), or an app's own scheme (`cursor://…`);
/// never a scheme a browser would run or read locally.
pub(super) fn check_redirect_uri(uri: &str) -> Result<(), OAuthError> {
    let bad = |why: &str| OAuthError::InvalidRedirectUri(format!("{uri:?} {why}"));
    if uri.len() > 2000 {
        return Err(bad("is too long"));
    }
    let parsed = url::Url::parse(uri).map_err(|_| bad("is not an absolute URL"))?;
    if parsed.fragment().is_some() {
        return Err(bad("has a fragment"));
    }
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if parsed.host_str().is_some_and(|h| matches!(h, "127.0.0.1" | "localhost" | "[::1]")) => Ok(()),
        "http" => Err(bad("uses http to another machine: use https")),
        "javascript" | "data" | "file" | "vbscript" | "about" | "blob" | "ftp" | "ws" | "wss" => {
            Err(bad("uses a scheme that cannot carry a code back"))
        }
        _ => Ok(()),
    }
}

/// Does the presented redirect URI match a registered one? Exactly, except
/// that a loopback URI may use any port (RFC 8252 §7.3).
pub(super) fn redirect_matches(registered: &str, presented: &str) -> bool {
    if registered == presented {
        return true;
    }
    let (Ok(mut a), Ok(mut b)) = (url::Url::parse(registered), url::Url::parse(presented)) else { return false };
    let loopback = |u: &url::Url| u.scheme() == "http" && matches!(u.host_str(), Some("127.0.0.1" | "[::1]"));
    if !(loopback(&a) && loopback(&b)) {
        return false;
    }
    let _ = a.set_port(None);
    let _ = b.set_port(None);
    a == b
}

/// A client's name as the consent page shows it: trimmed, `fallback` when
/// empty, and nothing that could disguise it (control characters, bidirectional
/// overrides, invisible ones).
pub(super) fn client_name(given: Option<&str>, fallback: &str) -> Result<String, OAuthError> {
    let name = given.map(str::trim).filter(|n| !n.is_empty()).unwrap_or(fallback);
    let disguising =
        |c: char| c.is_control() || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}');
    if name.chars().count() > 100 || name.chars().any(disguising) {
        return Err(OAuthError::InvalidClientMetadata("client_name must be at most 100 printable characters".into()));
    }
    Ok(name.to_owned())
}

impl OAuth<'_> {
    /// Registers a client (RFC 7591). Anyone may: a registration by itself
    /// grants nothing, and unused ones are forgotten after a day.
    pub async fn register_client(self, meta: ClientMetadata) -> Result<RegisteredClient, OAuthError> {
        let invalid = |m: &str| OAuthError::InvalidClientMetadata(m.to_owned());
        if meta.redirect_uris.is_empty() || meta.redirect_uris.len() > 10 {
            return Err(OAuthError::InvalidRedirectUri("give 1 to 10 redirect_uris".into()));
        }
        for uri in &meta.redirect_uris {
            check_redirect_uri(uri)?;
        }
        let method = meta.token_endpoint_auth_method.as_deref().unwrap_or("client_secret_basic");
        let confidential = match method {
            "none" => false,
            "client_secret_post" | "client_secret_basic" => true,
            other => {
                return Err(invalid(&format!(
                    "token_endpoint_auth_method {other:?} is not supported: use none, client_secret_post or client_secret_basic"
                )))
            }
        };
        if meta.grant_types.as_ref().is_some_and(|g| g.iter().any(|g| g != "authorization_code" && g != "refresh_token")) {
            return Err(invalid("grant_types may be authorization_code and refresh_token only"));
        }
        if meta.response_types.as_ref().is_some_and(|r| r.iter().any(|r| r != "code")) {
            return Err(invalid("response_types may be code only"));
        }
        let scope = Scope::parse(meta.scope.as_deref())?;
        let name = client_name(meta.client_name.as_deref(), "An MCP client")?;
        let id = random_token(CLIENT_PREFIX);
        let secret = confidential.then(|| random_token("tss_"));
        let now = now_ms();
        // Not a `Tx`: registration is open to anyone and unaudited, since a
        // client without a grant can do nothing (and unused ones are deleted here).
        let mut tx = self.core.db().begin().await?;
        sqlx::query(
            "DELETE FROM oauth_clients WHERE created_at < $1 AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.id)",
        )
        .bind(now - UNUSED_CLIENT_MS)
        .execute(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO oauth_clients (id, secret_hash, name, redirect_uris, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(&id)
            .bind(secret.as_deref().map(hash))
            .bind(&name)
            .bind(meta.redirect_uris.join("\n"))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(RegisteredClient {
            client_id: id,
            client_secret_expires_at: secret.is_some().then_some(0),
            client_secret: secret,
            client_id_issued_at: now / 1000,
            client_name: name,
            redirect_uris: meta.redirect_uris,
            token_endpoint_auth_method: method.to_owned(),
            grant_types: vec!["authorization_code", "refresh_token"],
            response_types: vec!["code"],
            scope: scope.as_string(),
        })
    }

    /// A client as stored: registered, or its document as last fetched.
    pub(super) async fn client(self, id: &str) -> Result<Option<(Client, Option<String>)>, OAuthError> {
        Ok(self.stored_client(id).await?.map(|(client, secret, _)| (client, secret)))
    }

    /// A stored client, its secret's hash and when its document must be fetched again.
    pub(super) async fn stored_client(self, id: &str) -> Result<Option<(Client, Option<String>, Option<i64>)>, StoreError> {
        let row = sqlx::query("SELECT id, secret_hash, name, redirect_uris, document_expires_at FROM oauth_clients WHERE id = $1")
            .bind(id)
            .fetch_optional(self.core.db().pool())
            .await?;
        let Some(row) = row else { return Ok(None) };
        let secret_hash: Option<String> = row.try_get("secret_hash")?;
        let uris: String = row.try_get("redirect_uris")?;
        let id: String = row.try_get("id")?;
        let client = Client {
            site: documents::is_document_url(&id).then(|| url::Url::parse(&id).ok()?.host_str().map(str::to_owned)).flatten(),
            id,
            name: row.try_get("name")?,
            redirect_uris: uris.lines().map(str::to_owned).collect(),
            confidential: secret_hash.is_some(),
        };
        Ok(Some((client, secret_hash, row.try_get("document_expires_at")?)))
    }

    /// Whether authorizing `client_id` would fetch its metadata document now
    /// (a URL not seen, or kept past its time): such requests are limited per
    /// address, since anyone can make this server fetch a URL that way.
    pub async fn would_fetch_client_document(self, client_id: &str) -> Result<bool, StoreError> {
        if documents::parse_client_url(client_id).is_err() {
            return Ok(false);
        }
        Ok(!matches!(self.stored_client(client_id).await?, Some((_, _, Some(expires)))if expires > now_ms()))
    }

    /// The client of an authorization request: a registered one, or the one a
    /// metadata document names (fetched when not kept, or kept past its time).
    pub(super) async fn authorizing_client(self, id: &str) -> Result<Option<Client>, OAuthError> {
        if !documents::is_document_url(id) {
            return Ok(self.client(id).await?.map(|(c, _)| c));
        }
        let url = documents::parse_client_url(id)?;
        if let Some((client, _, Some(expires))) = self.stored_client(id).await? {
            if expires > now_ms() {
                return Ok(Some(client));
            }
        }
        static CLIENTS: std::sync::OnceLock<crate::outbound::Clients> = std::sync::OnceLock::new();
        let http = CLIENTS
            .get_or_init(Default::default)
            .get(&self.core.settings().internal_hosts, |b| b.connect_timeout(std::time::Duration::from_secs(5)))
            .map_err(OAuthError::InvalidClient)?;
        let (body, keep) = documents::fetch(&http, &url).await?;
        let doc = documents::read_document(&url, &body)?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO oauth_clients (id, secret_hash, name, redirect_uris, created_at, document_expires_at) \
             VALUES ($1, NULL, $2, $3, $4, $5) ON CONFLICT (id) DO UPDATE SET name = excluded.name, \
             redirect_uris = excluded.redirect_uris, document_expires_at = excluded.document_expires_at",
        )
        .bind(id)
        .bind(&doc.name)
        .bind(doc.redirect_uris.join("\n"))
        .bind(now)
        .bind(now + keep.as_millis() as i64)
        .execute(self.core.db().pool())
        .await?;
        tracing::info!(client = %id, name = %doc.name, "fetched an OAuth client's metadata document");
        Ok(Some(Client {
            id: id.to_owned(),
            name: doc.name,
            redirect_uris: doc.redirect_uris,
            confidential: false,
            site: url.host_str().map(str::to_owned),
        }))
    }

    /// Checks the client's credentials: a public client names itself, a
    /// confidential one also proves its secret.
    pub(super) async fn authenticate_client(self, creds: &ClientCredentials) -> Result<Client, OAuthError> {
        let unknown = || OAuthError::InvalidClient("unknown client or wrong client secret".into());
        let (client, secret_hash) = self.client(&creds.client_id).await?.ok_or_else(unknown)?;
        match (secret_hash, &creds.client_secret) {
            (None, _) => Ok(client),
            // Digests are compared: their timing tells nothing about the secret.
            (Some(stored), Some(given)) if stored == hash(given) => Ok(client),
            _ => Err(unknown()),
        }
    }
}
