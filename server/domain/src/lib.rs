//! Toolshed's domain layer: the one place that knows the rules.
//!
//! The UI's server functions, the MCP endpoints and the REST routes all call
//! [`Toolshed`]; none of them touches SQL or the sandbox directly.

pub mod accounts;
pub mod admin;
pub mod audit;
pub mod bundles;
mod cache;
pub mod calls;
pub mod catalog;
pub mod changes;
pub mod code_mode;
pub mod codegen;
mod demo;
pub mod ids;
pub mod markdown;
pub mod market;
pub mod mcp_sessions;
pub mod membership;
pub mod moderation;
pub mod names;
pub mod oauth;
pub mod outbound;
pub mod passwords;
pub mod playground;
pub mod policy;
mod redact;
pub mod sandbox;
pub mod scan;
pub mod schema;
pub mod secrets;
pub mod semantic;
pub mod sessions;
pub mod signin;
pub mod sso;
pub mod store;
pub mod tokens;
pub mod tools;
pub mod upstream;
pub mod usage;

use std::sync::Arc;

pub use accounts::{AccountError, Department, User};
pub use store::{Db, StoreError};

use crate::changes::ListingChanges;
use crate::sandbox::{Sandbox, SandboxConfig};
use crate::usage::UsageRecorder;

/// The domain handle shared by every entry point. Cheap to clone.
#[derive(Clone)]
pub struct Toolshed {
    pub db: Db,
    inner: Arc<Inner>,
}

struct Inner {
    settings: Settings,
    sandbox: Sandbox,
    usage: UsageRecorder,
    changes: ListingChanges,
    runnables: tools::RunnableCache,
    failure_budget: tools::FailureBudget,
    calls: cache::CallCache,
    /// Tool search by meaning, with a sentence model.
    semantic: Option<Arc<semantic::SemanticIndex>>,
    /// Moved after every write commits (here) or is seen (the change feed).
    epoch: store::Epoch,
}

/// Knobs the domain needs from configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Failed sign-ins at one account from one source (an address, or a
    /// known device) within [`Settings::login_window_ms`] before that source is
    /// refused at that account (an address at all accounts: [`signin::ADDRESS_FACTOR`] times this).
    pub login_failures_per_account: i64,
    pub login_window_ms: i64,
    pub sandbox: SandboxConfig,
    /// Seals stored credentials; all replicas must share its key.
    pub secrets: secrets::SecretBox,
    /// Internal hosts requests on a user's behalf may reach (none by default).
    pub internal_hosts: outbound::InternalHosts,
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: signin::TrustedProxies,
    /// How people get an account (invitation by default).
    pub registration: membership::RegistrationPolicy,
    /// Whether local passwords sign in (off when the identity provider is the only way in).
    pub passwords: bool,
    /// The identity provider's name for the sign-in button; `None` without single sign-on.
    pub sso_provider: Option<String>,
    /// Members of this provider group are admins, at every single sign-on.
    pub sso_admin_group: Option<String>,
    /// The sentence model for tool search by meaning; `None`: full-text only.
    pub sentence_model: Option<semantic::SentenceModel>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            login_failures_per_account: 5,
            login_window_ms: 15 * 60 * 1000,
            sandbox: SandboxConfig::default(),
            secrets: secrets::SecretBox::ephemeral(),
            internal_hosts: Default::default(),
            trusted_proxies: Default::default(),
            registration: Default::default(),
            passwords: true,
            sso_provider: None,
            sso_admin_group: None,
            sentence_model: None,
        }
    }
}

impl Toolshed {
    /// Starts the sandbox's worker threads and the usage writer (so it must be
    /// called inside a tokio runtime); failing to start threads at start-up
    /// leaves nothing sensible to do but stop.
    pub fn new(db: Db, settings: Settings) -> Self {
        let sandbox = Sandbox::new(settings.sandbox.clone()).expect("start the sandbox worker threads");
        let usage = UsageRecorder::start(db.clone());
        let epoch = store::Epoch::default();
        let changes = ListingChanges::start(db.clone(), epoch.clone());
        let calls = cache::CallCache::new(&epoch);
        let semantic = settings.sentence_model.clone().map(|model| {
            let index = Arc::new(semantic::SemanticIndex::new(model));
            index.start(db.clone(), changes.clone());
            index
        });
        Self {
            db,
            inner: Arc::new(Inner {
                settings,
                sandbox,
                usage,
                changes,
                runnables: Default::default(),
                failure_budget: Default::default(),
                calls,
                semantic,
                epoch,
            }),
        }
    }

    /// A write transaction: its commit empties the call cache.
    pub(crate) async fn begin(&self) -> Result<store::Tx, StoreError> {
        Ok(store::Tx::new(self.db.begin().await?, self.inner.epoch.clone()))
    }

    pub fn usage(&self) -> &UsageRecorder {
        &self.inner.usage
    }

    /// Changes to listings, from every replica (for MCP `list_changed`).
    pub fn listing_changes(&self) -> &ListingChanges {
        &self.inner.changes
    }

    /// Tool search by meaning, when a sentence model is configured.
    pub fn semantic(&self) -> Option<&semantic::SemanticIndex> {
        self.inner.semantic.as_deref()
    }

    pub(crate) fn runnables(&self) -> &tools::RunnableCache {
        &self.inner.runnables
    }

    pub(crate) fn failure_budget(&self) -> &tools::FailureBudget {
        &self.inner.failure_budget
    }

    pub(crate) fn call_cache(&self) -> &cache::CallCache {
        &self.inner.calls
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.inner.sandbox
    }

    pub fn secrets(&self) -> &secrets::SecretBox {
        &self.inner.settings.secrets
    }
}

/// Milliseconds since the Unix epoch: every `*_at`/`*_ms` column uses it.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}
