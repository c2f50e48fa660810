//! Configuration: flags, each with an environment variable, one struct.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use base64::Engine;
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "TOOLSHED_ADDR", default_value = "127.0.0.1:3000", global = true)]
    pub addr: SocketAddr,

    /// Directory for the embedded database and generated secrets.
    #[arg(long, env = "TOOLSHED_DATA_DIR", default_value = "./data", global = true)]
    pub data_dir: PathBuf,

    /// `sqlite://path` (default: toolshed.db in the data directory) or `postgres://…`.
    /// Several replicas can share one PostgreSQL database.
    #[arg(long, env = "DATABASE_URL", global = true)]
    pub database_url: Option<String>,

    /// The public URL people and MCP clients use (default: http://ADDR). Cookies are
    /// marked Secure when it is https; cross-site POSTs are checked against it.
    #[arg(long, env = "TOOLSHED_BASE_URL", global = true)]
    pub base_url: Option<url::Url>,

    /// Base64 of at least 64 random bytes that signs session cookies. All replicas
    /// must share it. Default: generated once into DATA_DIR/session.key.
    #[arg(long, env = "TOOLSHED_SESSION_KEY", hide_env_values = true, global = true)]
    pub session_key: Option<String>,

    /// Base64 of 32 random bytes that seals stored credentials (external MCP
    /// servers, LLM endpoints). All replicas must share it; losing it makes the
    /// stored credentials unreadable. Default: generated once into DATA_DIR/secrets.key.
    #[arg(long, env = "TOOLSHED_SECRETS_KEY", hide_env_values = true, global = true)]
    pub secrets_key: Option<String>,

    /// Internal hosts (names or addresses, comma-separated) that tools' `$fetch`,
    /// external MCP servers and chat endpoints may reach. Every other loopback,
    /// private, link-local (cloud metadata), CGNAT or unique-local address is
    /// refused, after name resolution and at every redirect.
    #[arg(long, env = "TOOLSHED_INTERNAL_HOSTS", default_value = "", global = true)]
    pub internal_hosts: String,

    /// Reverse proxies (addresses or CIDR ranges, comma-separated) whose
    /// `X-Forwarded-For` names the client. Sign-in limits count per client
    /// address: without this, everyone behind one proxy shares its address.
    #[arg(long, env = "TOOLSHED_TRUSTED_PROXIES", default_value = "", global = true)]
    pub trusted_proxies: String,

    /// How people get an account: `invite` (an invitation link from a
    /// department's maintainer or an admin, or a request to join that one of
    /// them approves), `open` (anyone who can reach the server joins any
    /// department as an author), or `sso` (no local registration).
    #[arg(long, env = "TOOLSHED_REGISTRATION", default_value = "invite", global = true)]
    pub registration: String,

    /// Single sign-on: the OpenID Connect issuer URL of the company's identity
    /// provider (Keycloak realm, Entra ID tenant, Okta, Google). Unset: no SSO.
    #[arg(long, env = "TOOLSHED_OIDC_ISSUER", global = true)]
    pub oidc_issuer: Option<url::Url>,

    /// The client id Toolshed is registered with at the provider (redirect
    /// URI: BASE_URL/auth/sso/callback).
    #[arg(long, env = "TOOLSHED_OIDC_CLIENT_ID", default_value = "", global = true)]
    pub oidc_client_id: String,

    /// The client secret (empty for a public client: PKCE alone).
    #[arg(long, env = "TOOLSHED_OIDC_CLIENT_SECRET", default_value = "", hide_env_values = true, global = true)]
    pub oidc_client_secret: String,

    /// Scopes asked for, separated by spaces (`openid` is always asked).
    #[arg(long, env = "TOOLSHED_OIDC_SCOPES", default_value = "openid profile email", global = true)]
    pub oidc_scopes: String,

    /// The claim (in the ID token or the user info) listing the person's groups.
    #[arg(long, env = "TOOLSHED_OIDC_GROUPS_CLAIM", default_value = "groups", global = true)]
    pub oidc_groups_claim: String,

    /// The provider's name on the sign-in button.
    #[arg(long, env = "TOOLSHED_OIDC_NAME", default_value = "your company account", global = true)]
    pub oidc_name: String,

    /// Members of this provider group are admins (checked at every sign-in).
    #[arg(long, env = "TOOLSHED_SSO_ADMIN_GROUP", global = true)]
    pub sso_admin_group: Option<String>,

    /// `on` (default) or `off`: whether local passwords sign in. Off needs SSO.
    #[arg(long, env = "TOOLSHED_PASSWORDS", default_value = "on", global = true)]
    pub passwords: String,

    /// A sentence-transformers model folder (config.json, tokenizer.json,
    /// model.safetensors; `make run` installs multilingual-e5-small) for the
    /// personal endpoint's tool search by meaning. Unset: full-text search only.
    #[arg(long, env = "TOOLSHED_EMBEDDING_MODEL", global = true)]
    pub embedding_model: Option<PathBuf>,

    /// The bearer token Prometheus sends to read `GET /metrics` (at least 32
    /// characters). Unset: no metrics are served.
    #[arg(long, env = "TOOLSHED_METRICS_TOKEN", hide_env_values = true, global = true)]
    pub metrics_token: Option<String>,

    /// Where traces go, as OTLP over HTTP (e.g. `http://collector:4318`;
    /// `/v1/traces` is added). Unset: no traces are exported.
    #[arg(long, env = "TOOLSHED_OTLP_ENDPOINT", global = true)]
    pub otlp_endpoint: Option<url::Url>,

    /// One caller's tool runs in progress at once; their further calls wait
    /// their turn (default: a quarter of the sandbox's threads, 8 per core).
    #[arg(long, env = "TOOLSHED_SANDBOX_PER_CALLER", global = true)]
    pub sandbox_per_caller: Option<usize>,

    /// One listing's runs in progress at once, across callers (default: half
    /// the sandbox's threads).
    #[arg(long, env = "TOOLSHED_SANDBOX_PER_LISTING", global = true)]
    pub sandbox_per_listing: Option<usize>,

    /// Calls one caller may have in flight (in progress or waiting); past it
    /// their next call is refused (HTTP 429, an MCP tool error), nobody else's.
    #[arg(long, env = "TOOLSHED_SANDBOX_CALLER_CALLS", global = true)]
    pub sandbox_caller_calls: Option<usize>,

    /// Directory with the built site (pkg/toolshed.js, .wasm, .css).
    /// Default: target/site under the current directory.
    #[arg(long, env = "TOOLSHED_SITE_ROOT", global = true)]
    pub site_root: Option<PathBuf>,
}

