//! Toolshed's domain layer: the one place that knows the rules.
//!
//! The UI's server functions, the MCP endpoints and the REST routes all call
//! [`Toolshed`]'s subsystems (`ts.tools()`, `ts.accounts()`, …); none of them
//! touches SQL or the sandbox directly.

/// Declares a subsystem's handle: a borrow of the [`Core`], made by
/// [`Toolshed`]'s accessor from outside, or by a subsystem that names it
/// (`Tools::new(self.core)`): inside the domain every use of another
/// subsystem is an import, which the tidy test sees.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $name<'a> {
            core: &'a crate::Core,
        }

        impl<'a> $name<'a> {
            pub(crate) fn new(core: &'a crate::Core) -> Self {
                Self { core }
            }
        }
    };
}

pub mod accounts;
pub mod admin;
pub mod asking;
pub mod audit;
pub mod bundles;
mod cache;
pub mod calls;
pub mod catalog;
pub mod changes;
pub mod code_mode;
pub mod codegen;
pub mod connections;
pub mod demo;
pub use toolshed_types::ids;
pub mod markdown;
pub mod market;
pub mod mcp_sessions;
pub mod membership;
pub mod metrics;
pub mod moderation;
pub mod names;
pub mod oauth;
pub use toolshed_sandbox::outbound;
pub mod passwords;
pub mod playground;
pub mod policy;
pub use toolshed_sandbox as sandbox;
use toolshed_sandbox::redact;
pub mod scan;
pub mod schema;
pub mod secrets;
pub mod semantic;
pub mod serves;
pub mod sessions;
pub mod signin;
pub mod sso;
pub mod store;
pub mod tasks;
pub mod tokens;
pub mod tools;
pub mod upstream;
pub mod usage;
pub mod words;

use std::sync::Arc;

pub use accounts::{AccountError, Department, User};
pub use store::{Db, StoreError};

use crate::changes::ListingChanges;
use crate::sandbox::{Sandbox, SandboxConfig};
use crate::usage::UsageRecorder;

/// The domain shared by every entry point: one accessor per subsystem. Cheap to clone.
#[derive(Clone)]
pub struct Toolshed {
    core: Core,
}

/// What every subsystem shares: the database and its write transactions, the
/// cache epoch, the settings and the running services. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Core(Arc<Inner>);

