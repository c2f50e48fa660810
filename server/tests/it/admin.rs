//! Administration over real HTTP: roles, deactivation, departments, the audit
//! log's filters, and members forging calls to admin server functions.

use crate::common::{redirected_error, TestServer};
use serde_json::{json, Value};

async fn users(srv: &TestServer, admin: &reqwest::Client) -> Vec<Value> {
    let (status, body) = srv.call(admin, "admin/users", &[]).await;
    assert_eq!(status, 200, "{body}");
    body.as_array().unwrap().clone()
}

fn user<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter().find(|u| u["username"] == name).unwrap()
}

async fn audit(srv: &TestServer, admin: &reqwest::Client, filter: &[(&str, &str)]) -> Value {
    let mut form = vec![("action", ""), ("actor", ""), ("target", ""), ("from", ""), ("to", ""), ("page", "")];
    for (k, v) in filter {
        form.iter_mut().find(|(f, _)| f == k).unwrap().1 = v;
    }
    let (status, body) = srv.call(admin, "admin/audit", &form).await;
    assert_eq!(status, 200, "{body}");
    body
}

server_test!(deactivating_a_user_ends_their_sessions_and_tokens_at_once, |srv: TestServer| async move {
    let bob = srv.member("bob", "sales").await;
    let token = srv.token("bob").await;
    let admin = srv.admin().await;
    let srv_ref = &srv;
    let mcp = |token: String| async move { srv_ref.mcp_initialize_status("/mcp/tools/demo/echo", &token).await };
    assert_eq!(srv.call(&bob, "tools/mine", &[]).await.0, 200);
    assert_eq!(mcp(token.clone()).await, 200);

    let (status, _) = srv.call(&admin, "admin/users/status", &[("username", "bob"), ("status", "deactivated")]).await;
    assert_eq!(status, 200);
    assert_eq!(srv.call(&bob, "tools/mine", &[]).await, (401, json!("NotSignedIn")), "the open session is dead at once");
    assert_eq!(mcp(token.clone()).await, 401, "so is the token");
    let res = srv.sign_in(&srv.browser(), "bob").await;
    assert!(redirected_error(&res).is_some(), "and signing in is refused");
    assert!(!user(&users(&srv, &admin).await, "bob")["is_active"].as_bool().unwrap());

    let (status, _) = srv.call(&admin, "admin/users/status", &[("username", "bob"), ("status", "active")]).await;
    assert_eq!(status, 200);
    assert_eq!(srv.call(&bob, "tools/mine", &[]).await.0, 401, "old sessions stay dead after reactivation");
    let again = srv.browser();
    let res = srv.sign_in(&again, "bob").await;
    assert!(redirected_error(&res).is_none());
    assert_eq!(srv.call(&again, "tools/mine", &[]).await.0, 200);
    assert_eq!(mcp(token).await, 200, "tokens were not revoked, only refused while deactivated");

    let (status, body) = srv.call(&admin, "admin/users/status", &[("username", "admin"), ("status", "deactivated")]).await;
    assert_eq!((status, body), (409, json!({"Conflict": "You cannot deactivate your own account."})));
    let change = &audit(&srv, &admin, &[("action", "user.deactivated")]).await["entries"][0];
    assert_eq!(
        (change["target"].clone(), change["change"].clone()),
        (json!("user:bob"), json!(r#"{"is_active":true} → {"is_active":false}"#))
    );
});

server_test!(a_user_deactivated_on_one_replica_loses_their_token_on_the_others_within_a_second, |srv: TestServer| async move {
    srv.member("bob", "sales").await;
    let token = srv.token("bob").await;
    let other = srv.replica().await;
    let url = other.url("/mcp/tools/demo/echo");
    assert_eq!(crate::common::mcp_initialize_status(&url, &token).await, 200, "the other replica now holds bob's token in its call cache");

    let admin = srv.admin().await;
    let (status, _) = srv.call(&admin, "admin/users/status", &[("username", "bob"), ("status", "deactivated")]).await;
    assert_eq!(status, 200);
    // The other replica is a process: it learns of the change when its change
    // feed next reads the audit log, and nothing outside it can wait for that
    // but its answers. So ask until it refuses, a little apart.
    let since = std::time::Instant::now();
    while crate::common::mcp_initialize_status(&url, &token).await != 401 {
        assert!(since.elapsed() < std::time::Duration::from_secs(2), "the other replica still accepts the token");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
});

server_test!(admins_promote_and_demote_but_the_last_admin_cannot_demote_themself, |srv: TestServer| async move {
    let admin = srv.admin().await;
    let (status, body) = srv.call(&admin, "admin/users/role", &[("username", "admin"), ("role", "member")]).await;
    assert_eq!((status, body), (409, json!({"Conflict": "The last active administrator cannot be demoted or deactivated."})));

    let carol = srv.member("carol", "it").await;
    assert_eq!(srv.call(&carol, "admin/users", &[]).await.0, 403);
    let (status, _) = srv.call(&admin, "admin/users/role", &[("username", "carol"), ("role", "admin")]).await;
    assert_eq!(status, 200);
    assert_eq!(srv.call(&carol, "admin/users", &[]).await.0, 200, "the promotion takes effect in the open session");
    let (status, _) = srv.call(&carol, "admin/users/role", &[("username", "admin"), ("role", "member")]).await;
    assert_eq!(status, 200, "with another admin, demoting one is fine");
    assert_eq!(srv.call(&admin, "admin/users", &[]).await.0, 403);
    let (status, _) = srv.call(&carol, "admin/users/role", &[("username", "carol"), ("role", "member")]).await;
    assert_eq!(status, 409, "carol is the last admin now");
    let (status, body) = srv.call(&carol, "admin/users/role", &[("username", "nobody"), ("role", "admin")]).await;
    assert_eq!((status, body), (422, json!({"Invalid": "No user “nobody”."})));

    let log = audit(&srv, &carol, &[("action", "user.")]).await;
    let actions: Vec<_> =
        log["entries"].as_array().unwrap().iter().map(|e| (e["action"].as_str().unwrap(), e["actor"].as_str().unwrap())).take(2).collect();
    assert_eq!(actions, [("user.demoted", "carol"), ("user.promoted", "admin")]);
});

server_test!(moving_a_user_changes_which_department_listings_they_see, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "ledger", "department").await;
    srv.publish(&alice, tool, "entries").await;
    let bob = srv.member("bob", "sales").await;
    let admin = srv.admin().await;
    let srv = &srv;
    let open = |c: reqwest::Client| async move { srv.call(&c, "tools/detail", &[("department", "finance"), ("name", "ledger")]).await.0 };
    assert_eq!(open(bob.clone()).await, 404);

    let (status, body) = srv.call(&admin, "admin/users/department", &[("username", "bob"), ("department", "nowhere")]).await;
    assert_eq!((status, body), (422, json!({"Invalid": "No department “nowhere”."})));
    let (status, _) = srv.call(&admin, "admin/users/department", &[("username", "bob"), ("department", "finance")]).await;
    assert_eq!(status, 200);
    assert_eq!(open(bob.clone()).await, 200, "bob now sees finance's department listings");
    assert_eq!(user(&users(srv, &admin).await, "bob")["department"], "finance");
    let moved = &audit(srv, &admin, &[("action", "user.department_changed")]).await["entries"][0];
    assert_eq!(moved["change"], r#"{"department":"sales"} → {"department":"finance"}"#);
});

server_test!(departments_are_created_and_retitled_but_keep_their_slug, |srv: TestServer| async move {
    let admin = srv.admin().await;
    let (status, _) = srv.call(&admin, "admin/departments/create", &[("name", "legal-ops"), ("title", "Legal operations")]).await;
    assert_eq!(status, 200);
    let (status, body) = srv.call(&admin, "admin/departments/create", &[("name", "legal-ops"), ("title", "Again")]).await;
    assert_eq!((status, body), (409, json!({"Conflict": "The department “legal-ops” already exists."})));
    let (status, _) = srv.call(&admin, "admin/departments/create", &[("name", "Bad Name!"), ("title", "x")]).await;
    assert_eq!(status, 422);
    let (status, _) = srv.call(&admin, "admin/departments/rename", &[("name", "legal-ops"), ("title", "Legal & compliance")]).await;
    assert_eq!(status, 200);
    let (_, list) = srv.call(&admin, "admin/departments", &[]).await;
    let dept = list.as_array().unwrap().iter().find(|d| d["name"] == "legal-ops").unwrap().clone();
    assert_eq!(
        dept,
        json!({"name": "legal-ops", "title": "Legal & compliance", "review_required": false, "tests_required": false,
            "maintainers_register_apps": false, "members": 0})
    );
    let (status, _) = srv.call(&admin, "admin/departments/rename", &[("name", "nowhere"), ("title", "x")]).await;
    assert_eq!(status, 422);
    let renamed = &audit(&srv, &admin, &[("target", "department:legal-ops"), ("action", "department.renamed")]).await["entries"][0];
    assert_eq!(renamed["change"], r#"{"title":"Legal operations"} → {"title":"Legal & compliance"}"#);
});

server_test!(every_admin_server_function_refuses_a_forged_request_from_a_member, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "fx_rate", "everyone").await;
    srv.publish(&alice, tool, "one").await;
    let mallory = srv.member("mallory", "sales").await;
    let id = tool.to_string();
    let forged: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("admin/users", vec![]),
        ("admin/users/role", vec![("username", "mallory"), ("role", "admin")]),
        ("admin/users/status", vec![("username", "alice"), ("status", "deactivated")]),
        ("admin/users/department", vec![("username", "mallory"), ("department", "finance")]),
        ("admin/departments", vec![]),
        ("admin/departments/create", vec![("name", "evil"), ("title", "Evil")]),
        ("admin/departments/rename", vec![("name", "finance"), ("title", "Pwned")]),
        ("admin/departments/review", vec![("name", "finance"), ("review", "required")]),
        ("admin/audit", vec![("action", ""), ("actor", ""), ("target", ""), ("from", ""), ("to", ""), ("page", "")]),
        ("admin/policy", vec![]),
        (
            "admin/policy/set",
            vec![("max_timeout_ms", "60000"), ("max_task_timeout_ms", "600000"), ("max_memory_mib", "1024"), ("fetch_hosts", "")],
        ),
        ("moderation/queue", vec![]),
        ("moderation/act", vec![("tool", &id), ("action", "hide"), ("note", "mine now")]),
        ("moderation/review", vec![("tool", &id), ("decision", "approve"), ("note", "ok")]),
    ];
    for (endpoint, form) in &forged {
        let (status, body) = srv.call(&mallory, endpoint, form).await;
        assert_eq!((status, body), (403, json!("Forbidden")), "{endpoint}");
        // The same request as a plain HTML form post: refused too, with the error carried back.
        let res = srv.post_form(&mallory, &format!("/api/{endpoint}"), form).await;
        assert_eq!(redirected_error(&res), Some(json!("Forbidden")), "{endpoint} (form)");
    }
    let (status, _) = srv.call(&srv.browser(), "admin/users", &[]).await;
    assert_eq!(status, 401, "signed out: not even that");
    let admin = srv.admin().await;
    let list = users(&srv, &admin).await;
    assert!(
        !user(&list, "mallory")["is_admin"].as_bool().unwrap() && user(&list, "alice")["is_active"].as_bool().unwrap(),
        "nothing changed"
    );
    let (_, detail) = srv.call(&alice, "tools/detail", &[("department", "finance"), ("name", "fx_rate")]).await;
    assert_eq!(detail["status"], "active");
});

