//! Connected accounts, on SQLite and PostgreSQL: who may register and change apps, each
//! caller's own token in their runs, refresh by compare-and-set, a refused
//! refresh asking to reconnect, a token an API refuses renewed within the call, a lifetime the provider does not say taken
//! as an hour, code mode's member calls told where to connect again, disconnect and deactivation revoking
//! upstream, tokens sealed at rest. The provider here is a loopback stand-in
//! that speaks the token, revocation and userinfo endpoints; the whole flow
//! against a real OpenID provider and browser is
//! `end2end/tests/accounts-connected.test.mjs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::json;
use sqlx::Row;
use toolshed_domain::accounts::Registration;
use toolshed_domain::bundles::MemberSpec;
use toolshed_domain::connections::{AppRegistration, AppSettings, ConnectionError};
use toolshed_domain::names::{CodeMode, DepartmentName, Role};
use toolshed_domain::names::{Description, Tags, Title};
use toolshed_domain::outbound::InternalHosts;
use toolshed_domain::tools::{NewTool, RunSource, Source, ToolError, ToolSettings, Via, Visibility};
use toolshed_domain::{Db, Settings, Toolshed, User};

use crate::support::user;

/// What the stand-in provider was sent and may refuse.
#[derive(Default)]
struct Provider {
    /// Access tokens issued, in order.
    issued: Vec<String>,
    /// Tokens revoked.
    revoked: Vec<String>,
    /// Refresh grants are refused (the grant was revoked upstream).
    refuse_refresh: bool,
    /// Grants do not say how long their access token lasts (no `expires_in`).
    unsaid_lifetime: bool,
    /// Grants come without a refresh token.
    no_refresh_token: bool,
}

