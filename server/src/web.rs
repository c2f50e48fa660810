//! The HTTP server: assembles the Leptos app, sessions, cross-site protection
//! and static files into one axum router, and serves it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use axum::body::HttpBody;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use axum::Router;
use leptos::prelude::*;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tokio::sync::watch;
use toolshed_domain::sessions::DbSessionStore;
use toolshed_domain::Toolshed;
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::trace::TraceLayer;
use tower_sessions::cookie::{Key, SameSite};
use tower_sessions::{Expiry, SessionManagerLayer};

use crate::config::Config;

/// Everything a request handler may need.
#[derive(Clone, axum::extract::FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub toolshed: Toolshed,
}

/// Bodies above this are refused before they are read (413).
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Do not seed the demo department on the first start of an empty database.
    #[arg(long, env = "TOOLSHED_NO_DEMO")]
    pub no_demo: bool,
    /// MCP sessions: `stateful` (default; `Mcp-Session-Id` sessions kept in the
    /// database, so any replica behind a load balancer resumes any session) or
    /// `stateless` (every request stands alone; no list-change notifications).
    #[arg(long, env = "TOOLSHED_MCP_SESSIONS", value_enum, default_value = "stateful")]
    pub mcp_sessions: crate::mcp::SessionMode,
    /// Seconds the calls in flight at SIGTERM may take to finish (and deliver their
    /// results) before the server exits without them.
    #[arg(long, env = "TOOLSHED_SHUTDOWN_GRACE", default_value_t = 30)]
    pub shutdown_grace: u64,
}

impl Default for ServeArgs {
    fn default() -> Self {
        Self { no_demo: false, mcp_sessions: crate::mcp::SessionMode::Stateful, shutdown_grace: 30 }
    }
}

pub async fn serve(config: Config, args: ServeArgs, toolshed: Toolshed) -> anyhow::Result<()> {
    if let Some((username, password)) = first_start(&toolshed, &args).await? {
        // Printed once, on the first start only: there is no default password.
        println!("\n  First start: created the administrator account.\n    username: {username}\n    password: {password}\n  Sign in and change it on the Account page. It will not be shown again.\n");
    }
    let server = Server::bind(config, &args, toolshed).await?;
    // Signal handlers first: a SIGTERM right after the "serving" line must shut down cleanly.
    let signal = shutdown_signal();
    println!("Toolshed is serving on http://{}", server.addr());
    server.run(signal).await
}

/// On the first start of an empty database: the administrator account (its
/// username and password, to be shown once) and, unless `--no-demo`, the demo department.
pub async fn first_start(toolshed: &Toolshed, args: &ServeArgs) -> anyhow::Result<Option<(String, String)>> {
    let admin = toolshed.accounts().ensure_first_admin().await?;
    if admin.is_some() && !args.no_demo {
        toolshed.demo().seed_demo().await?;
    }
    Ok(admin)
}

/// The server, listening but not yet serving: `toolshed serve` and the tests
/// in process both run it.
pub struct Server {
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: Shutdown,
    toolshed: Toolshed,
    grace: Duration,
}

