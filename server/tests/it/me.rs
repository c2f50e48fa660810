//! The personal endpoint `/mcp/me`: everything a person may use, found,
//! described, called and combined in code through four tools, and the tools
//! they starred listed directly. (The TypeScript and Python SDKs are in end2end/.)

use crate::common::TestServer;
use crate::mcp::{call, Events, Session, INIT};
use serde_json::{json, Value};

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

/// The result of calling `name` with `args` in `session`.
async fn result(session: &Session, name: &str, args: Value) -> Value {
    let reply = session.request(&call(9, name, args)).await.pop().unwrap();
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"].clone()
}

async fn listed_names(session: &Session) -> Vec<String> {
    let listed = session.request(LIST).await.pop().unwrap();
    listed["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// The `department/name`s a search finds, best first.
async fn found(session: &Session, args: Value) -> Vec<String> {
    let r = result(session, "search_tools", args).await;
    assert_eq!(r["isError"], false, "{r}");
    r["structuredContent"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// A published tool `research/{name}` by `user` (a research author) that returns `text`.
async fn published(srv: &TestServer, client: &reqwest::Client, name: &str, visibility: &str, text: &str) -> i64 {
    let tool = srv.create_tool_titled(client, name, &name.replace('_', " "), visibility).await;
    srv.publish(client, tool, text).await;
    tool
}

async fn usage(url: &str) -> Vec<(String, String)> {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    sqlx::query_as("SELECT transport, outcome FROM usage_records ORDER BY id").fetch_all(&pool).await.unwrap()
}

server_test!(the_personal_endpoint_lists_four_tools_and_finds_describes_and_calls_any_tool, |srv: TestServer| async move {
    let session = Session::open(srv.url("/mcp/me"), &srv.token("admin").await).await;
    assert_eq!(listed_names(&session).await, ["search_tools", "describe_tool", "call_tool", "run_code"]);

    // A sentence, as a model asks: its keywords find the tool.
    let hits = result(&session, "search_tools", json!({"query": "How many words are in this text?"})).await;
    let first = &hits["structuredContent"]["tools"][0];
    assert_eq!(first["name"], "demo/word_stats", "{hits}");
    assert_eq!(first["title"], "Word statistics");
    assert!(first["tokens"].as_u64().unwrap() > 50, "{first}");
    assert_eq!(found(&session, json!({"query": "convert feet to metres", "limit": 1})).await, ["demo/convert_units"]);
    assert!(found(&session, json!({"query": "zzzz qqqq"})).await.is_empty());
    let bad = result(&session, "search_tools", json!({"limit": 500})).await;
    assert_eq!(
        (bad["isError"].clone(), bad["content"][0]["text"].clone()),
        (json!(true), json!("limit: must be a whole number from 1 to 25"))
    );

    let described = result(&session, "describe_tool", json!({"name": "demo/word_stats"})).await["structuredContent"].clone();
    assert_eq!(described["name"], "demo/word_stats");
    assert_eq!(described["inputSchema"]["required"], json!(["text"]));
    assert_eq!(described["version"], 1);

    let called = result(&session, "call_tool", json!({"name": "demo/word_stats", "arguments": {"text": "a b a"}})).await;
    assert_eq!(called["structuredContent"]["words"], 3, "{called}");
    let wrong = result(&session, "call_tool", json!({"name": "demo/word_stats", "arguments": {"text": 7}})).await;
    assert_eq!(wrong["isError"], true, "bad arguments are the model's to fix: {wrong}");
    let unknown = result(&session, "call_tool", json!({"name": "demo/nope"})).await;
    assert_eq!(unknown["content"][0]["text"], "There is no tool named “demo/nope” here.");
    // Only what is listed is served by name: `department/name` goes through call_tool.
    let direct = session.request(&call(3, "demo/word_stats", json!({"text": "a"}))).await.pop().unwrap();
    assert_eq!(direct["error"]["code"], -32602, "{direct}");
    drop(session);

    let url = srv.db.url.clone();
    srv.flush_usage().await;
    // Recorded as direct calls are, marked as having come through the personal endpoint.
    assert_eq!(usage(&url).await, [("mcp-http+me".into(), "ok".into()), ("mcp-http+me".into(), "invalid_arguments".into())]);
});

server_test!(
    with_a_sentence_model_search_finds_tools_by_meaning_and_only_visible_ones,
    ["--embedding-model", crate::common::embedding_model()],
    |srv: TestServer| async move {
        let carol = srv.member("carol", "research").await;
        published(&srv, &carol, "laptop_order", "everyone", "ordered").await;
        published(&srv, &carol, "laptop_for_the_board", "department", "ordered").await;
        srv.member("mallory", "sales").await;
        let mallory = Session::open(srv.url("/mcp/me"), &srv.token("mallory").await).await;
        let carol_me = Session::open(srv.url("/mcp/me"), &srv.token("carol").await).await;
        // Not a word in common with "laptop order": the listings are found by
        // meaning once the server has encoded them (in the background, on
        // publish; one may be done before the other). The domain says nothing
        // when its encoder has caught up (calling `catch_up` from here would do
        // the server's work for it), so search as carol, who may see both,
        // until both show up, a little apart.
        let query = json!({"query": "I need a new notebook computer"});
        let both = ["research/laptop_order".to_owned(), "research/laptop_for_the_board".to_owned()];
        let started = std::time::Instant::now();
        let mut carols = found(&carol_me, query.clone()).await;
        while !both.iter().all(|name| carols.contains(name)) && started.elapsed().as_secs() < 20 {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            carols = found(&carol_me, query.clone()).await;
        }
        assert!(both.iter().all(|name| carols.contains(name)), "{carols:?}");
        let hits = found(&mallory, query).await;
        assert_eq!(hits.first().map(String::as_str), Some("research/laptop_order"), "{hits:?}");
        assert!(!hits.contains(&both[1]), "that one is research's only: {hits:?}");
        assert!(found(&mallory, json!({"query": "zzzz qqqq"})).await.is_empty(), "gibberish finds nothing");
    }
);

server_test!(what_a_person_may_not_see_is_neither_found_described_nor_called, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let plan = published(&srv, &carol, "secret_plan", "department", "the plan").await;
    published(&srv, &carol, "public_plan", "everyone", "a plan for all").await;
    srv.member("mallory", "sales").await;
    let mallory = Session::open(srv.url("/mcp/me"), &srv.token("mallory").await).await;
    assert_eq!(found(&mallory, json!({"query": "plan"})).await, ["research/public_plan"]);
    for (name, args) in [("describe_tool", json!({"name": "research/secret_plan"})), ("call_tool", json!({"name": "research/secret_plan"}))]
    {
        let r = result(&mallory, name, args).await;
        assert_eq!(r["content"][0]["text"], "There is no tool named “research/secret_plan” here.", "{name}: {r}");
    }
    let code = json!({"code": "return await tools['research/secret_plan']({});"});
    let r = result(&mallory, "run_code", code).await;
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"].as_str().unwrap().contains("there is no tool “research/secret_plan” you may use"), "{r}");

    // Its department sees it, until an admin hides it: then nobody's catalog holds it.
    let carol_me = Session::open(srv.url("/mcp/me"), &srv.token("carol").await).await;
    assert_eq!(found(&carol_me, json!({"query": "secret plan"})).await[0], "research/secret_plan");
    let admin = srv.admin().await;
    let (status, _) = srv.call(&admin, "moderation/act", &[("tool", &plan.to_string()), ("action", "hide"), ("note", "Leaked.")]).await;
    assert_eq!(status, 200);
    assert!(!found(&carol_me, json!({"query": "secret plan"})).await.contains(&"research/secret_plan".to_owned()));
    let r = result(&carol_me, "call_tool", json!({"name": "research/secret_plan"})).await;
    assert_eq!(r["isError"], true, "hidden is out of the catalog, for its owner too: {r}");
});

server_test!(a_disabled_tool_says_so_and_a_scoped_token_holds_only_its_listings, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let broken = published(&srv, &carol, "broken_tool", "everyone", "never").await;
    published(&srv, &carol, "shared_tool", "everyone", "shared").await;
    let admin = srv.admin().await;
    let (status, _) =
        srv.call(&admin, "moderation/act", &[("tool", &broken.to_string()), ("action", "disable"), ("note", "Broken.")]).await;
    assert_eq!(status, 200);
    let me = Session::open(srv.url("/mcp/me"), &srv.token("carol").await).await;
    let r = result(&me, "call_tool", json!({"name": "research/broken_tool"})).await;
    assert_eq!(r["content"][0]["text"], "This listing has been disabled by an administrator; it refuses calls.");

    let (status, scoped) =
        srv.call(&carol, "tokens/create", &[("name", "one tool"), ("expires_in_days", ""), ("scope", "research/shared_tool")]).await;
    assert_eq!(status, 200, "{scoped}");
    let scoped = Session::open(srv.url("/mcp/me"), scoped.as_str().unwrap()).await;
    assert_eq!(found(&scoped, json!({})).await, ["research/shared_tool"]);
    assert!(found(&scoped, json!({"query": "word statistics"})).await.is_empty());
    let r = result(&scoped, "call_tool", json!({"name": "demo/echo", "arguments": {"text": "x"}})).await;
    assert_eq!(r["isError"], true, "outside the token's scope: {r}");
    let r = result(&scoped, "call_tool", json!({"name": "research/shared_tool"})).await;
    assert_eq!(r["content"][0]["text"], "shared");
});

server_test!(starred_tools_are_listed_beside_the_four_and_sessions_hear_of_each_star, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let greeting = published(&srv, &carol, "greeting", "everyone", "hi").await;
    let other = srv.replica().await;
    let session = Session::open(other.url("/mcp/me"), &srv.token("carol").await).await;
    let mut events = session.listen().await;

    let (status, starred) = srv.call(&carol, "listings/favourite", &[("tool", &greeting.to_string()), ("favourite", "true")]).await;
    assert_eq!((status, starred), (200, json!(true)));
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed", "told on another replica too");
    assert_eq!(listed_names(&session).await, ["search_tools", "describe_tool", "call_tool", "run_code", "research__greeting"]);
    assert_eq!(result(&session, "research__greeting", json!({})).await["content"][0]["text"], "hi");
    // The listing page shows the star.
    let (_, detail) = srv.call(&carol, "tools/detail", &[("department", "research"), ("name", "greeting")]).await;
    assert_eq!(detail["favourite"], true);

    // A favourite's publish changes its definition: its sessions are told.
    srv.publish(&carol, greeting, "hello").await;
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    assert_eq!(result(&session, "research__greeting", json!({})).await["content"][0]["text"], "hello");

    srv.call(&carol, "listings/favourite", &[("tool", &greeting.to_string()), ("favourite", "false")]).await;
    assert_eq!(events.message().await["method"], "notifications/tools/list_changed");
    assert_eq!(listed_names(&session).await.len(), 4);
    let gone = session.request(&call(4, "research__greeting", json!({}))).await.pop().unwrap();
    assert_eq!(gone["error"]["code"], -32602, "{gone}");

    // Nobody stars what they may not see.
    let secret = published(&srv, &carol, "secret", "private", "s").await;
    let mallory = srv.member("mallory", "sales").await;
    let (status, _) = srv.call(&mallory, "listings/favourite", &[("tool", &secret.to_string()), ("favourite", "true")]).await;
    assert_eq!(status, 404);
});

server_test!(run_code_on_the_personal_endpoint_calls_any_tool_by_department_and_name, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let greeting = published(&srv, &carol, "greeting", "everyone", "hi").await;
    srv.call(&carol, "listings/favourite", &[("tool", &greeting.to_string()), ("favourite", "true")]).await;
    let session = Session::open(srv.url("/mcp/me"), &srv.token("carol").await).await;
    let code = "const a = await tools['research/greeting']({});\n\
                const b = await tools.research__greeting({});\n\
                const w = await tools['demo/word_stats']({text: 'x y z'});\n\
                console.log(a, b, w.words);";
    let r = result(&session, "run_code", json!({"code": code})).await;
    assert_eq!((r["isError"].clone(), r["content"][0]["text"].clone()), (json!(false), json!("hi hi 3")), "{r}");
    let r = result(&session, "run_code", json!({"code": "\nawait tools['demo/word_stats']({text: 1});"})).await;
    assert_eq!(r["isError"], true);
    assert!(r["content"][0]["text"].as_str().unwrap().ends_with("(line 2)"), "{r}");
    // Below code mode's own 30 s, the admin's ceiling is a program's limit.
    let ceiling = [("max_timeout_ms", "1000"), ("max_task_timeout_ms", "600000"), ("max_memory_mib", "1024"), ("fetch_hosts", "")];
    assert_eq!(srv.call(&srv.admin().await, "admin/policy/set", &ceiling).await.0, 200);
    let r = result(&session, "run_code", json!({"code": "while (true) {}"})).await;
    assert!(r["content"][0]["text"].as_str().unwrap().starts_with("Timed out after 1000 ms"), "{r}");
    drop(session);

    let url = srv.db.url.clone();
    srv.flush_usage().await;
    let through = |outcome: &str| ("mcp-http+me+run_code".to_owned(), outcome.to_owned());
    assert_eq!(usage(&url).await, [through("ok"), through("ok"), through("ok"), through("invalid_arguments")]);
});

