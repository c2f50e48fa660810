//! Moderation over real HTTP: reports, the admins' queue, hide / disable /
//! restore / delete with the note the author reads, review before publish, and
//! what browse, listing pages, the Run panel and MCP endpoints answer meanwhile.

use crate::common::TestServer;
use serde_json::{json, Value};

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"tests","version":"1"}}}"#;

/// What the listing's MCP endpoint answers `initialize` with for this token.
async fn endpoint(srv: &TestServer, slug: &str, token: &str) -> (u16, String) {
    let res = reqwest::Client::new()
        .post(srv.url(&format!("/mcp/tools/{slug}")))
        .bearer_auth(token)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .body(INIT)
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

/// Alice (finance) publishes `fx_rate` for everyone; returns her client and its id.
async fn published(srv: &TestServer) -> (reqwest::Client, i64) {
    let alice = srv.member("alice", "finance").await;
    let tool = srv.create_tool(&alice, "fx_rate", "everyone").await;
    srv.publish(&alice, tool, "one").await;
    (alice, tool)
}

async fn detail(srv: &TestServer, client: &reqwest::Client) -> (u16, Value) {
    srv.call(client, "tools/detail", &[("department", "finance"), ("name", "fx_rate")]).await
}

async fn search(srv: &TestServer, client: &reqwest::Client, q: &str) -> Value {
    let (status, body) =
        srv.call(client, "market/browse", &[("q", q), ("department", ""), ("tag", ""), ("kind", ""), ("sort", ""), ("page", "")]).await;
    assert_eq!(status, 200, "{body}");
    body
}

async fn moderate(srv: &TestServer, admin: &reqwest::Client, tool: i64, action: &str, note: &str) -> (u16, Value) {
    srv.call(admin, "moderation/act", &[("tool", &tool.to_string()), ("action", action), ("note", note)]).await
}

/// The audit entries with this action, newest first, as the admin page shows them.
async fn audited(srv: &TestServer, admin: &reqwest::Client, action: &str) -> Vec<Value> {
    let (status, body) =
        srv.call(admin, "admin/audit", &[("action", action), ("actor", ""), ("target", ""), ("from", ""), ("to", ""), ("page", "")]).await;
    assert_eq!(status, 200, "{body}");
    body["entries"].as_array().unwrap().clone()
}

server_test!(a_reported_listing_hidden_by_an_admin_leaves_browse_search_and_its_endpoint_until_restored, |srv: TestServer| async move {
    let (alice, tool) = published(&srv).await;
    let bob = srv.member("bob", "sales").await;
    let admin = srv.admin().await;
    let (bob_token, alice_token, admin_token) = (srv.token("bob").await, srv.token("alice").await, srv.token("admin").await);

    let id = tool.to_string();
    let (status, body) = srv.call(&bob, "moderation/report", &[("tool", &id), ("reason", "  ")]).await;
    assert_eq!((status, body), (422, json!({"Invalid": "Reason: is required"})));
    let long = "x".repeat(1001);
    let (status, _) = srv.call(&bob, "moderation/report", &[("tool", &id), ("reason", &long)]).await;
    assert_eq!(status, 422, "a reason has a bounded length");
    let (status, _) = srv.call(&bob, "moderation/report", &[("tool", &id), ("reason", "Leaks customer <b>rates</b>")]).await;
    assert_eq!(status, 200);

    let (status, queue) = srv.call(&admin, "moderation/queue", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(queue.as_array().unwrap().len(), 1, "{queue}");
    assert_eq!((queue[0]["name"].clone(), queue[0]["status"].clone()), (json!("fx_rate"), json!("active")));
    assert_eq!(queue[0]["reports"][0]["reporter"], "bob");
    assert_eq!(queue[0]["reports"][0]["reason"], "Leaks customer <b>rates</b>");
    let (_, html) = srv.page(&admin, "/admin").await;
    assert!(html.contains("Leaks customer &lt;b&gt;rates&lt;/b&gt;"), "the queue shows the reason as text");

    let (status, body) = moderate(&srv, &admin, tool, "hide", "").await;
    assert_eq!((status, body), (422, json!({"Invalid": "Note: is required"})), "a note is required");
    assert_eq!(detail(&srv, &bob).await.0, 200, "nothing changed without a note");
    let (status, _) = moderate(&srv, &admin, tool, "hide", "Rates are confidential; ask legal.").await;
    assert_eq!(status, 200);

    let (_, queue) = srv.call(&admin, "moderation/queue", &[]).await;
    assert_eq!(queue, json!([]), "hiding resolved the report");
    assert_eq!(search(&srv, &bob, "fx").await["total"], 0, "gone from search");
    assert_eq!(search(&srv, &alice, "fx").await["total"], 0, "gone from search, for its author too");
    assert_eq!(detail(&srv, &bob).await, (404, json!("NotFound")), "its page answers others not found");
    assert_eq!(endpoint(&srv, "finance/fx_rate", &bob_token).await.0, 404, "its endpoint too");
    let (status, mine) = detail(&srv, &alice).await;
    assert_eq!(status, 200);
    assert_eq!(
        (mine["status"].clone(), mine["moderation"]["note"].clone()),
        (json!("hidden"), json!("Rates are confidential; ask legal."))
    );
    let (_, html) = srv.page(&alice, "/tools/finance/fx_rate").await;
    assert!(
        html.contains("Hidden by an administrator") && html.contains("Rates are confidential; ask legal."),
        "the author reads the note"
    );
    let (_, cards) = srv.call(&alice, "tools/mine", &[]).await;
    assert_eq!(
        (cards[0]["status"].clone(), cards[0]["moderation"]["note"].clone()),
        (json!("hidden"), json!("Rates are confidential; ask legal."))
    );
    assert_eq!(endpoint(&srv, "finance/fx_rate", &alice_token).await.0, 200, "its owner still reaches the endpoint");
    assert_eq!(endpoint(&srv, "finance/fx_rate", &admin_token).await.0, 200, "admins too");
    assert_eq!(detail(&srv, &admin).await.0, 200);

    let (status, _) = moderate(&srv, &admin, tool, "restore", "Legal cleared it.").await;
    assert_eq!(status, 200);
    assert_eq!(search(&srv, &bob, "fx").await["total"], 1);
    assert_eq!(detail(&srv, &bob).await.0, 200);
    assert_eq!(endpoint(&srv, "finance/fx_rate", &bob_token).await.0, 200);

    let hidden = &audited(&srv, &admin, "tool.hidden").await[0];
    assert_eq!((hidden["actor"].clone(), hidden["target"].clone()), (json!("admin"), json!("tool:finance/fx_rate")));
    assert!(
        hidden["change"].as_str().unwrap().contains(r#""status":"active""#)
            && hidden["change"].as_str().unwrap().contains(r#""status":"hidden""#),
        "{hidden}"
    );
    assert_eq!(audited(&srv, &admin, "tool.restored").await.len(), 1);
    assert_eq!(audited(&srv, &admin, "report.filed").await[0]["actor"], "bob");
});

server_test!(a_disabled_listing_stays_visible_but_its_endpoint_and_run_panel_refuse_calls_until_restored, |srv: TestServer| async move {
    let (alice, tool) = published(&srv).await;
    let bob = srv.member("bob", "sales").await;
    let admin = srv.admin().await;
    let (bob_token, alice_token) = (srv.token("bob").await, srv.token("alice").await);
    let (status, _) = moderate(&srv, &admin, tool, "disable", "Calls a retired API.").await;
    assert_eq!(status, 200);

    assert_eq!(search(&srv, &bob, "fx").await["total"], 0, "a disabled listing is not offered in browse");
    let (status, body) = detail(&srv, &bob).await;
    assert_eq!((status, body["status"].clone()), (200, json!("disabled")), "but its page still opens");
    assert_eq!(
        body["moderation"],
        json!({"note": null, "pending_version": null, "review_note": null, "pending_text": null, "held": null}),
        "the note is for its authors"
    );
    for token in [&bob_token, &alice_token] {
        let (status, text) = endpoint(&srv, "finance/fx_rate", token).await;
        assert_eq!((status, text.as_str()), (403, "This listing has been disabled by an administrator.\n"));
    }
    let (status, body) = srv.server_fn(&bob, "tools/run", json!({"tool": tool, "target": "Published", "input": "{}"})).await;
    assert_eq!((status, body), (403, json!({"Refused": "This listing has been disabled by an administrator; it refuses calls."})));
    let (_, html) = srv.page(&alice, "/tools/finance/fx_rate").await;
    assert!(html.contains("it refuses calls") && html.contains("Calls a retired API."), "the Run panel and the note say so");

    let (status, _) = moderate(&srv, &admin, tool, "restore", "Fixed.").await;
    assert_eq!(status, 200);
    assert_eq!(endpoint(&srv, "finance/fx_rate", &bob_token).await.0, 200);
    let (_, body) = srv.server_fn(&bob, "tools/run", json!({"tool": tool, "target": "Published", "input": "{}"})).await;
    assert_eq!(body["result"], "one");
    let disabled = &audited(&srv, &admin, "tool.disabled").await[0];
    assert!(disabled["change"].as_str().unwrap().contains("Calls a retired API."), "{disabled}");
});

server_test!(a_deleted_listing_is_seen_by_admins_only_keeps_its_name_and_can_be_restored, |srv: TestServer| async move {
    let (alice, tool) = published(&srv).await;
    let admin = srv.admin().await;
    let (status, _) = moderate(&srv, &admin, tool, "delete", "Duplicate of finance/rates.").await;
    assert_eq!(status, 200);
    assert_eq!(detail(&srv, &alice).await.0, 404, "its owner no longer sees it");
    let (_, mine) = srv.call(&alice, "tools/mine", &[]).await;
    assert_eq!(mine, json!([]));
    assert_eq!(endpoint(&srv, "finance/fx_rate", &srv.token("alice").await).await.0, 404);
    srv.post_form(
        &alice,
        "/api/tools/create",
        &[("name", "fx_rate"), ("title", "again"), ("description", ""), ("tags", ""), ("visibility", "everyone")],
    )
    .await;
    let (_, mine) = srv.call(&alice, "tools/mine", &[]).await;
    assert_eq!(mine, json!([]), "the name stays taken: nothing is freed");
    let (status, body) = detail(&srv, &admin).await;
    assert_eq!((status, body["status"].clone()), (200, json!("deleted")));
    moderate(&srv, &admin, tool, "restore", "Deleted by mistake.").await;
    assert_eq!(detail(&srv, &alice).await.0, 200);
    assert_eq!(audited(&srv, &admin, "tool.deleted").await.len(), 1);
});

server_test!(in_a_review_department_a_publish_waits_and_the_endpoint_keeps_the_approved_version, |srv: TestServer| async move {
    let (alice, tool) = published(&srv).await;
    let admin = srv.admin().await;
    let (status, _) = srv.call(&admin, "admin/departments/review", &[("name", "finance"), ("review", "required")]).await;
    assert_eq!(status, 200);
    let served = || async {
        srv.server_fn(&alice, "tools/run", json!({"tool": tool, "target": "Published", "input": "{}"})).await.1["result"].clone()
    };

    srv.publish(&alice, tool, "two").await;
    let (_, info) = detail(&srv, &alice).await;
    assert_eq!((info["published_version"].clone(), info["moderation"]["pending_version"].clone()), (json!(1), json!(2)));
    assert_eq!(served().await, "one", "the endpoint keeps serving the approved version");
    let (_, html) = srv.page(&alice, "/tools/finance/fx_rate/edit").await;
    assert!(html.contains("v2 waiting for review"), "the editor says so");
    let (_, queue) = srv.call(&admin, "moderation/queue", &[]).await;
    assert_eq!((queue[0]["pending_version"].clone(), queue[0]["reports"].clone()), (json!(2), json!([])));

    let id = tool.to_string();
    let (status, body) = srv.call(&admin, "moderation/review", &[("tool", &id), ("decision", "reject"), ("note", "")]).await;
    assert_eq!((status, body), (422, json!({"Invalid": "Note: is required"})));
    let (status, _) =
        srv.call(&admin, "moderation/review", &[("tool", &id), ("decision", "reject"), ("note", "Hard-codes a password.")]).await;
    assert_eq!(status, 200);
    let (_, info) = detail(&srv, &alice).await;
    assert_eq!(
        info["moderation"],
        json!({"note": null, "pending_version": null, "review_note": "Hard-codes a password.", "pending_text": null, "held": null})
    );
    assert_eq!(served().await, "one", "rejection leaves the endpoint as it was");
    let (status, _) = srv.call(&admin, "moderation/review", &[("tool", &id), ("decision", "approve"), ("note", "ok")]).await;
    assert_eq!(status, 409, "nothing waits any more");

    srv.publish(&alice, tool, "three").await;
    let (status, _) = srv.call(&admin, "moderation/review", &[("tool", &id), ("decision", "approve"), ("note", "Looks good.")]).await;
    assert_eq!(status, 200);
    assert_eq!(served().await, "three");
    let (_, info) = detail(&srv, &alice).await;
    assert_eq!((info["published_version"].clone(), info["moderation"]["pending_version"].clone()), (json!(3), Value::Null));
    let published = &audited(&srv, &admin, "tool.published").await[0];
    assert_eq!(published["actor"], "admin");
    assert_eq!(audited(&srv, &admin, "tool.publish_requested").await.len(), 2);
    assert_eq!(audited(&srv, &admin, "tool.review_rejected").await.len(), 1);
});