server_test!(the_audit_log_filters_by_action_actor_target_and_date_and_pages, |srv: TestServer| async move {
    // Alice joins by invitation first: her department is the oldest of 61 created.
    srv.member("alice", "finance").await;
    let admin = srv.admin().await;
    for i in 0..60 {
        srv.call(&admin, "admin/departments/create", &[("name", &format!("team-{i:02}")), ("title", "Team")]).await;
    }

    let first = audit(&srv, &admin, &[("action", "department.created")]).await;
    assert_eq!((first["entries"].as_array().unwrap().len(), first["has_more"].clone()), (50, json!(true)));
    assert_eq!(first["entries"][0]["target"], "department:team-59", "newest first");
    let second = audit(&srv, &admin, &[("action", "department.created"), ("page", "2")]).await;
    assert_eq!((second["entries"].as_array().unwrap().len(), second["has_more"].clone()), (11, json!(false)));

    let by_alice = audit(&srv, &admin, &[("actor", "alice")]).await;
    assert_eq!(by_alice["entries"].as_array().unwrap().iter().map(|e| e["action"].clone()).collect::<Vec<_>>(), [json!("user.registered")]);
    let target = audit(&srv, &admin, &[("target", "department:team-0")]).await;
    assert_eq!(target["entries"].as_array().unwrap().len(), 10, "targets match by prefix");
    let literal = audit(&srv, &admin, &[("target", "department:team_0")]).await;
    assert_eq!(literal["entries"], json!([]), "an underscore is a character, not a wildcard");

    let today = audit(&srv, &admin, &[("from", "2000-01-01"), ("to", "2999-12-31"), ("actor", "alice")]).await;
    assert_eq!(today["entries"].as_array().unwrap().len(), 1);
    let past = audit(&srv, &admin, &[("to", "2000-01-01")]).await;
    assert_eq!(past["entries"], json!([]));
    let (status, body) = srv
        .call(&admin, "admin/audit", &[("action", ""), ("actor", ""), ("target", ""), ("from", "yesterday"), ("to", ""), ("page", "")])
        .await;
    assert_eq!((status, body), (422, json!({"Invalid": "From: must be a date like 2026-01-31"})));
    let (_, html) = srv.page(&admin, "/admin/audit?action=user.&actor=alice").await;
    assert!(html.contains("user.registered") && html.contains("user:alice"), "the page works from its URL");
});