/// A loopback OAuth provider: `POST /token` (a code `code-NAME` gives
/// `NAME`'s tokens; a refresh gives a new access token), `POST /revoke`,
/// `GET /me`, which answers the name a live access token belongs to, and
/// `GET /echo`, which answers the `Authorization` header it got.
fn provider() -> (u16, Arc<Mutex<Provider>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = Arc::new(Mutex::new(Provider::default()));
    let shared = state.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut head, mut line) = (String::new(), String::new());
            while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                head.push_str(&line);
                line.clear();
            }
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|n| n.trim().parse::<usize>().unwrap()))
                .unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let form: std::collections::HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
            let mut p = shared.lock().unwrap();
            let (status, answer) = if head.starts_with("POST /token") {
                let who = match form["grant_type"].as_str() {
                    "authorization_code" => Some(form["code"].trim_start_matches("code-").to_owned()),
                    "refresh_token" if !p.refuse_refresh => Some(form["refresh_token"].trim_start_matches("refresh-").to_owned()),
                    _ => None,
                };
                match who {
                    Some(who) => {
                        let token = format!("access-{who}-{}", p.issued.len() + 1);
                        p.issued.push(token.clone());
                        let mut body = json!({"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                            "refresh_token": format!("refresh-{who}"), "scope": "profile"});
                        let fields = body.as_object_mut().unwrap();
                        if p.unsaid_lifetime {
                            fields.remove("expires_in");
                        }
                        if p.no_refresh_token {
                            fields.remove("refresh_token");
                        }
                        ("200 OK", body.to_string())
                    }
                    None => ("400 Bad Request", json!({"error": "invalid_grant"}).to_string()),
                }
            } else if head.starts_with("GET /echo") {
                // An API that says back what it was sent, as some error pages do.
                let sent = head.lines().find(|l| l.to_ascii_lowercase().starts_with("authorization:")).unwrap_or_default();
                ("200 OK", json!(sent).to_string())
            } else if head.starts_with("POST /revoke") {
                p.revoked.push(form["token"].clone());
                ("200 OK", String::new())
            } else {
                let prefix = "authorization: bearer ";
                let bearer = head
                    .lines()
                    .find(|l| l.to_ascii_lowercase().starts_with(prefix))
                    .map(|l| l[prefix.len()..].to_owned())
                    .unwrap_or_default();
                match bearer.split('-').nth(1).filter(|_| p.issued.contains(&bearer) && !p.revoked.contains(&bearer)) {
                    Some(who) => ("200 OK", json!({"sub": who}).to_string()),
                    None => ("401 Unauthorized", String::new()),
                }
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (port, state)
}

/// The stand-in's endpoints for client `client`, its tokens for the stand-in's host.
fn app_settings(port: u16, client: &str) -> AppSettings {
    let base = format!("http://127.0.0.1:{port}");
    let (auth, token, revoke) = (format!("{base}/authorize"), format!("{base}/token"), format!("{base}/revoke"));
    AppSettings::parse("", &auth, &token, &revoke, client, "app-secret", "profile", &format!("127.0.0.1:{port}")).unwrap()
}

fn registration(name: &str, port: u16) -> AppRegistration {
    AppRegistration::parse(name, "", app_settings(port, "toolshed")).unwrap()
}

async fn admin(ts: &Toolshed) -> User {
    let mut reg = Registration::parse("root", "Root", "general", "a-long-enough-password").unwrap();
    reg.is_admin = true;
    ts.accounts().register(reg, None).await.unwrap()
}

/// Connects `user` at `app` as the provider's `who`: the flow begun, then
/// finished with the `state` the provider would send back.
async fn connect(ts: &Toolshed, user: &User, app: &str, who: &str) {
    let (url, flow) = ts.connections().begin(user, app).await.unwrap();
    let url = url::Url::parse(&url).unwrap();
    let state = url.query_pairs().find(|(k, _)| k == "state").unwrap().1.into_owned();
    assert!(url.query_pairs().any(|(k, v)| k == "code_challenge_method" && v == "S256"), "PKCE: {url}");
    ts.connections().finish(user, flow, &state, Ok(&format!("code-{who}"))).await.unwrap();
}

/// A tool by `author` that answers who the people API says its caller is.
async fn who_am_i(ts: &Toolshed, author: &User, port: u16) -> toolshed_domain::tools::Tool {
    let tool = ts.tools().create_tool(author, NewTool::parse("who_am_i", "Who am I", "", "", "everyone").unwrap()).await.unwrap();
    let settings = ToolSettings {
        title: Title::parse("Who am I").unwrap(),
        description: Description::parse("Says who you are.").unwrap(),
        tags: Tags::parse("").unwrap(),
        visibility: Visibility::Everyone,
        read_only_hint: true,
        destructive_hint: false,
        fetch_allow: vec![format!("127.0.0.1:{port}")],
        timeout_ms: 5_000,
        memory_mib: 32,
        task_support: Default::default(),
        serves: Default::default(),
    };
    ts.tools().update_tool_settings(author, tool.id, settings).await.unwrap();
    let code = format!(
        "const r = await $fetch('http://127.0.0.1:{port}/me', {{account: 'people'}});\n\
         if (!r.ok) throw new Error('the API said ' + r.status);\nreturn (await r.json()).sub;"
    );
    ts.tools().save_version(author, tool.id, Source::parse(&code, vec![], None).unwrap(), "v1").await.unwrap();
    ts.tools().publish(author, tool.id, 1).await.unwrap()
}

/// [`who_am_i`], declared to act at the stand-in's app `people`.
async fn who_am_i_at_people(ts: &Toolshed, author: &User, port: u16) -> toolshed_domain::tools::Tool {
    let tool = who_am_i(ts, author, port).await;
    ts.tools().set_accounts(author, tool.id, "people").await.unwrap();
    tool
}

async fn run(ts: &Toolshed, caller: &User, tool: toolshed_domain::ids::ToolId) -> Result<String, ToolError> {
    let report = ts.tools().run_tool(caller, tool, RunSource::Published, json!({}), "mcp-http", None).await?;
    Ok(report.outcome.result.map(|v| v.to_json().as_str().unwrap_or_default().to_owned()).unwrap_or_else(|e| format!("failed: {e}")))
}

fn settings() -> Settings {
    Settings { internal_hosts: InternalHosts::parse("127.0.0.1"), ..Settings::default() }
}

/// Root (an admin), Alice (finance) and Carol (legal), with the stand-in
/// provider registered as the company-wide app `people`.
struct World {
    ts: Toolshed,
    root: User,
    alice: User,
    carol: User,
    port: u16,
    provider: Arc<Mutex<Provider>>,
}

async fn world(db: Db) -> World {
    let ts = Toolshed::new(db, settings());
    let root = admin(&ts).await;
    let (alice, carol) = (user(&ts, "alice", "finance").await, user(&ts, "carol", "legal").await);
    let (port, provider) = provider();
    ts.connections().register(&root, registration("people", port)).await.unwrap();
    World { ts, root, alice, carol, port, provider }
}

store_test!(only_admins_register_apps_and_a_client_secret_is_stored_sealed, |db: Db| async move {
    let ts = Toolshed::new(db.clone(), settings());
    let root = admin(&ts).await;
    let alice = user(&ts, "alice", "finance").await;
    let (port, _) = provider();
    let refused = ts.connections().register(&alice, registration("people", port)).await.unwrap_err();
    assert!(matches!(refused, ConnectionError::Forbidden), "{refused:?}");
    let app = ts.connections().register(&root, registration("people", port)).await.unwrap();
    assert!(app.secret_set && app.revoke_url.is_some() && app.hosts == [format!("127.0.0.1:{port}")]);
    let again = ts.connections().register(&root, registration("people", port)).await.unwrap_err();
    assert!(matches!(again, ConnectionError::NameTaken(_)), "{again:?}");
    let stored: Vec<u8> = sqlx::query("SELECT client_secret FROM oauth_apps").fetch_one(db.pool()).await.unwrap().get(0);
    assert!(!String::from_utf8_lossy(&stored).contains("app-secret"));
    // Names are what code writes; an issuer on an internal address is refused before anything is sent.
    let discovered = |issuer| AppSettings::parse(issuer, "", "", "", "c", "", "", "api.example.com").unwrap();
    assert!(AppRegistration::parse("Jira!", "", discovered("https://id.example")).is_err());
    let internal = AppRegistration::parse("meta", "", discovered("http://169.254.169.254")).unwrap();
    let err = Toolshed::new(db, Settings::default()).connections().register(&root, internal).await.unwrap_err();
    assert!(matches!(err, ConnectionError::Unreachable(_)), "{err:?}");
});

store_test!(each_caller_acts_as_themselves_refreshes_when_due_and_reconnects_when_refused, |db: Db| async move {
    let World { ts, root, alice, carol, port, provider } = world(db.clone()).await;
    let tool = who_am_i(&ts, &alice, port).await;
    // Undeclared, the code's account is refused before anything is sent.
    assert!(run(&ts, &carol, tool.id).await.unwrap().contains("does not declare the app people"));
    let unknown = ts.tools().set_accounts(&alice, tool.id, "jira").await.unwrap_err();
    assert!(unknown.to_string().contains("no app “jira”"), "{unknown}");
    assert!(matches!(ts.tools().set_accounts(&carol, tool.id, "people").await, Err(ToolError::Forbidden | ToolError::NotFound)));
    assert_eq!(ts.tools().set_accounts(&alice, tool.id, "people, people").await.unwrap(), ["people"]);
    let label = ts.tools().permissions(&ts.tools().tool(&alice, tool.id).await.unwrap()).await.unwrap();
    assert_eq!(label.accounts, [toolshed_domain::tools::ActsAt { app: "people".into(), scopes: vec!["profile".into()] }]);
    assert_eq!(label.meta()["toolshed/permissions"]["accounts"], json!([{"app": "people", "scopes": ["profile"]}]));

    // Carol has not connected: the call says where to, and ran nothing.
    let Err(ToolError::NotConnected(missing)) = run(&ts, &carol, tool.id).await else { panic!("not connected") };
    assert_eq!((missing.link.as_str(), missing.reconnect), ("http://127.0.0.1:3000/connect/people", false));
    assert!(provider.lock().unwrap().issued.is_empty());
    connect(&ts, &carol, "people", "carol").await;
    connect(&ts, &alice, "people", "alice").await;
    assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
    assert_eq!(run(&ts, &alice, tool.id).await.unwrap(), "alice");
    let accounts = ts.connections().accounts(&carol).await.unwrap();
    assert_eq!(accounts[0].connected.as_ref().unwrap().scopes, ["profile"]);

    // Sealed at rest: no column holds a token in clear.
    for row in sqlx::query("SELECT access_token, refresh_token FROM connected_accounts").fetch_all(db.pool()).await.unwrap() {
        for column in [row.get::<Vec<u8>, _>(0), row.get::<Vec<u8>, _>(1)] {
            let text = String::from_utf8_lossy(&column);
            assert!(!text.contains("access-") && !text.contains("refresh-"), "a token in clear");
        }
    }

    // Due: refreshed once, by compare-and-set.
    let expire = "UPDATE connected_accounts SET expires_at = 1 WHERE user_id = $1";
    sqlx::query(expire).bind(carol.id.0).execute(db.pool()).await.unwrap();
    assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
    assert_eq!(provider.lock().unwrap().issued.last().unwrap(), "access-carol-3");
    let row = sqlx::query("SELECT generation, status FROM connected_accounts WHERE user_id = $1")
        .bind(carol.id.0)
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!((row.get::<i64, _>(0), row.get::<String, _>(1)), (1, "ok".to_owned()));
    assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
    assert_eq!(provider.lock().unwrap().issued.len(), 3, "a fresh token is not refreshed again");

    // A refused refresh: the account needs connecting again, and the call says so.
    provider.lock().unwrap().refuse_refresh = true;
    sqlx::query(expire).bind(carol.id.0).execute(db.pool()).await.unwrap();
    let Err(ToolError::NotConnected(again)) = run(&ts, &carol, tool.id).await else { panic!("reconnect") };
    assert!(again.reconnect);
    assert!(again.to_string().contains("needs connecting again"), "{again}");
    provider.lock().unwrap().refuse_refresh = false;
    connect(&ts, &carol, "people", "carol").await;
    assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");

    // Disconnecting revokes upstream and forgets; so does deactivation.
    ts.connections().disconnect(&carol, "people").await.unwrap();
    assert!(provider.lock().unwrap().revoked.contains(&"refresh-carol".to_owned()));
    assert!(matches!(run(&ts, &carol, tool.id).await, Err(ToolError::NotConnected(_))));
    ts.admin().set_active(&root, "alice", false).await.unwrap();
    assert!(provider.lock().unwrap().revoked.contains(&"refresh-alice".to_owned()));
    let left: i64 = sqlx::query("SELECT COUNT(*) FROM connected_accounts").fetch_one(db.pool()).await.unwrap().get(0);
    assert_eq!(left, 0);
});

store_test!(
    a_token_whose_lifetime_is_unsaid_is_renewed_an_hour_after_it_was_had_when_it_can_be_and_kept_when_it_cannot,
    |db: Db| async move {
        let World { ts, alice, carol, port, provider, .. } = world(db.clone()).await;
        let tool = who_am_i_at_people(&ts, &alice, port).await;
        provider.lock().unwrap().unsaid_lifetime = true;
        let issued = || provider.lock().unwrap().issued.len();
        // Moves when `who`'s token was had (connected, or last refreshed) an hour back.
        let age = |who: i64| {
            let pool = db.pool().clone();
            async move {
                let sql = "UPDATE connected_accounts SET connected_at = connected_at - 3600000, \
                       refreshed_at = refreshed_at - 3600000 WHERE user_id = $1";
                sqlx::query(sql).bind(who).execute(&pool).await.unwrap();
            }
        };

        // Renewable: used as it is within the hour, renewed after it.
        connect(&ts, &carol, "people", "carol").await;
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
        assert_eq!(issued(), 1, "fresh: not renewed");
        age(carol.id.0).await;
        // The provider answers this refresh without a new refresh token: the one kept renews the next.
        provider.lock().unwrap().no_refresh_token = true;
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
        assert_eq!(provider.lock().unwrap().issued.last().unwrap(), "access-carol-2", "an hour old: renewed");
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
        assert_eq!(issued(), 2, "just renewed: not again");
        age(carol.id.0).await;
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
        assert_eq!(provider.lock().unwrap().issued.last().unwrap(), "access-carol-3", "renewed with the refresh token kept");

        // Not renewable: used as it is, however old, for as long as the provider takes it.
        connect(&ts, &alice, "people", "alice").await;
        age(alice.id.0).await;
        assert_eq!(run(&ts, &alice, tool.id).await.unwrap(), "alice");
        assert_eq!(issued(), 4, "nothing to renew with, nothing renewed");
    }
);

store_test!(
    a_token_the_api_refuses_before_its_expiry_is_renewed_within_the_call_and_one_that_cannot_be_asks_to_connect_again,
    |db: Db| async move {
        let World { ts, alice, carol, port, provider, .. } = world(db.clone()).await;
        let tool = who_am_i_at_people(&ts, &alice, port).await;
        let issued = || provider.lock().unwrap().issued.clone();
        connect(&ts, &carol, "people", "carol").await;
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");

        // The provider drops Carol's token an hour early (a password change,
        // say): the call renews it and its request goes through.
        provider.lock().unwrap().revoked.push("access-carol-1".into());
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
        assert_eq!(issued(), ["access-carol-1", "access-carol-2"]);
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
        assert_eq!(issued().len(), 2, "the renewed token is kept for the next calls");

        // Dropped again, and the grant with it: the account needs connecting
        // again, and that call, which failed on the API's 401, says where.
        {
            let mut p = provider.lock().unwrap();
            p.revoked.push("access-carol-2".into());
            p.refuse_refresh = true;
        }
        for call in ["the failed one", "the next"] {
            let Err(ToolError::NotConnected(again)) = run(&ts, &carol, tool.id).await else { panic!("{call}: reconnect") };
            assert!(again.reconnect && again.to_string().contains("/connect/people"), "{call}: {again}");
        }
        assert_eq!(issued().len(), 2, "nothing renewed");
        // The failed one ran, so its usage says so; the next never reached the code.
        ts.usage().flush().await;
        let outcomes: Vec<String> = sqlx::query("SELECT outcome FROM usage_records WHERE user_id = $1 ORDER BY id")
            .bind(carol.id.0)
            .fetch_all(db.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| r.get("outcome"))
            .collect();
        assert_eq!(outcomes, ["ok", "ok", "ok", "tool_error"]);

        // A token with nothing to renew it with, refused: the same.
        {
            let mut p = provider.lock().unwrap();
            p.refuse_refresh = false;
            p.no_refresh_token = true;
        }
        connect(&ts, &alice, "people", "alice").await;
        assert_eq!(run(&ts, &alice, tool.id).await.unwrap(), "alice");
        let token = issued().last().unwrap().clone();
        provider.lock().unwrap().revoked.push(token);
        let Err(ToolError::NotConnected(again)) = run(&ts, &alice, tool.id).await else { panic!("reconnect") };
        assert!(again.reconnect, "{again}");

        // A call that fails for a reason of its own, its accounts usable, fails as it did.
        connect(&ts, &carol, "people", "carol").await;
        let throws = Source::parse("throw new Error('its own reason');", vec![], None).unwrap();
        ts.tools().save_version(&alice, tool.id, throws, "v2").await.unwrap();
        ts.tools().publish(&alice, tool.id, 2).await.unwrap();
        assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "failed: Error: its own reason (line 1)");
    }
);

store_test!(a_connection_finishes_only_for_the_person_and_state_that_began_it, |db: Db| async move {
    let World { ts, alice, carol, provider, .. } = world(db).await;
    let (_, flow) = ts.connections().begin(&alice, "people").await.unwrap();
    let err = ts.connections().finish(&alice, flow.clone(), "forged-state", Ok("code-alice")).await.unwrap_err();
    assert!(matches!(err, ConnectionError::FlowLost), "{err:?}");
    let (url, flow) = ts.connections().begin(&alice, "people").await.unwrap();
    let state = url::Url::parse(&url).unwrap().query_pairs().find(|(k, _)| k == "state").unwrap().1.into_owned();
    let err = ts.connections().finish(&carol, flow.clone(), &state, Ok("code-carol")).await.unwrap_err();
    assert!(matches!(err, ConnectionError::FlowLost), "{err:?}");
    // A decline counts only with the state that was sent: a forged one is a lost flow, not the provider's word.
    let forged = ts.connections().finish(&alice, flow.clone(), "forged", Err("access_denied".into())).await.unwrap_err();
    assert!(matches!(forged, ConnectionError::FlowLost), "{forged:?}");
    let declined = ts.connections().finish(&alice, flow, &state, Err("access_denied".into())).await.unwrap_err();
    assert!(matches!(declined, ConnectionError::Declined(_)), "{declined:?}");
    assert!(provider.lock().unwrap().issued.is_empty(), "no code was exchanged");
    let unknown = ts.connections().begin(&alice, "nothing").await.unwrap_err();
    assert!(matches!(unknown, ConnectionError::NoSuchApp(_)), "{unknown:?}");
});

store_test!(a_token_the_api_echoes_is_masked_and_a_failed_call_keeps_nothing_it_fetched, |db: Db| async move {
    let World { ts, alice, carol, port, .. } = world(db).await;
    let tool = who_am_i_at_people(&ts, &alice, port).await;
    let code = format!(
        "const said = await (await $fetch('http://127.0.0.1:{port}/echo', {{account: 'people'}})).json();\n\
         console.log('the API said', said);\nif ($fail) throw new Error('upstream: ' + said);\nreturn said;"
    );
    let args = serde_json::from_value(json!([{"name": "fail", "type": {"kind": "boolean"}, "required": true}])).unwrap();
    ts.tools().save_version(&alice, tool.id, Source::parse(&code, args, None).unwrap(), "v2").await.unwrap();
    ts.tools().publish(&alice, tool.id, 2).await.unwrap();
    connect(&ts, &carol, "people", "carol").await;

    let ok = ts.tools().run_tool(&carol, tool.id, RunSource::Published, json!({"fail": false}), "mcp-http", None).await.unwrap();
    assert_eq!(ok.outcome.result.unwrap().to_json(), json!("authorization: Bearer {{secret:account.people}}"));
    assert!(!format!("{:?}", ok.outcome.console).contains("access-"), "{:?}", ok.outcome.console);
    let failed = ts.tools().run_tool(&carol, tool.id, RunSource::Published, json!({"fail": true}), "mcp-http", None).await.unwrap();
    let error = failed.outcome.result.unwrap_err().to_string();
    assert!(error.contains("{{secret:account.people}}") && !error.contains("access-"), "{error}");
    ts.usage().flush().await;

    // Kept for the author, with nothing of the token nor of what it fetched; a replay sends none.
    let kept = ts.tools().failed_calls(&alice, tool.id).await.unwrap();
    assert_eq!(kept.len(), 1);
    let recorded = ts.tools().failed_call(&alice, tool.id, kept[0].id).await.unwrap();
    let everything = format!("{recorded:?}");
    assert!(!everything.contains("access-carol") && everything.contains("{{secret:account.people}}"), "{everything}");
    // What came back was fetched as Carol: hers, not her tool's editors'.
    assert!(recorded.call.fetches.is_empty(), "{:?}", recorded.call.fetches);
    let replayed = ts.tools().replay_failed_call(&alice, tool.id, kept[0].id, RunSource::Version(2), json!({"fail": false})).await.unwrap();
    assert!(!format!("{replayed:?}").contains("access-carol"));
});

store_test!(maintainers_register_and_change_their_own_departments_apps_only_where_an_admin_allows, |db: Db| async move {
    let ts = Toolshed::new(db, settings());
    let root = admin(&ts).await;
    let (bob, carol) = (user(&ts, "bob", "finance").await, user(&ts, "carol", "legal").await);
    user(&ts, "alice", "finance").await;
    let alice = ts.membership().set_role(&root, "alice", Role::Maintainer).await.unwrap();
    let carol = ts.membership().set_role(&root, &carol.username, Role::Maintainer).await.unwrap();
    let (port, _) = provider();
    let finance = |name: &str| AppRegistration::parse(name, "finance", app_settings(port, "toolshed")).unwrap();
    fn forbidden<T>(r: Result<T, ConnectionError>) -> bool {
        matches!(r, Err(ConnectionError::Forbidden))
    }

    // Not allowed yet, and only an admin allows it.
    assert!(!ts.connections().may_register(&alice).await.unwrap());
    assert!(forbidden(ts.connections().register(&alice, finance("ledger")).await));
    let dept = DepartmentName::parse("finance").unwrap();
    let allowed = ts.admin().set_maintainers_register_apps(&alice, &dept, true).await;
    assert!(matches!(allowed, Err(toolshed_domain::admin::AdminError::Forbidden)), "{allowed:?}");
    ts.admin().set_maintainers_register_apps(&root, &dept, true).await.unwrap();
    assert!(ts.admin().admin_departments(&root).await.unwrap().iter().any(|d| d.name == "finance" && d.maintainers_register_apps));

    // Allowed: Alice registers for finance, and for nowhere else; Bob, an author there, does not.
    assert!(ts.connections().may_register(&alice).await.unwrap());
    let app = ts.connections().register(&alice, finance("ledger")).await.unwrap();
    assert_eq!(app.department.as_deref(), Some("finance"));
    assert!(forbidden(ts.connections().register(&alice, registration("everyone", port)).await), "a company-wide app is an admin's");
    ts.connections().register(&root, registration("everyone", port)).await.unwrap();
    let names = |apps: Vec<toolshed_domain::connections::App>| apps.into_iter().map(|a| a.name).collect::<Vec<_>>();
    assert_eq!(names(ts.connections().managed_apps(&alice).await.unwrap()), ["ledger"], "hers to change: her department's only");
    assert_eq!(names(ts.connections().managed_apps(&root).await.unwrap()), ["everyone", "ledger"]);
    assert!(ts.connections().managed_apps(&carol).await.unwrap().is_empty());
    let legal = AppRegistration::parse("contracts", "legal", app_settings(port, "toolshed")).unwrap();
    assert!(forbidden(ts.connections().register(&alice, legal).await));
    assert!(!ts.connections().may_register(&bob).await.unwrap());
    assert!(forbidden(ts.connections().register(&bob, finance("other")).await));
    // Carol maintains legal, whose setting is off: finance's app is not hers to change.
    assert!(forbidden(ts.connections().update(&carol, "ledger", app_settings(port, "stolen"), false).await));
    assert!(forbidden(ts.connections().remove(&carol, "ledger").await));

    let changed = ts.connections().update(&alice, "ledger", app_settings(port, "finance-client"), false).await.unwrap();
    assert_eq!(changed.client_id, "finance-client");
    // Withdrawn with the setting; an admin still may.
    ts.admin().set_maintainers_register_apps(&root, &dept, false).await.unwrap();
    assert!(forbidden(ts.connections().remove(&alice, "ledger").await));
    ts.connections().remove(&root, "ledger").await.unwrap();
});

store_test!(changing_an_app_applies_at_once_new_hosts_ask_to_reconnect_and_a_new_client_forgets_every_account, |db: Db| async move {
    let World { ts, root, alice, carol, port, provider } = world(db.clone()).await;
    let tool = who_am_i_at_people(&ts, &alice, port).await;
    connect(&ts, &carol, "people", "carol").await;
    let sealed =
        || async { sqlx::query("SELECT client_secret FROM oauth_apps").fetch_one(db.pool()).await.unwrap().get::<Option<Vec<u8>>, _>(0) };
    let secret = sealed().await;

    let hosts = |list: &[&str]| {
        let mut settings = app_settings(port, "toolshed");
        (settings.client_secret, settings.hosts) = (None, list.iter().map(|h| h.to_string()).collect());
        settings
    };
    let (api, other) = (format!("127.0.0.1:{port}"), "api.example.com");
    // Its tokens may go somewhere new: everyone connects again, having seen where.
    let app = ts.connections().update(&root, "people", hosts(&[&api, other]), false).await.unwrap();
    assert!(app.secret_set && sealed().await == secret, "an empty secret keeps the stored one");
    let Err(ToolError::NotConnected(again)) = run(&ts, &carol, tool.id).await else { panic!("reconnect") };
    assert!(again.reconnect);
    connect(&ts, &carol, "people", "carol").await;
    assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
    // Narrowed: still connected, and the token no longer goes to the host taken away, from the next call on.
    ts.connections().update(&root, "people", hosts(&[other]), false).await.unwrap();
    assert!(run(&ts, &carol, tool.id).await.unwrap().starts_with("failed:"), "its token is not sent to a host no longer the app's");
    let status = ts.connections().accounts(&carol).await.unwrap()[0].connected.as_ref().unwrap().status;
    assert_eq!(status, toolshed_domain::connections::AccountStatus::Connected);

    // A flow begun before a change of where codes and tokens go finishes nowhere.
    let (url, stale) = ts.connections().begin(&carol, "people").await.unwrap();
    let state = url::Url::parse(&url).unwrap().query_pairs().find(|(k, _)| k == "state").unwrap().1.into_owned();

    // A new client (its endpoints moved too): no token of the old one may reach it. The accounts
    // are revoked at the old endpoints and forgotten, and the secret, not typed again, is cleared.
    let mut moved = app_settings(port, "new-client");
    moved.client_secret = None;
    if let toolshed_domain::connections::EndpointsGiven::Each { revoke_url, .. } = &mut moved.endpoints {
        *revoke_url = None;
    }
    let app = ts.connections().update(&root, "people", moved, false).await.unwrap();
    assert!(!app.secret_set && sealed().await.is_none(), "the secret does not follow the endpoints unless typed again");
    assert!(provider.lock().unwrap().revoked.contains(&"refresh-carol".to_owned()), "revoked where it was issued");
    let Err(ToolError::NotConnected(again)) = run(&ts, &carol, tool.id).await else { panic!("forgotten") };
    assert!(!again.reconnect);
    let lost = ts.connections().finish(&carol, stale, &state, Ok("code-carol")).await.unwrap_err();
    assert!(matches!(lost, ConnectionError::FlowLost), "{lost:?}");
    connect(&ts, &carol, "people", "carol").await;
    assert_eq!(run(&ts, &carol, tool.id).await.unwrap(), "carol");
    let missing = ts.connections().update(&root, "nothing", app_settings(port, "x"), false).await.unwrap_err();
    assert!(matches!(missing, ConnectionError::NoSuchApp(_)), "{missing:?}");
});

store_test!(a_call_waiting_for_a_connection_wakes_when_it_is_made_on_another_replica, |db: Db| async move {
    // Replicas share the sealing key.
    let shared = settings();
    let (here, there) = (Toolshed::new(db.clone(), shared.clone()), Toolshed::new(db, shared));
    let root = admin(&here).await;
    let carol = user(&here, "carol", "legal").await;
    let (port, _) = provider();
    here.connections().register(&root, registration("people", port)).await.unwrap();
    let short = std::time::Duration::from_millis(300);
    assert!(!here.connections().wait_connected(&carol, "people", short).await.unwrap(), "nobody connected: it gives up");

    let waiting = tokio::spawn({
        let (here, carol) = (here.clone(), carol.clone());
        async move { here.connections().wait_connected(&carol, "people", std::time::Duration::from_secs(60)).await }
    });
    // The provider sends Carol back to the other replica.
    connect(&there, &carol, "people", "carol").await;
    assert!(waiting.await.unwrap().unwrap(), "woken by the connection, well before the minute");
    assert!(here.connections().wait_connected(&carol, "people", short).await.unwrap(), "already connected: at once");
});

store_test!(a_code_mode_call_whose_token_cannot_be_renewed_says_where_to_connect_again, |db: Db| async move {
    let World { ts, alice, carol, port, provider, .. } = world(db.clone()).await;
    let tool = who_am_i_at_people(&ts, &alice, port).await;
    let kit = ts.tools().create_bundle(&alice, NewTool::parse("kit", "Kit", "Who asks.", "kit", "everyone").unwrap()).await.unwrap();
    let members = [MemberSpec { tool: tool.id, pinned_version: None, exposed_name: String::new() }];
    ts.bundles().save_bundle_version(&alice, kit.id, &members, "first").await.unwrap();
    ts.tools().publish(&alice, kit.id, 1).await.unwrap();
    let kit = ts.code_mode().set_code_mode(&alice, kit.id, CodeMode::Instead).await.unwrap();
    connect(&ts, &carol, "people", "carol").await;
    let via = Via { transport: "test", token_id: None, bundle_id: None };
    let call = || ts.code_mode().run_code(&carol, &kit, "return await tools.who_am_i({});".into(), via);
    assert_eq!(call().await.unwrap().result.unwrap().to_json(), json!("carol"));

    // The token dropped, and the grant with it: the model's code is told
    // where Carol connects again, not the API's 401.
    {
        let mut p = provider.lock().unwrap();
        p.revoked.push("access-carol-1".into());
        p.refuse_refresh = true;
    }
    let failed = call().await.unwrap().result.unwrap_err().to_string();
    assert!(failed.contains("needs connecting again") && failed.contains("/connect/people"), "{failed}");
    assert!(!failed.contains("401"), "{failed}");
});
