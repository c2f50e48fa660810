//! OAuth 2.1 for MCP clients over HTTP, as a client sees it: discovery from a
//! 401, registration, consent (the page's plain form), code for tokens,
//! refresh rotation, resource binding, scopes, revocation. (The official SDKs'
//! OAuth flows, with the consent page in Chromium, are in end2end/.)

use crate::common::{mcp_initialize_status, TestServer};
use crate::mcp::Session;
use serde_json::{json, Value};

/// RFC 7636 appendix B: a verifier and its S256 challenge.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

async fn register(srv: &TestServer, body: Value) -> (u16, Value) {
    let res = reqwest::Client::new().post(srv.url("/oauth/register")).json(&body).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap())
}

async fn public_client(srv: &TestServer) -> String {
    let (status, client) =
        register(srv, json!({"client_name": "Test Client", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})).await;
    assert_eq!(status, 201, "{client}");
    client["client_id"].as_str().unwrap().to_owned()
}

fn authorize_query(srv: &TestServer, client_id: &str, endpoint: &str, scope: &str) -> Vec<(&'static str, String)> {
    vec![
        ("response_type", "code".into()),
        ("client_id", client_id.into()),
        ("redirect_uri", REDIRECT.into()),
        ("state", "st4te".into()),
        ("scope", scope.into()),
        ("code_challenge", CHALLENGE.into()),
        ("code_challenge_method", "S256".into()),
        ("resource", srv.url(endpoint)),
    ]
}

fn query_string(params: &[(&str, String)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str()))).finish()
}

/// The person answers the consent page's form; returns the redirect's query pairs.
async fn answer(
    srv: &TestServer,
    browser: &reqwest::Client,
    params: &[(&str, String)],
    decision: &str,
    call: bool,
) -> Vec<(String, String)> {
    let mut form: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    form.push(("decision", decision));
    if call {
        form.push(("call", "on"));
    }
    let res = browser.post(srv.url("/oauth/consent")).header("Origin", srv.url("")).form(&form).send().await.unwrap();
    assert_eq!(res.status(), 303, "{}", res.text().await.unwrap());
    let location = url::Url::parse(res.headers()["location"].to_str().unwrap()).unwrap();
    assert!(location.as_str().starts_with(REDIRECT), "{location}");
    location.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

async fn token_request(srv: &TestServer, form: &[(&str, &str)]) -> (u16, Value) {
    let res = reqwest::Client::new().post(srv.url("/oauth/token")).form(form).send().await.unwrap();
    let status = res.status().as_u16();
    assert_eq!(res.headers()["cache-control"], "no-store");
    (status, res.json().await.unwrap())
}

async fn exchange(srv: &TestServer, client_id: &str, code: &str, endpoint: &str) -> (u16, Value) {
    let resource = srv.url(endpoint);
    let form = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
        ("client_id", client_id),
        ("resource", &resource),
    ];
    token_request(srv, &form).await
}

/// A person (the admin) allows `client_id` the endpoint with `scope`; returns the token response.
async fn grant(srv: &TestServer, browser: &reqwest::Client, client_id: &str, endpoint: &str, call: bool) -> Value {
    let params = authorize_query(srv, client_id, endpoint, "tools:read tools:call");
    let pairs = answer(srv, browser, &params, "allow", call).await;
    assert_eq!(param(&pairs, "state"), Some("st4te"));
    let (status, tokens) = exchange(srv, client_id, param(&pairs, "code").unwrap(), endpoint).await;
    assert_eq!(status, 200, "{tokens}");
    tokens
}

fn call_echo(text: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}).to_string()
}

