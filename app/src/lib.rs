#![recursion_limit = "256"]
//! Toolshed's UI: Leptos components, pages and server functions. Compiled twice:
//! with `ssr` into the server (rendering, server-function bodies) and with
//! `hydrate` into the wasm bundle (interactivity). Only `ssr` sees the domain.

pub mod api;
pub mod args;
#[cfg(feature = "ssr")]
mod chunks;
mod components;
pub mod error;
mod pages;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, HashedStylesheet, MetaTags, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{path, Lazy, LazyRoute, SsrMode};

use crate::api::Logout;
#[cfg(feature = "ssr")]
pub use crate::chunks::PageChunks;
use crate::components::Header;
use crate::pages::market::Browse;
use crate::pages::tools::{MyTools, NewBundle, NewTool, ToolEditor, ToolListing};
use crate::pages::{
    Account, Admin, Approvals, AuditLog, BundleEditor, BundleListing, Consent, ExternalServers, Home, LoginPage, NotFound, People,
    Playground, RegisterPage, ToolHealth,
};

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <HashedStylesheet id="toolshed" options=options.clone() />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// The nonce of one page's inline scripts. The server chooses it per request
/// (a request extension), sends the page's policy with it, and gives it to
/// Leptos as the page's `Nonce`: the header never depends on the render
/// reaching Leptos's response options. (It once did: about 1 page load in
/// 1,000 left without it and could not run, cause not found in Leptos.)
#[cfg(feature = "ssr")]
#[derive(Clone, Debug)]
pub struct PageNonce(pub String);

#[cfg(feature = "ssr")]
impl PageNonce {
    pub fn fresh() -> Self {
        PageNonce(leptos::nonce::Nonce::new().to_string())
    }
}

/// A page's Content-Security-Policy when its forms answer only to this site.
#[cfg(feature = "ssr")]
pub fn page_policy(nonce: &str) -> String {
    page_policy_posting_to(nonce, "")
}

/// Lets this page's forms also be answered by a redirect to `form_targets`
/// (the OAuth consent page's answer goes to the client); the server sends the
/// plain page policy to every other page.
#[cfg(feature = "ssr")]
pub(crate) fn set_page_policy(form_targets: &str) {
    let (Some(res), Some(nonce)) = (use_context::<leptos_axum::ResponseOptions>(), leptos::nonce::use_nonce()) else { return };
    if let Ok(value) = http::HeaderValue::from_str(&page_policy_posting_to(&nonce.to_string(), form_targets)) {
        res.insert_header(http::header::CONTENT_SECURITY_POLICY, value);
    }
}

/// A page may run only our own scripts and the inline ones Leptos marks with
/// the page's nonce (hydration data), so injected markup cannot run script;
/// nothing may frame it. Inline styles stay allowed: the code editor injects
/// its own and `style=` attributes carry indentation. Its forms may also be
/// answered by a redirect to `targets` (CSP sources, empty for none).
#[cfg(feature = "ssr")]
fn page_policy_posting_to(nonce: &str, targets: &str) -> String {
    let targets = if targets.is_empty() { String::new() } else { format!(" {targets}") };
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data:; media-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'{targets}; frame-ancestors 'none'"
    )
}

/// Where to go after signing in (or any redirect whose target came from the
/// request): `next` read the way a browser reads a `Location`, resolved
/// against the site (`site`, its base URL), and kept only if it stays on the
/// site's origin; then its normalised path, query and fragment, never the raw
/// string (a browser drops tabs and newlines, reads `\` as `/`, `//host` as
/// another host). Anything else is the home page.
#[cfg(feature = "ssr")]
pub fn safe_next(next: Option<&str>, site: &url::Url) -> String {
    let home = "/".to_owned();
    let Some(next) = next else { return home };
    let Ok(origin) = url::Url::parse(&site.origin().ascii_serialization()) else { return home };
    let Ok(target) = origin.join(next) else { return home };
    if target.origin() != origin.origin() {
        return home;
    }
    let mut local = target.path().to_owned();
    if let Some(query) = target.query() {
        local = format!("{local}?{query}");
    }
    if let Some(fragment) = target.fragment() {
        local = format!("{local}#{fragment}");
    }
    // A path that itself starts with `//` (`/.//evil` normalises to it) would
    // be read as another host: it must land where it was resolved to.
    match origin.join(&local) {
        Ok(again) if again == target => local,
        _ => home,
    }
}

/// `application/x-www-form-urlencoded`, as a browser encodes a GET form.
pub(crate) fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The public base URL (`TOOLSHED_BASE_URL`), provided by the server so pages can
/// show full endpoint addresses.
#[derive(Debug, Clone)]
pub struct PublicUrl(pub String);