impl Config {
    pub fn database_url(&self) -> String {
        self.database_url.clone().unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("toolshed.db").display()))
    }

    /// How people sign in (passwords, single sign-on), checked for sense:
    /// someone must be able to.
    pub fn sign_in(&self) -> anyhow::Result<toolshed_domain::Settings> {
        let passwords = match self.passwords.trim() {
            "on" => true,
            "off" => false,
            other => anyhow::bail!("TOOLSHED_PASSWORDS must be on or off, not “{other}”"),
        };
        let sso = self.oidc_issuer.is_some();
        if sso && self.oidc_client_id.trim().is_empty() {
            anyhow::bail!("TOOLSHED_OIDC_ISSUER is set: TOOLSHED_OIDC_CLIENT_ID must be too");
        }
        if !sso && (!passwords || self.registration.trim() == "sso") {
            anyhow::bail!("TOOLSHED_PASSWORDS=off and TOOLSHED_REGISTRATION=sso need single sign-on: set TOOLSHED_OIDC_ISSUER");
        }
        Ok(toolshed_domain::Settings {
            passwords,
            sso_provider: sso.then(|| self.oidc_name.trim().to_owned()),
            sso_admin_group: self.sso_admin_group.clone().filter(|g| !g.trim().is_empty()),
            ..Default::default()
        })
    }

    /// The token `/metrics` asks for, if any: a guessable one is refused.
    pub fn metrics_token(&self) -> anyhow::Result<Option<String>> {
        match self.metrics_token.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) if t.len() < 32 => anyhow::bail!("TOOLSHED_METRICS_TOKEN must be at least 32 characters"),
            token => Ok(token.map(str::to_owned)),
        }
    }

    /// The sandbox's fair shares: the defaults, or what was set (at least 1 each).
    pub fn sandbox(&self) -> anyhow::Result<toolshed_domain::sandbox::SandboxConfig> {
        let defaults = toolshed_domain::sandbox::SandboxConfig::default();
        let share = |name: &str, set: Option<usize>, default: usize| match set {
            Some(0) => Err(anyhow::anyhow!("{name} must be at least 1")),
            set => Ok(set.unwrap_or(default)),
        };
        Ok(toolshed_domain::sandbox::SandboxConfig {
            per_caller: share("TOOLSHED_SANDBOX_PER_CALLER", self.sandbox_per_caller, defaults.per_caller)?,
            per_listing: share("TOOLSHED_SANDBOX_PER_LISTING", self.sandbox_per_listing, defaults.per_listing)?,
            caller_calls: share("TOOLSHED_SANDBOX_CALLER_CALLS", self.sandbox_caller_calls, defaults.caller_calls)?,
            ..defaults
        })
    }

    pub fn base_url(&self) -> url::Url {
        self.base_url.clone().unwrap_or_else(|| format!("http://{}", self.addr).parse().expect("a socket address makes a valid URL"))
    }

    /// Absolute: Leptos reads `pkg/hash.txt` relative to the binary's own
    /// directory unless its path is absolute.
    pub fn site_root(&self) -> PathBuf {
        // Not the sources' folder as the binary was built: builds share a
        // target directory, and the clone that built it may be gone.
        let root = self.site_root.clone().unwrap_or_else(|| PathBuf::from("target/site"));
        std::path::absolute(&root).unwrap_or(root)
    }

    /// The cookie-signing key: configured, or read from (or first written to) the data dir.
    pub fn session_key(&self) -> anyhow::Result<Vec<u8>> {
        self.key("session", self.session_key.as_deref(), 64)
    }

    /// The key that seals stored credentials (see `toolshed_domain::secrets`).
    pub fn secrets_key(&self) -> anyhow::Result<[u8; toolshed_domain::secrets::KEY_LEN]> {
        let key = self.key("secrets", self.secrets_key.as_deref(), toolshed_domain::secrets::KEY_LEN)?;
        Ok(key[..toolshed_domain::secrets::KEY_LEN].try_into().expect("the length was checked"))
    }

    /// A key given in configuration, or else read from (or first generated
    /// into) `DATA_DIR/NAME.key`.
    fn key(&self, name: &str, configured: Option<&str>, min_len: usize) -> anyhow::Result<Vec<u8>> {
        let engine = base64::engine::general_purpose::STANDARD;
        let decode = |s: &str| -> anyhow::Result<Vec<u8>> {
            let key = engine.decode(s.trim()).with_context(|| format!("the {name} key is not base64"))?;
            if key.len() < min_len {
                anyhow::bail!("the {name} key must be at least {min_len} bytes");
            }
            Ok(key)
        };
        if let Some(k) = configured {
            return decode(k);
        }
        let path = self.data_dir.join(format!("{name}.key"));
        if let Ok(existing) = std::fs::read_to_string(&path) {
            return decode(&existing);
        }
        let key: Vec<u8> = (0..min_len).map(|_| rand::random::<u8>()).collect();
        std::fs::create_dir_all(&self.data_dir).with_context(|| format!("cannot create {}", self.data_dir.display()))?;
        write_private(&path, &engine.encode(&key)).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(key)
    }
}

/// Writes a secret readable by its owner only.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(contents.as_bytes())
}