server_test!(a_personal_endpoint_session_answers_only_its_owner_and_speaks_legacy_sse, |srv: TestServer| async move {
    srv.member("mallory", "research").await;
    let (admin, mallory) = (srv.token("admin").await, srv.token("mallory").await);
    let session = Session::open(srv.url("/mcp/me"), &admin).await;
    let stolen = Session { url: session.url.clone(), token: mallory.clone(), id: session.id.clone() };
    assert_eq!(stolen.post(LIST).await.status(), 404);
    // Nor is it a listing's session.
    let moved = Session { url: srv.url("/mcp/tools/demo/echo"), token: admin.clone(), id: session.id.clone() };
    assert_eq!(moved.post(LIST).await.status(), 404);
    let res = reqwest::Client::new().post(srv.url("/mcp/me")).header("Content-Type", "application/json").body(INIT).send().await.unwrap();
    assert_eq!(res.status(), 401);

    let res = reqwest::Client::new().get(srv.url("/mcp/me/sse")).bearer_auth(&mallory).send().await.unwrap();
    let mut events = Events::from(res);
    let endpoint = events.next().await.1;
    let res = reqwest::Client::new()
        .post(srv.url(&endpoint))
        .bearer_auth(&mallory)
        .header("Content-Type", "application/json")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 202);
    let info = events.message().await["result"].clone();
    assert_eq!(info["serverInfo"]["name"], "toolshed-mallory");
    assert!(info["instructions"].as_str().unwrap().contains("search_tools"), "{info}");
});
