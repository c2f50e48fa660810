//! External MCP servers' registration rules, on SQLite and on PostgreSQL: who
//! may register for which department, names, sealed credentials, edits and
//! removal. (Talking to a real server is in server/tests/it/upstream.rs.)

use crate::support::finance_and_legal as world;
use toolshed_domain::names::Role;
use toolshed_domain::names::{DepartmentName, Invalid};
use toolshed_domain::upstream::{CredentialChange, ServerName, ServerSpec, Transport, UpstreamError};
use toolshed_domain::{Db, User};

/// Never contacted: registration must not need the server up, and these
/// tests' Toolshed allows no internal host, so loopback is refused unasked.
const DOWN: &str = "http://127.0.0.1:9/mcp";

fn spec(credential: CredentialChange) -> ServerSpec {
    ServerSpec {
        url: toolshed_domain::upstream::parse_url(DOWN).unwrap(),
        transport: Transport::StreamableHttp,
        credential,
        timeout_ms: 5_000,
    }
}

fn header(value: &str) -> CredentialChange {
    CredentialChange::parse("header", "X-Api-Key", value).unwrap()
}

fn dept(name: &str) -> DepartmentName {
    DepartmentName::parse(name).unwrap()
}

fn admin(of: &User) -> User {
    User { is_admin: true, ..of.clone() }
}

store_test!(only_admins_and_allowed_authors_register_servers_for_their_department, |db: Db| async move {
    let (ts, alice, _bob, carol) = world(db).await;
    let root = admin(&carol);
    let name = |n: &str| ServerName::parse(n).unwrap();
    assert!(matches!(
        ts.upstreams().register_mcp_server(&alice, &dept("finance"), &name("a"), spec(CredentialChange::Clear)).await,
        Err(UpstreamError::Forbidden)
    ));
    assert!(!ts.upstreams().may_register_servers(&alice).await.unwrap());
    assert!(matches!(ts.upstreams().set_authors_register_servers(&alice, &dept("finance"), true).await, Err(UpstreamError::Forbidden)));

    ts.upstreams().set_authors_register_servers(&root, &dept("finance"), true).await.unwrap();
    assert!(ts.upstreams().may_register_servers(&alice).await.unwrap());
    let mine = ts.upstreams().register_mcp_server(&alice, &dept("finance"), &name("a"), spec(CredentialChange::Clear)).await.unwrap();
    assert!(mine.may_manage);
    assert!(mine.last_error.as_deref().unwrap().contains("internal address"), "registered, with the reason it has no tools");
    assert!(matches!(
        ts.upstreams().register_mcp_server(&alice, &dept("legal"), &name("b"), spec(CredentialChange::Clear)).await,
        Err(UpstreamError::Forbidden)
    ));
    assert!(matches!(
        ts.upstreams().register_mcp_server(&root, &dept("nowhere"), &name("c"), spec(CredentialChange::Clear)).await,
        Err(UpstreamError::Invalid(_))
    ));

    // Carol (legal) sees neither finance's servers nor may she touch them; the admin sees all.
    assert!(ts.upstreams().mcp_servers(&carol).await.unwrap().is_empty());
    assert!(matches!(ts.upstreams().refresh_mcp_server(&carol, mine.id).await, Err(UpstreamError::NotFound)));
    assert_eq!(ts.upstreams().mcp_servers(&root).await.unwrap().len(), 1);
    ts.upstreams().set_authors_register_servers(&root, &dept("finance"), false).await.unwrap();
    assert!(matches!(ts.upstreams().remove_mcp_server(&alice, mine.id).await, Err(UpstreamError::Forbidden)), "withdrawn with the setting");
    assert!(!ts.upstreams().mcp_servers(&alice).await.unwrap()[0].may_manage);
});

store_test!(maintainers_manage_their_departments_servers_and_members_never_do, |db: Db| async move {
    let (ts, alice, bob, carol) = world(db).await;
    let root = admin(&carol);
    let name = |n: &str| ServerName::parse(n).unwrap();
    // Alice maintains finance: no admin setting needed, but only for finance.
    let alice = ts.membership().set_role(&root, &alice.username, Role::Maintainer).await.unwrap();
    assert!(ts.upstreams().may_register_servers(&alice).await.unwrap());
    let server =
        ts.upstreams().register_mcp_server(&alice, &dept("finance"), &name("ledger"), spec(CredentialChange::Clear)).await.unwrap();
    assert!(server.may_manage);
    assert!(matches!(
        ts.upstreams().register_mcp_server(&alice, &dept("legal"), &name("other"), spec(CredentialChange::Clear)).await,
        Err(UpstreamError::Forbidden)
    ));
    // Bob is a member of finance: even with authors allowed, he only sees the server.
    let bob = ts.membership().set_role(&root, &bob.username, Role::Member).await.unwrap();
    ts.upstreams().set_authors_register_servers(&root, &dept("finance"), true).await.unwrap();
    assert!(!ts.upstreams().may_register_servers(&bob).await.unwrap());
    assert!(matches!(ts.upstreams().remove_mcp_server(&bob, server.id).await, Err(UpstreamError::Forbidden)));
    assert!(!ts.upstreams().mcp_servers(&bob).await.unwrap()[0].may_manage);
    assert!(ts.upstreams().remove_mcp_server(&alice, server.id).await.is_ok());
});