server_test!(a_401_leads_a_client_through_discovery_registration_consent_and_tokens_to_a_call, |srv: TestServer| async move {
    // Discovery starts from the endpoint's 401.
    let res = reqwest::Client::new()
        .post(srv.url("/mcp/tools/demo/echo"))
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let challenge = res.headers()["www-authenticate"].to_str().unwrap().to_owned();
    let metadata_url = srv.url("/.well-known/oauth-protected-resource/mcp/tools/demo/echo");
    assert!(challenge.contains(&format!(r#"resource_metadata="{metadata_url}""#)), "{challenge}");
    let resource: Value = reqwest::get(&metadata_url).await.unwrap().json().await.unwrap();
    assert_eq!(resource["resource"], srv.url("/mcp/tools/demo/echo"));
    let issuer = resource["authorization_servers"][0].as_str().unwrap().to_owned();
    assert_eq!(issuer, srv.url(""));
    let server: Value = reqwest::get(format!("{issuer}/.well-known/oauth-authorization-server")).await.unwrap().json().await.unwrap();
    assert_eq!(server["issuer"], issuer);
    assert_eq!(server["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(server["registration_endpoint"], srv.url("/oauth/register"));
    assert_eq!(server["client_id_metadata_document_supported"], true);

    let client_id = public_client(&srv).await;
    let params = authorize_query(&srv, &client_id, "/mcp/tools/demo/echo", "tools:read tools:call");
    let authorize = srv.url(&format!("/oauth/authorize?{}", query_string(&params)));
    // Not signed in: to sign-in first, then back to the consent page.
    let browser = srv.browser();
    let res = browser.get(&authorize).send().await.unwrap();
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with("/login?next=%2Foauth%2Fconsent%3F"), "{location}");
    let admin = srv.admin().await;
    let res = admin.get(&authorize).send().await.unwrap();
    let consent = res.headers()["location"].to_str().unwrap().to_owned();
    assert!(consent.starts_with("/oauth/consent?"), "{consent}");
    let (status, page) = srv.page(&admin, &consent).await;
    assert_eq!(status, 200);
    assert!(page.contains("Test Client") && page.contains("demo/echo") && page.contains("127.0.0.1"), "{page}");

    let pairs = answer(&srv, &admin, &params, "allow", true).await;
    assert_eq!(param(&pairs, "iss"), Some(issuer.as_str()));
    let code = param(&pairs, "code").unwrap().to_owned();
    let (status, tokens) = exchange(&srv, &client_id, &code, "/mcp/tools/demo/echo").await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!((tokens["token_type"].as_str(), tokens["scope"].as_str()), (Some("Bearer"), Some("tools:read tools:call")));
    assert!(tokens["expires_in"].as_i64().unwrap() <= 3600);
    let access = tokens["access_token"].as_str().unwrap();

    let session = Session::open(srv.url("/mcp/tools/demo/echo"), access).await;
    let res = session.post(&call_echo("hi")).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains(r#""text":"hi""#));
    // Bound to its endpoint: not another listing, not the REST API.
    assert_eq!(mcp_initialize_status(&srv.url("/mcp/tools/demo/table"), access).await, 401);
    let res = reqwest::Client::new().post(srv.url("/api/v1/tools")).bearer_auth(access).json(&json!({})).send().await.unwrap();
    assert_eq!(res.status(), 401);
    // Never in a URL.
    let res = reqwest::Client::new()
        .post(srv.url(&format!("/mcp/tools/demo/echo?token={access}")))
        .header("Content-Type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    // A code works once; presented again, what it gave is revoked.
    let (status, error) = exchange(&srv, &client_id, &code, "/mcp/tools/demo/echo").await;
    assert_eq!((status, error["error"].as_str()), (400, Some("invalid_grant")));
    assert_eq!(mcp_initialize_status(&srv.url("/mcp/tools/demo/echo"), access).await, 401);
});

server_test!(refresh_tokens_turn_over_and_a_spent_one_revokes_the_grant, |srv: TestServer| async move {
    let client_id = public_client(&srv).await;
    let admin = srv.admin().await;
    let tokens = grant(&srv, &admin, &client_id, "/mcp/bundles/demo/text_kit", true).await;
    let first = tokens["refresh_token"].as_str().unwrap().to_owned();
    let refresh = |token: String| {
        let srv = &srv;
        let client_id = client_id.clone();
        async move { token_request(srv, &[("grant_type", "refresh_token"), ("refresh_token", &token), ("client_id", &client_id)]).await }
    };
    let (status, next) = refresh(first.clone()).await;
    assert_eq!(status, 200, "{next}");
    assert_ne!(next["refresh_token"], first);
    let access = next["access_token"].as_str().unwrap().to_owned();
    assert_eq!(mcp_initialize_status(&srv.url("/mcp/bundles/demo/text_kit"), &access).await, 200);
    // Another client cannot use it.
    let other = public_client(&srv).await;
    let (status, error) = token_request(
        &srv,
        &[("grant_type", "refresh_token"), ("refresh_token", next["refresh_token"].as_str().unwrap()), ("client_id", &other)],
    )
    .await;
    assert_eq!((status, error["error"].as_str()), (400, Some("invalid_grant")));
    // The first one again: stolen, perhaps; everything under the grant ends.
    let (status, error) = refresh(first).await;
    assert_eq!((status, error["error"].as_str()), (400, Some("invalid_grant")));
    assert_eq!(mcp_initialize_status(&srv.url("/mcp/bundles/demo/text_kit"), &access).await, 401);
    let (status, _) = refresh(next["refresh_token"].as_str().unwrap().to_owned()).await;
    assert_eq!(status, 400);
});

server_test!(a_grant_without_running_lists_tools_but_a_call_gets_403_insufficient_scope, |srv: TestServer| async move {
    let client_id = public_client(&srv).await;
    let admin = srv.admin().await;
    let tokens = grant(&srv, &admin, &client_id, "/mcp/tools/demo/echo", false).await;
    assert_eq!(tokens["scope"], "tools:read");
    let session = Session::open(srv.url("/mcp/tools/demo/echo"), tokens["access_token"].as_str().unwrap()).await;
    let res = session.post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains(r#""name":"echo""#));
    let res = session.post(&call_echo("x")).await;
    assert_eq!(res.status(), 403);
    let challenge = res.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.contains(r#"error="insufficient_scope""#) && challenge.contains("tools:call"), "{challenge}");
    // A prompt or a resource runs a tool's code too.
    for run in [
        r#"{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"echo"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"x://y"}}"#,
    ] {
        assert_eq!(session.post(run).await.status(), 403, "{run}");
    }
});

server_test!(a_pinned_endpoint_is_a_resource_of_its_own_and_its_token_works_there, |srv: TestServer| async move {
    let pinned = "/mcp/tools/demo/echo@v1";
    let metadata: Value =
        reqwest::get(srv.url(&format!("/.well-known/oauth-protected-resource{pinned}"))).await.unwrap().json().await.unwrap();
    assert_eq!(metadata["resource"], srv.url(pinned));
    let client_id = public_client(&srv).await;
    let admin = srv.admin().await;
    let tokens = grant(&srv, &admin, &client_id, pinned, true).await;
    let session = Session::open(srv.url(pinned), tokens["access_token"].as_str().unwrap()).await;
    let res = session.post(&call_echo("pinned")).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("pinned"));
    // A version that does not exist is nothing to grant.
    let params = authorize_query(&srv, &client_id, "/mcp/tools/demo/echo@v99", "");
    let pairs = answer(&srv, &admin, &params, "allow", true).await;
    assert_eq!(param(&pairs, "error"), Some("invalid_target"));
});

server_test!(the_personal_endpoint_is_a_resource_of_its_own_and_its_grant_reaches_no_listing, |srv: TestServer| async move {
    let res = reqwest::Client::new().post(srv.url("/mcp/me")).header("Content-Type", "application/json").body("{}").send().await.unwrap();
    assert_eq!(res.status(), 401);
    let metadata_url = srv.url("/.well-known/oauth-protected-resource/mcp/me");
    assert!(res.headers()["www-authenticate"].to_str().unwrap().contains(&metadata_url));
    let metadata: Value = reqwest::get(&metadata_url).await.unwrap().json().await.unwrap();
    assert_eq!(metadata["resource"], srv.url("/mcp/me"));

    let client_id = public_client(&srv).await;
    let ada = srv.member("ada", "research").await;
    let params = authorize_query(&srv, &client_id, "/mcp/me", "tools:read tools:call");
    let consent = format!("/oauth/consent?{}", query_string(&params));
    let (status, page) = srv.page(&ada, &consent).await;
    assert_eq!(status, 200);
    assert!(page.contains("your personal endpoint") && page.contains("Every tool you may use"), "{page}");
    let tokens = grant(&srv, &ada, &client_id, "/mcp/me", true).await;
    let access = tokens["access_token"].as_str().unwrap();
    let session = Session::open(srv.url("/mcp/me"), access).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "call_tool", "arguments": {"name": "demo/echo", "arguments": {"text": "via my endpoint"}}}});
    let res = session.post(&call.to_string()).await;
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("via my endpoint"));
    // Granted for the personal endpoint: no listing's endpoint takes it, and the other way round.
    assert_eq!(mcp_initialize_status(&srv.url("/mcp/tools/demo/echo"), access).await, 401);
    let echo = grant(&srv, &ada, &client_id, "/mcp/tools/demo/echo", true).await;
    assert_eq!(mcp_initialize_status(&srv.url("/mcp/me"), echo["access_token"].as_str().unwrap()).await, 401);
    // The Account page names it.
    let (_, grants) = srv.call(&ada, "oauth/grants", &[]).await;
    let listed: Vec<(&str, &str)> =
        grants.as_array().unwrap().iter().map(|g| (g["listing"].as_str().unwrap(), g["href"].as_str().unwrap())).collect();
    assert_eq!(listed, [("demo/echo", "/tools/demo/echo"), ("your personal endpoint", "/account")]);

    // Listing only: a call through the personal endpoint is refused with the scope to ask for.
    let read_only = grant(&srv, &ada, &client_id, "/mcp/me", false).await;
    let session = Session::open(srv.url("/mcp/me"), read_only["access_token"].as_str().unwrap()).await;
    let res = session.post(&call.to_string()).await;
    assert_eq!(res.status(), 403);
    assert!(res.headers()["www-authenticate"].to_str().unwrap().contains("insufficient_scope"));
});

server_test!(revoking_on_the_account_page_or_deactivating_the_person_ends_access_at_once, |srv: TestServer| async move {
    let client_id = public_client(&srv).await;
    let ada = srv.member("ada", "research").await;
    let echo = "/mcp/tools/demo/echo";
    let first = grant(&srv, &ada, &client_id, echo, true).await;
    let second = grant(&srv, &ada, &client_id, "/mcp/tools/demo/table", true).await;
    let (status, grants) = srv.call(&ada, "oauth/grants", &[]).await;
    assert_eq!(status, 200);
    let listed: Vec<&str> = grants.as_array().unwrap().iter().map(|g| g["listing"].as_str().unwrap()).collect();
    assert_eq!(listed, ["demo/table", "demo/echo"]);
    assert_eq!(grants[1]["client_name"], "Test Client");
    // Someone else's grant id changes nothing.
    let admin = srv.admin().await;
    let id = grants[1]["id"].to_string();
    assert_eq!(srv.call(&admin, "oauth/grants/revoke", &[("id", &id)]).await.0, 200);
    assert_eq!(mcp_initialize_status(&srv.url(echo), first["access_token"].as_str().unwrap()).await, 200);
    assert_eq!(srv.call(&ada, "oauth/grants/revoke", &[("id", &id)]).await.0, 200);
    assert_eq!(mcp_initialize_status(&srv.url(echo), first["access_token"].as_str().unwrap()).await, 401);

    let table = srv.url("/mcp/tools/demo/table");
    assert_eq!(mcp_initialize_status(&table, second["access_token"].as_str().unwrap()).await, 200);
    assert_eq!(srv.call(&admin, "admin/users/status", &[("username", "ada"), ("status", "deactivated")]).await.0, 200);
    assert_eq!(mcp_initialize_status(&table, second["access_token"].as_str().unwrap()).await, 401);
    assert_eq!(srv.call(&admin, "admin/users/status", &[("username", "ada"), ("status", "active")]).await.0, 200);
    // Reactivation does not bring grants back.
    assert_eq!(mcp_initialize_status(&table, second["access_token"].as_str().unwrap()).await, 401);
    let (status, _) = token_request(
        &srv,
        &[("grant_type", "refresh_token"), ("refresh_token", second["refresh_token"].as_str().unwrap()), ("client_id", &client_id)],
    )
    .await;
    assert_eq!(status, 400);
});

server_test!(bad_authorization_requests_are_refused_without_trusting_their_redirect, |srv: TestServer| async move {
    let client_id = public_client(&srv).await;
    let admin = srv.admin().await;
    let endpoint = "/mcp/tools/demo/echo";
    let authorize = |params: &[(&str, String)]| srv.url(&format!("/oauth/authorize?{}", query_string(params)));
    let error_of = |res: &reqwest::Response| {
        let location = url::Url::parse(res.headers()["location"].to_str().unwrap()).unwrap();
        assert!(location.as_str().starts_with(REDIRECT), "{location}");
        location.query_pairs().find(|(k, _)| k == "error").map(|(_, v)| v.into_owned())
    };
    // Without PKCE, or for something that is not an endpoint here: the client is told.
    let mut no_pkce = authorize_query(&srv, &client_id, endpoint, "");
    no_pkce.retain(|(k, _)| !k.starts_with("code_challenge"));
    assert_eq!(error_of(&admin.get(authorize(&no_pkce)).send().await.unwrap()).as_deref(), Some("invalid_request"));
    let mut elsewhere = authorize_query(&srv, &client_id, endpoint, "");
    elsewhere.last_mut().unwrap().1 = "https://evil.example/mcp/tools/demo/echo".into();
    assert_eq!(error_of(&admin.get(authorize(&elsewhere)).send().await.unwrap()).as_deref(), Some("invalid_target"));
    let bad_scope = authorize_query(&srv, &client_id, endpoint, "admin");
    assert_eq!(error_of(&admin.get(authorize(&bad_scope)).send().await.unwrap()).as_deref(), Some("invalid_scope"));
    // A redirect the client never registered: nothing goes there; the page says why.
    let mut foreign = authorize_query(&srv, &client_id, endpoint, "");
    foreign[2].1 = "https://evil.example/steal".into();
    let res = admin.get(authorize(&foreign)).send().await.unwrap();
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.starts_with("/oauth/consent?"), "{location}");
    let (_, page) = srv.page(&admin, &location).await;
    assert!(page.contains("did not register"), "{page}");
    let mut form: Vec<(&str, &str)> = foreign.iter().map(|(k, v)| (*k, v.as_str())).collect();
    form.push(("decision", "allow"));
    let res = admin.post(srv.url("/oauth/consent")).header("Origin", srv.url("")).form(&form).send().await.unwrap();
    assert_eq!(res.status(), 400);
    // Another site cannot submit the person's consent.
    let params = authorize_query(&srv, &client_id, endpoint, "");
    let mut form: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
    form.push(("decision", "allow"));
    let res = admin.post(srv.url("/oauth/consent")).header("Origin", "https://evil.example").form(&form).send().await.unwrap();
    assert_eq!(res.status(), 403);
    // Deny: the client hears access_denied.
    assert_eq!(param(&answer(&srv, &admin, &params, "deny", true).await, "error"), Some("access_denied"));
    // A wrong verifier gets no tokens.
    let pairs = answer(&srv, &admin, &params, "allow", true).await;
    let resource = srv.url(endpoint);
    let wrong_verifier = "x".repeat(43);
    let form = [
        ("grant_type", "authorization_code"),
        ("code", param(&pairs, "code").unwrap()),
        ("redirect_uri", REDIRECT),
        ("code_verifier", wrong_verifier.as_str()),
        ("client_id", client_id.as_str()),
        ("resource", resource.as_str()),
    ];
    let (status, error) = token_request(&srv, &form).await;
    assert_eq!((status, error["error"].as_str()), (400, Some("invalid_grant")));
});

server_test!(registrations_are_checked_and_confidential_clients_prove_their_secret, |srv: TestServer| async move {
    for (body, error) in [
        (json!({"redirect_uris": ["javascript:alert(1)"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": ["http://evil.example/cb"]}), "invalid_redirect_uri"),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}), "invalid_client_metadata"),
        (json!({"redirect_uris": [REDIRECT], "grant_types": ["password"]}), "invalid_client_metadata"),
        (json!("not an object"), "invalid_client_metadata"),
    ] {
        let (status, answer) = register(&srv, body.clone()).await;
        assert_eq!((status, answer["error"].as_str()), (400, Some(error)), "{body}");
    }
    let (status, client) =
        register(&srv, json!({"client_name": "CI", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"})).await;
    assert_eq!(status, 201);
    let (id, secret) = (client["client_id"].as_str().unwrap(), client["client_secret"].as_str().unwrap());
    let admin = srv.admin().await;
    let params = authorize_query(&srv, id, "/mcp/tools/demo/echo", "");
    let pairs = answer(&srv, &admin, &params, "allow", true).await;
    let code = param(&pairs, "code").unwrap();
    let base =
        [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", REDIRECT), ("code_verifier", VERIFIER), ("client_id", id)];
    let (status, error) = token_request(&srv, &[&base[..], &[("client_secret", "wrong")]].concat()).await;
    assert_eq!((status, error["error"].as_str()), (401, Some("invalid_client")));
    let res = reqwest::Client::new().post(srv.url("/oauth/token")).basic_auth(id, Some(secret)).form(&base[..4]).send().await.unwrap();
    assert_eq!(res.status(), 200);
});

server_test!(one_address_may_register_twenty_clients_per_ten_minutes, |srv: TestServer| async move {
    for _ in 0..20 {
        public_client(&srv).await;
    }
    let (status, answer) = register(&srv, json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})).await;
    assert_eq!((status, answer["error"].as_str()), (429, Some("temporarily_unavailable")));
});

server_test!(client_document_urls_that_cannot_be_read_are_refused_on_the_page_and_limited_per_address, |srv: TestServer| async move {
    let admin = srv.admin().await;
    let srv = &srv;
    let consent_page = |client_id: &str| {
        let params = authorize_query(srv, client_id, "/mcp/tools/demo/echo", "");
        let admin = admin.clone();
        let url = srv.url(&format!("/oauth/authorize?{}", query_string(&params)));
        async move {
            let res = admin.get(url).send().await.unwrap();
            let location = res.headers()["location"].to_str().unwrap().to_owned();
            assert!(location.starts_with("/oauth/consent?"), "{location}");
            srv.page(&admin, &location).await.1
        }
    };
    // Nothing listens there: the page says the document could not be read, and nothing went to the redirect URI.
    let page = consent_page("https://127.0.0.1:9/oauth/client.json").await;
    assert!(page.contains("could not be read"), "{page}");
    assert_eq!(page.matches("This request cannot be answered").count(), 1, "the heading, not repeated in the error: {page}");
    let page = consent_page("https://example.com/").await;
    assert!(page.contains("must have a path"), "{page}");
    // Each request for a document not kept here would fetch it: 20 per address per 10 minutes
    // (the first above was one).
    let anonymous = srv.browser();
    for i in 2..=20 {
        let params = authorize_query(srv, &format!("https://127.0.0.1:9/client-{i}.json"), "/mcp/tools/demo/echo", "");
        let res = anonymous.get(srv.url(&format!("/oauth/authorize?{}", query_string(&params)))).send().await.unwrap();
        assert_ne!(res.status(), 429, "request {i}");
    }
    let params = authorize_query(srv, "https://127.0.0.1:9/client-21.json", "/mcp/tools/demo/echo", "");
    let res = anonymous.get(srv.url(&format!("/oauth/authorize?{}", query_string(&params)))).send().await.unwrap();
    assert_eq!(res.status(), 429);
    // A registered client is not held up by that.
    let client_id = public_client(srv).await;
    let params = authorize_query(srv, &client_id, "/mcp/tools/demo/echo", "");
    let res = anonymous.get(srv.url(&format!("/oauth/authorize?{}", query_string(&params)))).send().await.unwrap();
    assert_ne!(res.status(), 429);
});

server_test!(one_code_traded_twice_at_the_same_moment_gives_tokens_once, |srv: TestServer| async move {
    let client_id = public_client(&srv).await;
    let admin = srv.admin().await;
    let params = authorize_query(&srv, &client_id, "/mcp/tools/demo/echo", "");
    let pairs = answer(&srv, &admin, &params, "allow", true).await;
    let code = param(&pairs, "code").unwrap();
    let (a, b) =
        tokio::join!(exchange(&srv, &client_id, code, "/mcp/tools/demo/echo"), exchange(&srv, &client_id, code, "/mcp/tools/demo/echo"));
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [200, 400], "{} {}", a.1, b.1);
});
