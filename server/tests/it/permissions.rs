//! A tool's permissions label: computed from its settings, sent to MCP clients
//! as annotations and `_meta`, shown and filtered on in the catalog, and
//! enforced: a read-only tool's `$fetch` sends nothing but GET and HEAD.

use crate::common::TestServer;
use crate::mcp::{Session, INIT};
use crate::secrets::Recorder;
use serde_json::{json, Value};

/// `finance/{name}` by `client`: allowed to reach `allow`, read-only or not,
/// with a secret `API_KEY`, published with `code`; returns its id.
pub(crate) async fn tool(srv: &TestServer, client: &reqwest::Client, name: &str, allow: &str, read_only: bool, code: &str) -> i64 {
    let id = srv.create_tool(client, name, "everyone").await;
    let id_text = id.to_string();
    let mut settings = vec![("title", name), ("description", "Looks things up."), ("timeout_ms", "5000"), ("fetch_allow", allow)];
    if read_only {
        settings.push(("read_only_hint", "true"));
    }
    srv.set_settings(client, id, &settings).await;
    let set = [("tool", id_text.as_str()), ("name", "API_KEY"), ("value", "k-123"), ("kind", "secret"), ("hosts", "")];
    assert_eq!(srv.call(client, "tools/env/set", &set).await.0, 200);
    let (status, version) =
        srv.server_fn(client, "tools/save_version", json!({"tool": id, "code": code, "args": [], "changelog": "v1"})).await;
    assert_eq!(status, 200, "{version}");
    srv.publish_version(client, id, version.as_i64().unwrap()).await;
    id
}

async fn browse(srv: &TestServer, client: &reqwest::Client, can: &str) -> Vec<String> {
    let form = [("q", ""), ("department", ""), ("tag", ""), ("kind", ""), ("sort", "newest"), ("page", ""), ("can", can)];
    let (status, found) = srv.call(client, "market/browse", &form).await;
    assert_eq!(status, 200, "{found}");
    found["cards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}/{}", c["department"].as_str().unwrap(), c["name"].as_str().unwrap()))
        .collect()
}

server_test!(a_read_only_tool_is_labelled_held_to_reading_and_found_by_the_filter, |srv: TestServer| async move {
    let api = Recorder::start().await;
    let alice = srv.member("alice", "finance").await;
    let allow = format!("127.0.0.1:{}", api.port);
    let code = format!(
        "const read = await (await $fetch('{base}/rates')).status;\n\
         const write = await $fetch('{base}/orders', {{ method: 'POST', body: 'buy' }}).then(() => 'sent', e => e.message);\n\
         return {{ read, write }};",
        base = api.base
    );
    tool(&srv, &alice, "lookup", &allow, true, &code).await;
    tool(&srv, &alice, "trader", &allow, false, &code).await;

    // Enforced: the read went out, the write did not.
    let token = srv.token("alice").await;
    let session = Session::open(srv.url("/mcp/tools/finance/lookup"), &token).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lookup", "arguments": {}}});
    let reply = session.request(&call.to_string()).await.pop().unwrap();
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"read": 200, "write": "this tool is read-only: $fetch sends only GET and HEAD requests, not POST"}),
        "{reply}"
    );
    assert!(api.received().contains("GET /rates") && !api.received().contains("POST /orders"), "{}", api.received());
    let trader = Session::open(srv.url("/mcp/tools/finance/trader"), &token).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "trader", "arguments": {}}});
    let reply = trader.request(&call.to_string()).await.pop().unwrap();
    assert_eq!(reply["result"]["structuredContent"]["write"], "sent", "{reply}");

    // Told to MCP clients: annotations from the label, and the label itself in `_meta`.
    let listed = session.request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).await.pop().unwrap();
    let listed: &Value = &listed["result"]["tools"][0];
    assert_eq!(listed["annotations"], json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": true}), "{listed}");
    assert_eq!(listed["_meta"]["toolshed/permissions"], json!({"hosts": [allow], "secrets": ["API_KEY"], "writes": false}));
    let echo = Session::open(srv.url("/mcp/tools/demo/echo"), &token).await;
    let listed = echo.request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#).await.pop().unwrap();
    assert_eq!(listed["result"]["tools"][0]["annotations"]["openWorldHint"], false);

    // Shown on the listing page's data, and filtered on in browse.
    let (_, detail) = srv.call(&alice, "tools/detail", &[("department", "finance"), ("name", "trader")]).await;
    assert_eq!(detail["permissions"], json!({"hosts": [allow], "secrets": ["API_KEY"], "writes": true, "accounts": []}));
    let read_only = browse(&srv, &alice, "read_only").await;
    assert!(read_only.contains(&"finance/lookup".to_owned()) && !read_only.contains(&"finance/trader".to_owned()), "{read_only:?}");
    let offline = browse(&srv, &alice, "offline").await;
    assert!(!offline.contains(&"finance/lookup".to_owned()) && offline.contains(&"demo/echo".to_owned()), "{offline:?}");
    assert_eq!(browse(&srv, &alice, "").await.len(), browse(&srv, &alice, "").await.len());
    let (status, _) = srv
        .call(
            &alice,
            "market/browse",
            &[("q", ""), ("department", ""), ("tag", ""), ("kind", ""), ("sort", ""), ("page", ""), ("can", "root")],
        )
        .await;
    assert_eq!(status, 422);
    let _ = INIT;
});