impl Server {
    /// Listens on the configured address and builds the router.
    pub async fn bind(config: Config, args: &ServeArgs, toolshed: Toolshed) -> anyhow::Result<Self> {
        let shutdown = Shutdown::default();
        let listener = tokio::net::TcpListener::bind(config.addr).await.with_context(|| format!("cannot listen on {}", config.addr))?;
        // Port 0 asks for any free port: links in pages (endpoints, invitations) name the one we got.
        let config = Config { addr: listener.local_addr()?, ..config };
        let app = router(&config, toolshed.clone(), args.mcp_sessions, shutdown.clone())?;
        tracing::info!(addr = %config.addr, base_url = %config.base_url(), "Toolshed is listening");
        Ok(Self { listener, app, shutdown, toolshed, grace: Duration::from_secs(args.shutdown_grace) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// Serves until `stop` resolves (SIGTERM, for the binary), then shuts down
    /// in order (`Shutdown`), flushes usage and closes the database.
    pub async fn run(self, stop: impl std::future::Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        let Self { listener, app, shutdown, toolshed, grace } = self;
        let addr = listener.local_addr()?;
        let listener = DrainingListener { inner: Some(listener), queued: Vec::new(), addr, shutdown: shutdown.clone() };
        // Without TCP_NODELAY, small SSE/JSON replies wait for delayed ACKs (~40 ms).
        let listener = listener.tap_io(|stream| {
            let _ = stream.tcp.set_nodelay(true);
        });
        // Dropped (so ended) with the server: in a process that serves several, they stop with theirs.
        let mut chores = tokio::task::JoinSet::new();
        chores.spawn(sweep_expired_sessions(toolshed.clone()));
        chores.spawn(refresh_external_servers(toolshed.clone()));
        let server = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
            .with_graceful_shutdown(shutdown.clone().sequence(stop));
        tokio::select! {
            served = server => served?,
            () = async { shutdown.draining.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!("calls still running {grace:?} after SIGTERM; stopping without them");
            }
        }
        // Calls answered before the shutdown are recorded before the pool closes.
        toolshed.usage().flush().await;
        toolshed.db().close().await;
        Ok(())
    }
}

/// After SIGTERM the server goes on answering on open connections, each answer
/// saying `Connection: close`, until every connection but the event streams has
/// closed (at most `DRAIN_MAX`), and only then stops reading requests: a client
/// that sends on a kept-alive connection gets its answer instead of a reset,
/// however late it sends (new connections are refused from the signal on, and
/// only then is a client told to close, so its next connection is refused cleanly).
/// A call still running then finishes on its connection (the grace period).
const DRAIN_MAX: Duration = Duration::from_secs(4);

/// Shutting down in order: refuse new connections and end the idle event
/// streams at once, drain (keep-alive ends), let every call in flight deliver
/// its result, then exit (`serve` bounds it all by the grace period).
#[derive(Clone, Default)]
pub struct Shutdown {
    draining: tokio_util::sync::CancellationToken,
    /// Cancelled once the listening socket is closed: from then on a new
    /// connection is refused, so whatever the shutdown does next (ending the
    /// idle streams first) is seen by clients after the refusal holds.
    refusing: tokio_util::sync::CancellationToken,
    /// Cancelled at SIGTERM, once new connections are refused: event streams end once no call's answer is due on
    /// them (a standalone Streamable HTTP stream at once; a legacy SSE stream
    /// after the answers to the calls it carries).
    pub streams: tokio_util::sync::CancellationToken,
    connections: Connections,
}

impl Shutdown {
    /// Resolves when graceful shutdown may begin: after `signal`, the drain.
    async fn sequence(self, signal: impl std::future::Future<Output = ()>) {
        signal.await;
        self.draining.cancel();
        self.refusing.cancelled().await;
        self.streams.cancel();
        let mut changed = self.connections.0.subscribe();
        let _ = tokio::time::timeout(DRAIN_MAX, changed.wait_for(|open| open.values().all(|streaming| *streaming))).await;
    }
}

/// The open connections, by peer address, each marked once it serves an event
/// stream opened by a GET (those end when `Shutdown::streams` is cancelled; a
/// POST answered with a stream is a call in flight, drained like any request).
/// A watch channel, so that the drain wakes on each change instead of polling.
#[derive(Clone)]
struct Connections(std::sync::Arc<watch::Sender<std::collections::HashMap<SocketAddr, bool>>>);

impl Default for Connections {
    fn default() -> Self {
        Self(std::sync::Arc::new(watch::Sender::new(std::collections::HashMap::new())))
    }
}

impl Connections {
    /// `tcp`, known to the drain until it is dropped.
    fn track(&self, tcp: tokio::net::TcpStream, peer: SocketAddr) -> (TrackedStream, SocketAddr) {
        self.0.send_modify(|open| {
            open.insert(peer, false);
        });
        (TrackedStream { tcp, _tracked: Tracked { connections: self.clone(), peer } }, peer)
    }

    fn streaming(&self, peer: SocketAddr) {
        self.0.send_if_modified(|open| open.get_mut(&peer).map(|streaming| *streaming = true).is_some());
    }
}

/// Forgets its connection when the connection is dropped.
struct Tracked {
    connections: Connections,
    peer: SocketAddr,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.connections.0.send_modify(|open| {
            open.remove(&self.peer);
        });
    }
}

/// Takes the quotes off quoted cookie values (`name="value"`, which RFC 6265
/// allows and some HTTP clients send) before the session layer reads them.
async fn unquote_cookies(mut req: Request, next: Next) -> Response {
    let quoted = req.headers().get_all(header::COOKIE).iter().any(|v| v.as_bytes().contains(&b'"'));
    if quoted {
        let unquoted: Vec<header::HeaderValue> = req
            .headers()
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .map(|pair| match pair.split_once('=') {
                        Some((name, value)) => {
                            let value = value.trim();
                            let value = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value);
                            format!("{}={value}", name.trim())
                        }
                        None => pair.trim().to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .filter_map(|v| header::HeaderValue::from_str(&v).ok())
            .collect();
        req.headers_mut().remove(header::COOKIE);
        for v in unquoted {
            req.headers_mut().append(header::COOKIE, v);
        }
    }
    next.run(req).await
}

/// The listening socket, closed as soon as draining starts: new connections are
/// refused cleanly, while the open ones are served (axum's own graceful
/// shutdown would close idle kept-alive connections at once, under a client
/// that is just sending on one).
struct DrainingListener {
    inner: Option<tokio::net::TcpListener>,
    /// Connections the kernel completed before the socket closed, still to be
    /// served: tracked from the moment they are taken, so the drain waits for them.
    queued: Vec<(TrackedStream, SocketAddr)>,
    addr: SocketAddr,
    shutdown: Shutdown,
}

impl axum::serve::Listener for DrainingListener {
    type Io = TrackedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Some(queued) = self.queued.pop() {
                return queued;
            }
            let Some(listener) = &self.inner else { return std::future::pending().await };
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((tcp, peer)) => return self.shutdown.connections.track(tcp, peer),
                    // Out of file descriptors and the like: wait, as axum's own listener does.
                    Err(e) => {
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
                () = self.shutdown.draining.cancelled() => {
                    let taken = self.inner.take().map(close_listener).unwrap_or_default();
                    self.queued = taken.into_iter().map(|(tcp, peer)| self.shutdown.connections.track(tcp, peer)).collect();
                    self.shutdown.refusing.cancel();
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// Closes the listening socket, taking first every connection the kernel has
/// completed but nobody accepted: closing would reset those, under clients that
/// have already sent their request.
fn close_listener(listener: tokio::net::TcpListener) -> Vec<(tokio::net::TcpStream, SocketAddr)> {
    let Ok(listener) = listener.into_std() else { return Vec::new() };
    // Non-blocking (tokio's setting): the loop ends at the first "would block".
    std::iter::from_fn(|| listener.accept().ok())
        .filter_map(|(tcp, peer)| {
            tcp.set_nonblocking(true).ok()?;
            Some((tokio::net::TcpStream::from_std(tcp).ok()?, peer))
        })
        .collect()
}

/// A connection the drain knows about for as long as it is open.
struct TrackedStream {
    tcp: tokio::net::TcpStream,
    _tracked: Tracked,
}

impl tokio::io::AsyncRead for TrackedStream {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for TrackedStream {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Keeps connections usable after early answers, and closes them while
/// draining. A request's body is lent to the handler; whatever it left unread
/// (a 401 before an MCP message was read, a refusal before a form was) is read
/// and dropped here, within bounds, before the answer goes out. Past the
/// bounds the answer says `Connection: close`: hyper closes a connection whose
/// body was left unread, and a client not told so sends its next request into
/// the closed connection.
async fn close_connections(State(shutdown): State<Shutdown>, req: Request, next: Next) -> Response {
    let peer = req.extensions().get::<axum::extract::ConnectInfo<SocketAddr>>().map(|c| c.0);
    let get = req.method() == Method::GET;
    let (req, lent) = LentBody::lend(req);
    let mut res = next.run(req).await;
    let unread = lent.0.lock().expect("lent body lock").take();
    let read_to_end = match unread {
        Some(rest) => matches!(tokio::time::timeout(UNREAD_BODY_TIME, axum::body::to_bytes(rest, UNREAD_BODY_BYTES)).await, Ok(Ok(_))),
        None => true,
    };
    let stream = get && crate::mcp::is_event_stream(&res);
    if let (true, Some(peer)) = (stream, peer) {
        shutdown.connections.streaming(peer);
    }
    // Only once new connections are refused: a client told to close before then
    // would reconnect into the closing listening socket, and might be reset.
    if shutdown.refusing.is_cancelled() || !read_to_end {
        res.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    res
}

/// What of a body its handler left unread is read before answering (more
/// closes the connection instead): one MCP message's worth.
const UNREAD_BODY_BYTES: usize = 1024 * 1024;
/// How long the rest of such a body may take to arrive.
const UNREAD_BODY_TIME: Duration = Duration::from_secs(2);

/// A request's body as its handler sees it: read through the slot, which the
/// middleware takes back once the handler has answered.
#[derive(Clone)]
struct LentBody(std::sync::Arc<std::sync::Mutex<Option<axum::body::Body>>>);

impl LentBody {
    fn lend(req: Request) -> (Request, Self) {
        let (parts, body) = req.into_parts();
        let lent = Self(std::sync::Arc::new(std::sync::Mutex::new(Some(body))));
        (Request::from_parts(parts, axum::body::Body::new(lent.clone())), lent)
    }
}

impl HttpBody for LentBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        match self.0.lock().expect("lent body lock").as_mut() {
            Some(body) => std::pin::Pin::new(body).poll_frame(cx),
            None => std::task::Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.lock().expect("lent body lock").as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.0.lock().expect("lent body lock").as_ref().map(HttpBody::size_hint).unwrap_or_default()
    }
}

pub fn router(config: &Config, toolshed: Toolshed, mcp_sessions: crate::mcp::SessionMode, shutdown: Shutdown) -> anyhow::Result<Router> {
    let site_root = config.site_root();
    if !site_root.join("pkg").is_dir() {
        tracing::warn!(site_root = %site_root.display(), "no built site here: pages are served but will not come alive (start from the clone, or pass --site-root)");
    }
    // The build names the app's files after their contents and lists the names
    // in pkg/hash.txt (Leptos looks for it beside the binary; an absolute path wins).
    let hashes = site_root.join("pkg").join(HASH_FILE);
    let leptos_options = LeptosOptions::builder()
        .output_name("toolshed")
        .site_root(site_root.to_string_lossy().into_owned())
        .site_pkg_dir("pkg")
        .hash_files(hashes.exists())
        .hash_file(hashes.to_string_lossy().as_ref().into())
        .site_addr(config.addr)
        .build();
    let base_url = config.base_url();
    let state = AppState { leptos_options: leptos_options.clone(), toolshed: toolshed.clone() };
    let routes = page_routes().to_vec();

    let key = Key::try_from(config.session_key()?.as_slice()).context("invalid session key")?;
    let sessions = SessionManagerLayer::new(DbSessionStore::new(toolshed.db().clone()))
        .with_name("toolshed_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(base_url.scheme() == "https")
        .with_expiry(Expiry::OnInactivity(tower_sessions::cookie::time::Duration::days(14)))
        .with_signed(key);

    let context = {
        let toolshed = toolshed.clone();
        let public = app::PublicUrl(base_url.as_str().trim_end_matches('/').to_owned());
        let chunks = app::PageChunks::load(&site_root.join("pkg"));
        move || {
            // The nonce the server's policy for this page names (`page_policy`).
            let nonce = use_context::<axum::http::request::Parts>().and_then(|p| p.extensions.get::<app::PageNonce>().cloned());
            if let Some(app::PageNonce(nonce)) = nonce {
                provide_context(leptos::nonce::Nonce::from_value(nonce));
            }
            provide_context(toolshed.clone());
            provide_context(public.clone());
            provide_context(chunks.clone());
        }
    };
    let oauth = crate::oauth::OAuth::new(toolshed.clone(), &base_url);
    let pages = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        // The person's answer on the consent page: a form post with the session cookie.
        .route(crate::oauth::CONSENT, crate::oauth::consent_route(oauth.clone()))
        // Streams a playground turn; a POST with the session cookie, so behind the cross-site check below.
        .route(crate::playground::PATH, crate::playground::route())
        .nest_service("/pkg", site_assets(&site_root))
        .leptos_routes_with_context(&state, routes, context.clone(), {
            let options = leptos_options.clone();
            move || app::shell(options.clone())
        })
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, app::shell))
        .layer(axum::middleware::from_fn_with_state(Origins::new(&base_url), refuse_cross_site))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .with_state(state);
    // MCP clients are not browsers: no cross-site check (a signed-in browser may
    // only call from our own origin, see `mcp::authorize`), and rmcp limits bodies.
    let site_origin = base_url.origin().ascii_serialization();
    let mcp =
        crate::mcp::routes(toolshed.clone(), mcp_sessions, allowed_hosts(config), site_origin, oauth.clone(), shutdown.streams.clone());
    // The REST API is for scripts: bearer tokens only, so no cookie to protect from other sites.
    let rest = crate::rest::routes(toolshed.clone())
        .merge(crate::registry::routes(toolshed.clone(), &base_url))
        .merge(crate::metrics::routes(toolshed.clone()));
    let sso = crate::sso::routes(crate::sso::Provider::from_config(config)?, toolshed.clone()).merge(crate::connect::routes(toolshed));
    let app = with_security_headers(pages.merge(sso).merge(mcp).merge(rest).merge(crate::oauth::routes(oauth)))
        .layer(sessions)
        .layer(axum::middleware::from_fn(unquote_cookies))
        // Pages and JSON are compressed per answer (/pkg is precompressed at build time). SSE is never compressed.
        .layer(CompressionLayer::new())
        .layer(axum::middleware::from_fn_with_state(shutdown, close_connections))
        .layer(TraceLayer::new_for_http().make_span_with(crate::telemetry::request_span).on_response(crate::telemetry::response_status));
    Ok(app)
}

/// The app's pages, as Leptos lists them for the router: made once for the
/// process. Leptos makes the list by rendering the app with every resource in
/// the process held back (`SuppressResourceLoad`, a flag for the whole
/// process), so a page that another server in the process rendered meanwhile
/// would wait for its data for ever (the tests serve many at once). Made
/// before the first router exists, it never overlaps a render.
fn page_routes() -> &'static [leptos_axum::AxumRouteListing] {
    static ROUTES: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(app::App))
}

/// Headers every response carries. Pages get their own Content-Security-Policy
/// (with the nonce of their inline scripts, see `page_policy`); everything
/// else (JSON, files, SVG) may load and run nothing, and nothing may frame it.
/// No Referer leaves the site: MCP URLs may carry `?token=`.
fn with_security_headers(app: Router) -> Router {
    use tower_http::set_header::SetResponseHeaderLayer as Set;
    let value = header::HeaderValue::from_static;
    app.layer(axum::middleware::from_fn(page_policy))
        .layer(Set::if_not_present(header::CONTENT_SECURITY_POLICY, value("default-src 'none'; frame-ancestors 'none'; sandbox")))
        .layer(Set::overriding(header::X_CONTENT_TYPE_OPTIONS, value("nosniff")))
        .layer(Set::overriding(header::X_FRAME_OPTIONS, value("DENY")))
        .layer(Set::overriding(header::REFERRER_POLICY, value("same-origin")))
}

/// Chooses the nonce of the page this request may render (given to Leptos
/// through the request, see the context in `router`) and sends an HTML
/// answer's policy with it, unless the page set a wider one itself (the
/// consent page's form targets).
async fn page_policy(mut req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let nonce = app::PageNonce::fresh();
    req.extensions_mut().insert(nonce.clone());
    let mut res = next.run(req).await;
    let html = res.headers().get(header::CONTENT_TYPE).is_some_and(|t| t.as_bytes().starts_with(b"text/html"));
    if html && !res.headers().contains_key(header::CONTENT_SECURITY_POLICY) {
        if let Ok(policy) = header::HeaderValue::from_str(&app::page_policy(&nonce.0)) {
            res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, policy);
        }
    }
    res
}

const HASH_FILE: &str = "hash.txt";

/// The wasm, JS and CSS under `/pkg`, served as compressed at build time
/// (`scripts/build.sh` writes a `.br` and a `.gz` beside each file): brotli at
/// its best level, which is too slow to do per request. The app's files are
/// named after their contents (`toolshed.HASH.wasm`), so browsers keep them for
/// a year without asking again; any other file is checked each time (`no-cache`:
/// a 304 when unchanged) rather than run stale against a newer server.
fn site_assets(site_root: &std::path::Path) -> axum::routing::MethodRouter {
    let files = tower_http::services::ServeDir::new(site_root.join("pkg")).precompressed_br().precompressed_gzip();
    axum::routing::get_service(files).layer(axum::middleware::map_response(|uri: axum::http::Uri, mut res: Response| async move {
        let lifetime = if is_content_named(uri.path()) { "public, max-age=31536000, immutable" } else { "no-cache" };
        res.headers_mut().insert(header::CACHE_CONTROL, header::HeaderValue::from_static(lifetime));
        res
    }))
}

/// `/toolshed.0123456789abcdef.wasm`, `/chunk_7.0123456789abcdef.wasm`: a name
/// that changes whenever the contents do (scripts/site.mjs names them).
fn is_content_named(path: &str) -> bool {
    let mut parts = path.trim_start_matches('/').split('.');
    let (Some(stem), Some(hash), Some(_ext), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else { return false };
    !stem.contains('/') && hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Host headers MCP requests may carry (DNS-rebinding protection): the base
/// URL's host, and loopback names for local clients.
fn allowed_hosts(config: &Config) -> Vec<String> {
    let base = config.base_url();
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
    if let Some(h) = base.host_str() {
        hosts.push(h.trim_start_matches('[').trim_end_matches(']').to_owned());
    }
    hosts
}

/// Origins allowed to send state-changing requests: the base URL's, and the
/// origin of the Host the request was sent to (same-origin under another name,
/// e.g. 127.0.0.1 vs localhost; a session cookie never crosses host names).
#[derive(Clone)]
struct Origins {
    base: String,
}

impl Origins {
    fn new(base: &url::Url) -> Self {
        Self { base: base.origin().ascii_serialization() }
    }

    fn allows(&self, origin: &str, host: Option<&str>) -> bool {
        if origin == self.base {
            return true;
        }
        let Some(host) = host else { return false };
        let authority = origin.split_once("://").map(|(_, a)| a);
        authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
    }
}

/// Refuses state-changing browser requests that come from another site
/// (CSRF): the Origin header must be ours, and when a browser sends no Origin,
/// Sec-Fetch-Site must not say cross-site.
async fn refuse_cross_site(State(origins): State<Origins>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let allowed = match headers.get(header::ORIGIN).map(|o| o.to_str().unwrap_or("null")) {
        Some(origin) => origins.allows(origin, host),
        None => headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) != Some("cross-site"),
    };
    if allowed {
        next.run(req).await
    } else {
        tracing::warn!(method = %req.method(), uri = %req.uri(), "refused a cross-site request");
        (StatusCode::FORBIDDEN, "Cross-site request refused.").into_response()
    }
}

/// Deletes expired sign-in sessions and idle MCP sessions, every ten minutes.
async fn sweep_expired_sessions(toolshed: Toolshed) {
    let store = DbSessionStore::new(toolshed.db().clone());
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    loop {
        tick.tick().await;
        if let Err(e) = store.delete_expired().await {
            tracing::warn!(error = %e, "could not delete expired sessions");
        }
        if let Err(e) = toolshed.mcp_sessions().delete_idle_mcp_sessions().await {
            tracing::warn!(error = %e, "could not delete idle MCP sessions");
        }
    }
}

/// Re-imports external MCP servers' tool lists now and then (see
/// `toolshed_domain::upstream` for why no connection is held open for it).
async fn refresh_external_servers(toolshed: Toolshed) {
    let mut tick = tokio::time::interval(toolshed_domain::upstream::REFRESH_EVERY);
    tick.tick().await; // the first tick is immediate: servers were refreshed when registered
    loop {
        tick.tick().await;
        if let Err(e) = toolshed.upstreams().refresh_all_mcp_servers().await {
            tracing::warn!(error = %e, "could not refresh external MCP servers");
        }
    }
}

/// Resolves on the first SIGINT or SIGTERM. The handlers are installed when this
/// is called, not when it is first polled: a signal that arrives between
/// "serving" and the server's first poll must stop it gracefully, not kill it.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, Signal, SignalKind};
    async fn next(s: Option<&mut Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    async move {
        tokio::select! {
            _ = next(interrupt.as_mut()) => {},
            _ = next(terminate.as_mut()) => {},
        }
        tracing::info!("shutting down");
    }
}