struct Inner {
    db: Db,
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
    metrics: metrics::Metrics,
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
    /// The bearer token `/metrics` asks for; `None`: no metrics served.
    pub metrics_token: Option<String>,
    /// Where people reach this deployment (links in messages, OAuth callbacks).
    pub public_url: String,
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
            metrics_token: None,
            public_url: "http://127.0.0.1:3000".into(),
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
            core: Core(Arc::new(Inner {
                db,
                settings,
                sandbox,
                usage,
                changes,
                runnables: Default::default(),
                failure_budget: Default::default(),
                calls,
                semantic,
                epoch,
                metrics: Default::default(),
            })),
        }
    }

    pub fn db(&self) -> &Db {
        self.core.db()
    }

    pub fn usage(&self) -> &UsageRecorder {
        self.core.usage()
    }

    /// Every metric of this process, in the Prometheus text format
    /// ([`metrics::CONTENT_TYPE`]), for the holder of the metrics token.
    pub fn render_metrics(&self, bearer: Option<&str>) -> Result<String, metrics::Refused> {
        let Some(token) = &self.settings().metrics_token else { return Err(metrics::Refused::Off) };
        // Digests compared, so the time taken says nothing of the token.
        if bearer.map(tokens::hash) != Some(tokens::hash(token)) {
            return Err(metrics::Refused::WrongToken);
        }
        let pool = self.db().pool();
        Ok(self.core.metrics().render(pool.size(), pool.num_idle()))
    }

    /// Counts an MCP session of `transport` as open until the guard is dropped.
    pub fn mcp_session_opened(&self, transport: &str) -> metrics::Open {
        self.core.metrics().session_opened(transport)
    }

    /// Counts an MCP event stream of `kind` as open until the guard is dropped.
    pub fn mcp_stream_opened(&self, kind: &str) -> metrics::Open {
        self.core.metrics().stream_opened(kind)
    }

    /// Changes to listings, from every replica (for MCP `list_changed`).
    pub fn listing_changes(&self) -> &ListingChanges {
        self.core.listing_changes()
    }

    /// Tool search by meaning, when a sentence model is configured.
    pub fn semantic(&self) -> Option<&semantic::SemanticIndex> {
        self.core.semantic()
    }

    pub fn settings(&self) -> &Settings {
        self.core.settings()
    }

    pub fn sandbox(&self) -> &Sandbox {
        self.core.sandbox()
    }

    pub fn secrets(&self) -> &secrets::SecretBox {
        self.core.secrets()
    }

    /// The catalog as `user` (calling with `token`, if any) may use it.
    pub fn catalog(&self, user: &User, token: Option<&tokens::TokenInfo>) -> catalog::Catalog {
        catalog::Catalog::new(self.core.clone(), user, token)
    }

    pub fn accounts(&self) -> accounts::Accounts<'_> {
        accounts::Accounts::new(&self.core)
    }

    pub fn admin(&self) -> admin::Admin<'_> {
        admin::Admin::new(&self.core)
    }

    pub fn approvals(&self) -> tools::approvals::Approvals<'_> {
        tools::approvals::Approvals::new(&self.core)
    }

    pub fn bundles(&self) -> bundles::Bundles<'_> {
        bundles::Bundles::new(&self.core)
    }

    pub fn calls(&self) -> calls::Calls<'_> {
        calls::Calls::new(&self.core)
    }

    pub fn code_mode(&self) -> code_mode::CodeModes<'_> {
        code_mode::CodeModes::new(&self.core)
    }

    pub fn demo(&self) -> demo::Demo<'_> {
        demo::Demo::new(&self.core)
    }

    pub fn favourites(&self) -> catalog::Favourites<'_> {
        catalog::Favourites::new(&self.core)
    }

    pub fn market(&self) -> market::Market<'_> {
        market::Market::new(&self.core)
    }

    pub fn mcp_sessions(&self) -> mcp_sessions::McpSessions<'_> {
        mcp_sessions::McpSessions::new(&self.core)
    }

    pub fn membership(&self) -> membership::Membership<'_> {
        membership::Membership::new(&self.core)
    }

    pub fn moderation(&self) -> moderation::Moderation<'_> {
        moderation::Moderation::new(&self.core)
    }

    pub fn connections(&self) -> connections::Connections<'_> {
        connections::Connections::new(&self.core)
    }

    pub fn oauth(&self) -> oauth::OAuth<'_> {
        oauth::OAuth::new(&self.core)
    }

    pub fn playground(&self) -> playground::Playground<'_> {
        playground::Playground::new(&self.core)
    }

    pub fn policies(&self) -> policy::Policies<'_> {
        policy::Policies::new(&self.core)
    }

    pub fn sessions(&self) -> sessions::Sessions<'_> {
        sessions::Sessions::new(&self.core)
    }

    pub fn signin(&self) -> signin::SignIn<'_> {
        signin::SignIn::new(&self.core)
    }

    pub fn sso(&self) -> sso::Sso<'_> {
        sso::Sso::new(&self.core)
    }

    pub fn tokens(&self) -> tokens::Tokens<'_> {
        tokens::Tokens::new(&self.core)
    }

    pub fn tasks(&self) -> tasks::Tasks<'_> {
        tasks::Tasks::new(&self.core)
    }

    pub fn tools(&self) -> tools::Tools<'_> {
        tools::Tools::new(&self.core)
    }

    pub fn upstreams(&self) -> upstream::Upstreams<'_> {
        upstream::Upstreams::new(&self.core)
    }
}

/// Whether a run waited its turn for a worker (code mode's member calls run
/// nested on their caller's worker, so have no queue time to count).
#[derive(Clone, Copy)]
pub(crate) enum Waited {
    ForAWorker,
    Nested,
}