store_test!(a_servers_credential_is_stored_sealed_and_can_be_kept_replaced_or_cleared, |db: Db| async move {
    let (ts, alice, _bob, _carol) = world(db.clone()).await;
    let root = admin(&alice);
    let s = ts
        .upstreams()
        .register_mcp_server(&root, &dept("finance"), &ServerName::parse("vault").unwrap(), spec(header("s3cret-value")))
        .await
        .unwrap();
    assert_eq!((s.credential_kind.as_str(), s.credential_name.as_str(), s.credential_set), ("header", "X-Api-Key", true));
    let sealed: Vec<u8> = sqlx::query_scalar("SELECT credential_sealed FROM mcp_servers").fetch_one(db.pool()).await.unwrap();
    assert!(!sealed.windows(6).any(|w| w == b"s3cret"), "never in clear");

    let kept = ts.upstreams().update_mcp_server(&root, s.id, spec(CredentialChange::Keep)).await.unwrap();
    assert!(kept.credential_set);
    let after: Vec<u8> = sqlx::query_scalar("SELECT credential_sealed FROM mcp_servers").fetch_one(db.pool()).await.unwrap();
    assert_eq!(after, sealed, "kept as it was");
    let replaced =
        ts.upstreams().update_mcp_server(&root, s.id, spec(CredentialChange::parse("query", "key", "other").unwrap())).await.unwrap();
    assert_eq!((replaced.credential_kind.as_str(), replaced.credential_name.as_str(), replaced.credential_set), ("query", "key", true));
    let cleared = ts.upstreams().update_mcp_server(&root, s.id, spec(CredentialChange::Clear)).await.unwrap();
    assert_eq!((cleared.credential_kind.as_str(), cleared.credential_set), ("none", false));

    let audit: Vec<String> =
        sqlx::query_scalar("SELECT COALESCE(after_json, '') FROM audit_log WHERE target = 'mcp_server:vault' ORDER BY id")
            .fetch_all(db.pool())
            .await
            .unwrap();
    assert_eq!(audit.len(), 4, "registered and three edits: {audit:?}");
    assert!(audit.iter().all(|a| !a.contains("s3cret") && !a.contains("other")), "the audit log says what changed, never the value");

    ts.upstreams().remove_mcp_server(&root, s.id).await.unwrap();
    assert!(ts.upstreams().mcp_servers(&root).await.unwrap().is_empty());
});

store_test!(server_names_are_unique_and_make_double_underscore_tool_names, |db: Db| async move {
    let (ts, alice, _bob, carol) = world(db).await;
    let root = admin(&alice);
    ts.upstreams()
        .register_mcp_server(&root, &dept("finance"), &ServerName::parse("github").unwrap(), spec(CredentialChange::Clear))
        .await
        .unwrap();
    let again = ts
        .upstreams()
        .register_mcp_server(&admin(&carol), &dept("legal"), &ServerName::parse("github").unwrap(), spec(CredentialChange::Clear))
        .await;
    assert!(matches!(again, Err(UpstreamError::NameTaken(n)) if n == "github"), "unique across departments: server__tool means one server");
    for bad in ["", "GitHub", "git__hub", "hub_", "1hub", "a b", &"x".repeat(33)] {
        assert!(ServerName::parse(bad).is_err(), "{bad:?}");
    }
    let reason = |r: Result<CredentialChange, Invalid>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(reason(CredentialChange::parse("header", "", "v")).contains("needs a name and a value"));
    assert!(reason(CredentialChange::parse("header", "X-Key", "a\nb")).contains("no line breaks"));
    assert!(reason(CredentialChange::parse("cookie", "a", "b")).contains("none, header or query"));
    assert!(toolshed_domain::upstream::parse_url("ftp://x/").is_err());
    assert!(toolshed_domain::upstream::parse_url("https://user:pw@x/").is_err());
    assert!(toolshed_domain::upstream::parse_timeout(10).is_err());
});

store_test!(moving_a_server_to_another_url_clears_the_credential_it_was_given, |db: Db| async move {
    let (ts, alice, _bob, _carol) = world(db).await;
    let root = admin(&alice);
    let s = ts
        .upstreams()
        .register_mcp_server(&root, &dept("finance"), &ServerName::parse("vault").unwrap(), spec(header("s3cret")))
        .await
        .unwrap();
    let moved =
        ServerSpec { url: toolshed_domain::upstream::parse_url("http://listener.example/mcp").unwrap(), ..spec(CredentialChange::Keep) };
    let after = ts.upstreams().update_mcp_server(&root, s.id, moved).await.unwrap();
    assert_eq!((after.credential_kind.as_str(), after.credential_set), ("none", false), "not sent to the new address");
    let again = ServerSpec { url: toolshed_domain::upstream::parse_url("http://listener.example/mcp").unwrap(), ..spec(header("new")) };
    assert!(
        ts.upstreams().update_mcp_server(&root, s.id, again).await.unwrap().credential_set,
        "a credential given with the new URL is kept"
    );
});

store_test!(a_server_at_an_internal_address_is_refused_without_being_contacted, |db: Db| async move {
    let (ts, alice, _bob, _carol) = world(db).await;
    let root = admin(&alice);
    let metadata =
        ServerSpec { url: toolshed_domain::upstream::parse_url("http://169.254.169.254/mcp").unwrap(), ..spec(CredentialChange::Keep) };
    let s = ts.upstreams().register_mcp_server(&root, &dept("finance"), &ServerName::parse("meta").unwrap(), metadata).await.unwrap();
    let status = s.last_error.expect("no tools, and why");
    assert!(status.contains("internal address"), "{status}");
});