server_test!(tool_health_ranks_for_admins_the_listings_that_failed_and_slowed_most_in_the_last_day, |srv: TestServer| async move {
    let alice = srv.member("alice", "finance").await;
    let flaky = crate::permissions::tool(&srv, &alice, "flaky", "", false, "return 'ok';").await;
    let broken = crate::permissions::tool(&srv, &alice, "broken", "", false, "throw new Error('always');").await;
    let slow = crate::permissions::tool(&srv, &alice, "slow", "", false, "return 1;").await;
    let token = srv.token("alice").await;
    // flaky: one good call and two refused for an argument it does not take.
    let calls = [("flaky", json!({})), ("flaky", json!({"x": 1})), ("flaky", json!({"x": 2})), ("broken", json!({}))];
    for (i, (name, args)) in calls.into_iter().enumerate() {
        let session = crate::mcp::Session::open(srv.url(&format!("/mcp/tools/finance/{name}")), &token).await;
        session.request(&crate::mcp::call(i as u32 + 1, name, args)).await;
    }
    srv.flush_usage().await;
    // Durations of 0.1 s to 2 s (far above any real call's) make the nearest-rank
    // figures exact: p50 the 10th, p95 the 19th. A call refused before any code
    // ran counts as a call and an error, not in the durations; one older than a day not at all.
    let pool = crate::upstream::pool(&srv).await;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let day_and_an_hour_ago = now - 25 * 3_600_000;
    let ran = (1..=20).map(|n| (now, Some(1), n * 100_000, "ok"));
    let records = ran.chain([(now, None, 9_000_000, "invalid_arguments"), (day_and_an_hour_ago, Some(1), 900_000_000, "ok")]);
    for (at_ms, version, duration_us, outcome) in records {
        sqlx::query(
            "INSERT INTO usage_records (at_ms, tool_id, version, user_id, transport, duration_us, outcome) \
             SELECT $1, $2, $3, id, 'mcp-http', $4, $5 FROM users WHERE username = 'alice'",
        )
        .bind(at_ms)
        .bind(slow)
        .bind(version)
        .bind(duration_us)
        .bind(outcome)
        .execute(&pool)
        .await
        .unwrap();
    }

    let admin = srv.admin().await;
    let (status, ranking) = srv.call(&admin, "admin/health", &[]).await;
    assert_eq!(status, 200, "{ranking}");
    let figures = |l: &Value| (l["id"].as_i64().unwrap(), l["calls"].as_i64().unwrap(), l["errors"].as_i64().unwrap());
    let failing: Vec<_> = ranking["failing"].as_array().unwrap().iter().map(figures).collect();
    assert_eq!(
        failing,
        [(flaky, 3, 2), (broken, 1, 1), (slow, 21, 1)],
        "the most failed calls first, then the higher rate; no listing without a failure: {ranking}"
    );
    let slowest = &ranking["slowest"][0];
    assert_eq!(figures(slowest), (slow, 21, 1), "{ranking}");
    assert_eq!((slowest["p50_ms"].as_f64(), slowest["p95_ms"].as_f64()), (Some(1000.0), Some(1900.0)));
    assert_eq!(slowest["href"], "/tools/finance/slow");
    assert_eq!(ranking["slowest"].as_array().unwrap().len(), 3);

    let (status, page) = srv.page(&admin, "/admin/health").await;
    assert_eq!(status, 200);
    assert!(page.contains("Failing most") && page.contains("href=\"/tools/finance/flaky\"") && page.contains("1900 ms"), "{page}");

    let (status, body) = srv.call(&alice, "admin/health", &[]).await;
    assert_eq!(status, 403, "only admins see every department's listings: {body}");
    let (_, page) = srv.page(&alice, "/admin/health").await;
    assert!(!page.contains("href=\"/tools/finance/slow\""), "{page}");
});