/// The allow-list a run's `$fetch`es are counted by: none for a replay, whose
/// `$fetch`es are answered from its recording and never go out.
pub(crate) fn fetches_counted_by(request: &sandbox::RunRequest) -> Option<Vec<String>> {
    request.replay.is_none().then(|| request.fetch_allow.clone())
}

impl Core {
    pub(crate) fn db(&self) -> &Db {
        &self.0.db
    }

    /// A write transaction: its commit empties the call cache.
    pub(crate) async fn begin(&self) -> Result<store::Tx, StoreError> {
        Ok(store::Tx::new(self.0.db.begin().await?, self.0.epoch.clone()))
    }

    pub(crate) fn usage(&self) -> &UsageRecorder {
        &self.0.usage
    }

    /// A call that ran, or was refused for its arguments or a full sandbox, of
    /// `listing` (its slug): to the usage writer and to the metrics.
    pub(crate) fn record_call(&self, listing: &str, record: usage::UsageRecord) {
        let seconds = record.duration_us as f64 / 1e6;
        self.0.metrics.call(listing, &record.transport, record.outcome.as_str(), seconds);
        self.0.usage.record(record);
    }

    pub(crate) fn metrics(&self) -> &metrics::Metrics {
        &self.0.metrics
    }

    /// Runs `request` on the sandbox inside `span` (which has an `outcome`
    /// field to fill), counting the run and its `$fetch`es in the metrics.
    pub(crate) async fn run_sandboxed(
        &self,
        request: sandbox::RunRequest,
        lane: sandbox::Lane,
        span: tracing::Span,
    ) -> Result<sandbox::RunOutcome, sandbox::SandboxError> {
        let allow = fetches_counted_by(&request);
        let ran = tracing::Instrument::instrument(self.sandbox().run(request, lane), span.clone()).await;
        self.count_run(ran.as_ref(), allow.as_deref(), Waited::ForAWorker, &span);
        ran
    }

    /// Counts a run that ended as `ran` in the metrics (its `$fetch`es
    /// labelled by `allow`, from [`fetches_counted_by`]) and records its
    /// outcome on `span`.
    pub(crate) fn count_run(
        &self,
        ran: Result<&sandbox::RunOutcome, &sandbox::SandboxError>,
        allow: Option<&[String]>,
        waited: Waited,
        span: &tracing::Span,
    ) {
        let metrics = &self.0.metrics;
        let result = match ran {
            Ok(outcome) => usage::Outcome::of_run(&outcome.result).as_str(),
            Err(sandbox::SandboxError::Busy) => "busy",
            Err(sandbox::SandboxError::TooManyCalls) => "caller_limit",
            Err(sandbox::SandboxError::WorkerLost) => "worker_lost",
        };
        span.record("outcome", result);
        let Ok(outcome) = ran else {
            return metrics.sandbox_run(result, None, None);
        };
        let queued = matches!(waited, Waited::ForAWorker).then_some(outcome.queued);
        metrics.sandbox_run(result, queued, Some(outcome.duration));
        if let Some(allow) = allow {
            for fetch in &outcome.fetches {
                let (host, status) = metrics::fetch_labels(allow, fetch);
                metrics.fetch(&host, &status);
            }
        }
    }

    /// Changes to listings, from every replica (for MCP `list_changed`).
    pub(crate) fn listing_changes(&self) -> &ListingChanges {
        &self.0.changes
    }

    /// Tool search by meaning, when a sentence model is configured.
    pub(crate) fn semantic(&self) -> Option<&semantic::SemanticIndex> {
        self.0.semantic.as_deref()
    }

    pub(crate) fn runnables(&self) -> &tools::RunnableCache {
        &self.0.runnables
    }

    pub(crate) fn failure_budget(&self) -> &tools::FailureBudget {
        &self.0.failure_budget
    }

    pub(crate) fn call_cache(&self) -> &cache::CallCache {
        &self.0.calls
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.0.settings
    }

    pub(crate) fn sandbox(&self) -> &Sandbox {
        &self.0.sandbox
    }

    pub(crate) fn secrets(&self) -> &secrets::SecretBox {
        &self.0.settings.secrets
    }
}

/// Milliseconds since the Unix epoch: every `*_at`/`*_ms` column uses it.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}