/// Sign-in state shared by the header and the pages: the current user, refetched
/// after sign-out or whenever a page reports that sign-in state changed.
#[derive(Clone, Copy)]
pub struct Auth {
    pub logout: ServerAction<Logout>,
    /// Bumped by pages whose action signed someone in (login, register, password change).
    pub changed: RwSignal<u64>,
    pub me: Resource<Result<Option<api::Me>, error::AppError>>,
}

impl Auth {
    fn new() -> Self {
        let logout = ServerAction::<Logout>::new();
        let changed = RwSignal::new(0);
        let me = Resource::new(move || (logout.version().get(), changed.get()), |_| api::current_user());
        Self { logout, changed, me }
    }

    /// Refetches the current user once `action` has completed successfully.
    pub fn refresh_after<S, T>(self, action: ServerAction<S>)
    where
        S: leptos::server_fn::ServerFn<Output = T, Error = error::AppError> + Clone + Send + Sync + 'static,
        T: Clone + Send + Sync + 'static,
    {
        Effect::new(move |_| {
            if matches!(action.value().get(), Some(Ok(_))) {
                self.changed.update(|n| *n += 1);
            }
        });
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();

    // True while a navigation waits for its page (a lazy page's chunks, its data).
    let (routing, set_routing) = signal(false);
    view! {
        <Title formatter=|page: String| if page.is_empty() { "Toolshed".to_owned() } else { format!("{page} · Toolshed") } />
        <Router set_is_routing=set_routing>
            <div class="route-progress" class:active=routing role="progressbar" aria-label="Opening the page" aria-hidden=move || (!routing.get()).to_string()></div>
            <Frame />
        </Router>
    }
}

/// Everything inside the router. Pages render in `SsrMode::Async`: the server
/// waits for their data, so a browser without JavaScript gets complete HTML
/// (streamed Suspense fragments would need a script to be swapped in).
#[component]
fn Frame() -> impl IntoView {
    provide_context(Auth::new());
    view! {
        // The first stop of the Tab key: past the header's links to the page itself.
        // rel=external leaves it to the browser, which moves focus there (the router would only scroll).
        <a class="skip-link" href="#content" rel="external">"Skip to content"</a>
        <Header />
        <main class="page" id="content" tabindex="-1">
            <Routes fallback=|| view! { <Live /> <NotFound /> }>
                <Route path=path!("/") view=|| view! { <Live /> <Home /> } ssr=SsrMode::Async />
                <Route path=path!("/login") view={Lazy::<LoginRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/register") view={Lazy::<RegisterRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/account") view={Lazy::<AccountRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/oauth/consent") view={Lazy::<ConsentRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/admin") view={Lazy::<AdminRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/people") view={Lazy::<PeopleRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/approvals") view={Lazy::<ApprovalsRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/admin/audit") view={Lazy::<AuditLogRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/admin/servers") view={Lazy::<ExternalServersRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/admin/health") view={Lazy::<ToolHealthRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/browse") view={Lazy::<BrowseRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/playground") view={Lazy::<PlaygroundRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/tools/mine") view={Lazy::<MyToolsRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/tools/new") view={Lazy::<NewToolRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/tools/:department/:name") view={Lazy::<ToolListingRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/tools/:department/:name/edit") view={Lazy::<ToolEditorRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/bundles/new") view={Lazy::<NewBundleRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/bundles/:department/:name") view={Lazy::<BundleListingRoute>::new()} ssr=SsrMode::Async />
                <Route path=path!("/bundles/:department/:name/edit") view={Lazy::<BundleEditorRoute>::new()} ssr=SsrMode::Async />
            </Routes>
        </main>
        <footer class="footer">"Toolshed · write one function, every agent gains a tool"</footer>
    }
}

/// Marks `<body data-hydrated>` once the page itself is live, so tests (and
/// curious people) can tell. Effects run only in the browser, after hydration;
/// this one is the page's own, since a lazy page hydrates after the frame
/// (once its chunks are in), and a mark set by the frame would come too early.
#[component]
fn Live() -> impl IntoView {
    Effect::new(|_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
}

/// Every page but the home page is a lazy route: its code is split out of the
/// main wasm (scripts/build.sh runs wasm-split) and fetched when the page is
/// first shown, so a first visit downloads only the home page and the frame.
/// Pages are split by group, not one by one: wasm-split gives every set of
/// splits that shares code a chunk of its own, so a split per page made up to
/// ~200 small files per page (each fetched and instantiated); four groups of
/// pages people use together make a handful. The server renders them as
/// usual, and names the chunks a page's group needs in its head (`chunks`) so
/// hydration does not wait for them.
macro_rules! lazy_pages {
    ($($group:ident: $pages:ident { $($page:ident => $component:ident),* $(,)? })*) => {$(
        /// The pages of one lazy group.
        #[derive(Clone, Copy)]
        enum $pages { $($component),* }

        /// One wasm split: the code of every page of the group.
        #[leptos::lazy]
        fn $group(page: $pages) -> AnyView {
            match page {
                $($pages::$component => view! { <Live /> <$component /> }.into_any()),*
            }
        }

        $(
            struct $page;

            impl LazyRoute for $page {
                fn data() -> Self {
                    #[cfg(feature = "ssr")]
                    chunks::name_in_head(stringify!($group));
                    Self
                }

                async fn view(_this: Self) -> AnyView {
                    $group($pages::$component).await
                }

                async fn preload() {
                    // Starts fetching the group's chunks while the route's data loads.
                    #[cfg(target_arch = "wasm32")]
                    pastey::paste! { [<__preload_ $group>]().await; }
                }
            }
        )*
    )*};
}

lazy_pages! {
    account_pages: AccountPages {
        LoginRoute => LoginPage,
        RegisterRoute => RegisterPage,
        AccountRoute => Account,
        ConsentRoute => Consent,
    }
    admin_pages: AdminPages {
        AdminRoute => Admin,
        PeopleRoute => People,
        ApprovalsRoute => Approvals,
        AuditLogRoute => AuditLog,
        ExternalServersRoute => ExternalServers,
        ToolHealthRoute => ToolHealth,
    }
    catalog_pages: CatalogPages {
        BrowseRoute => Browse,
        ToolListingRoute => ToolListing,
        BundleListingRoute => BundleListing,
    }
    authoring_pages: AuthoringPages {
        MyToolsRoute => MyTools,
        NewToolRoute => NewTool,
        ToolEditorRoute => ToolEditor,
        NewBundleRoute => NewBundle,
        BundleEditorRoute => BundleEditor,
        PlaygroundRoute => Playground,
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::safe_next;

    fn next(s: &str) -> String {
        safe_next(Some(s), &url::Url::parse("https://toolshed.example.com/").unwrap())
    }

    #[test]
    fn a_local_next_is_kept_normalised() {
        assert_eq!(next("/account"), "/account");
        assert_eq!(next("/tools/demo/echo?tab=run#args"), "/tools/demo/echo?tab=run#args");
        assert_eq!(next("/oauth/consent?client_id=a%20b&state=x"), "/oauth/consent?client_id=a%20b&state=x");
        assert_eq!(next("/a/../account"), "/account");
        assert_eq!(next("account"), "/account");
        // Escaped slashes stay escaped: a browser never turns them into a host.
        assert_eq!(next("/%2F%2Fevil.example"), "/%2F%2Fevil.example");
        assert_eq!(next("/%09/evil.example"), "/%09/evil.example");
        // Whitespace and control characters a browser strips.
        assert_eq!(next("  /account\t"), "/account");
        assert_eq!(next("/acc\tount"), "/account");
        assert_eq!(next("/a b"), "/a%20b");
        // The site's own origin written out, or its scheme alone (relative to the site, as a browser reads it).
        assert_eq!(next("https://toolshed.example.com/account?x=1"), "/account?x=1");
        assert_eq!(next("https:evil.example"), "/evil.example");
        assert_eq!(next("https:/evil.example"), "/evil.example");
        assert_eq!(safe_next(None, &url::Url::parse("https://toolshed.example.com/").unwrap()), "/");
    }

    #[test]
    fn a_next_leading_off_the_site_goes_home() {
        for hostile in [
            "//evil.example",
            "//evil.example/account",
            "///evil.example",
            "////evil.example",
            "/\\evil.example",
            "\\\\evil.example",
            "\\/evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "\t//evil.example",
            " //evil.example",
            "\u{0}//evil.example",
            "\u{1f}//evil.example",
            "//evil.example\u{7f}",
            "/.//evil.example",
            "/..//evil.example",
            "https://evil.example",
            "http:evil.example",
            "http://toolshed.example.com/account",
            "https://toolshed.example.com:8443/account",
            "HTTPS://EVIL.EXAMPLE",
            "https://toolshed.example.com@evil.example/",
            "https://toolshed.example.com%40evil.example/",
            "//toolshed.example.com@evil.example",
            "https://evil.example\\@toolshed.example.com/",
            "javascript:alert(1)",
            "JaVaScRiPt:alert(1)",
            " javascript:alert(1)",
            "java\tscript:alert(1)",
            "data:text/html,<script>alert(1)</script>",
            "vbscript:msgbox(1)",
            "file:///etc/passwd",
            "mailto:someone@evil.example",
        ] {
            assert_eq!(next(hostile), "/", "{hostile:?}");
        }
    }
}
