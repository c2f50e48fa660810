//! The registry API: the listings a caller may see, in the official MCP
//! Registry's format (its shape is checked against the published schema by
//! the browser tests, `end2end/tests/registry.test.mjs`).

use serde_json::Value;

use crate::common::TestServer;

async fn get(srv: &TestServer, path: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(srv.url(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn names(list: &Value) -> Vec<String> {
    list["servers"].as_array().unwrap().iter().map(|s| s["server"]["name"].as_str().unwrap().to_owned()).collect()
}

server_test!(the_registry_lists_what_the_callers_token_may_see_with_each_endpoint, |srv: TestServer| async move {
    let (status, problem) = get(&srv, "/v0.1/servers", None).await;
    assert_eq!(status, 401);
    assert!(problem["detail"].as_str().unwrap().contains("API token"), "{problem}");
    assert_eq!(get(&srv, "/v0.1/servers", Some("tsk_not_a_token")).await.0, 401);

    let carol = srv.member("carol", "research").await;
    let secret = srv.create_tool(&carol, "secret", "private").await;
    srv.publish(&carol, secret, "mine").await;
    let shared = srv.create_tool(&carol, "shared", "everyone").await;
    srv.publish(&carol, shared, "v1").await;
    srv.publish(&carol, shared, "v2").await;
    srv.member("erin", "sales").await;

    let (status, list) = get(&srv, "/v0.1/servers", Some(&srv.token("erin"))).await;
    assert_eq!(status, 200, "{list}");
    let listed = names(&list);
    assert!(listed.contains(&"127.0.0.1.tools/research.shared".to_owned()), "{listed:?}");
    assert!(listed.contains(&"127.0.0.1.tools/demo.echo".to_owned()) && listed.contains(&"127.0.0.1.bundles/demo.text_kit".to_owned()));
    assert!(!listed.iter().any(|n| n.ends_with("research.secret")), "another person's private tool: {listed:?}");
    let shared_entry =
        list["servers"].as_array().unwrap().iter().find(|s| s["server"]["name"] == "127.0.0.1.tools/research.shared").unwrap();
    assert_eq!(shared_entry["server"]["version"], "2.0.0");
    assert_eq!(shared_entry["server"]["remotes"][0]["type"], "streamable-http");
    assert_eq!(shared_entry["server"]["remotes"][0]["url"], srv.url("/mcp/tools/research/shared"));
    assert_eq!(shared_entry["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"], true);
    assert_eq!(list["metadata"]["count"], listed.len());
    // Its owner sees the private one.
    assert!(names(&get(&srv, "/v0.1/servers", Some(&srv.token("carol"))).await.1).iter().any(|n| n.ends_with("research.secret")));

    // Versions: newest first, older ones pinned.
    let name = "127.0.0.1.tools%2Fresearch.shared";
    let (status, versions) = get(&srv, &format!("/v0.1/servers/{name}/versions"), Some(&srv.token("erin"))).await;
    assert_eq!(status, 200, "{versions}");
    let versions = versions["servers"].as_array().unwrap().clone();
    assert_eq!(versions.iter().map(|v| v["server"]["version"].as_str().unwrap()).collect::<Vec<_>>(), ["2.0.0", "1.0.0"]);
    assert_eq!(versions[1]["server"]["remotes"][0]["url"], srv.url("/mcp/tools/research/shared@v1"));
    assert_eq!(versions[1]["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"], false);
    let (status, latest) = get(&srv, &format!("/v0.1/servers/{name}/versions/latest"), Some(&srv.token("erin"))).await;
    assert_eq!((status, latest["server"]["version"].as_str()), (200, Some("2.0.0")));
    let (status, one) = get(&srv, &format!("/v0.1/servers/{name}/versions/1.0.0"), Some(&srv.token("erin"))).await;
    assert_eq!((status, one["server"]["version"].as_str()), (200, Some("1.0.0")));
    assert_eq!(get(&srv, &format!("/v0.1/servers/{name}/versions/7.0.0"), Some(&srv.token("erin"))).await.0, 404);
    let hidden = "127.0.0.1.tools%2Fresearch.secret";
    assert_eq!(get(&srv, &format!("/v0.1/servers/{hidden}/versions/latest"), Some(&srv.token("erin"))).await.0, 404);
    assert_eq!(get(&srv, "/v0.1/servers/nonsense/versions/latest", Some(&srv.token("erin"))).await.0, 404);

    // A token limited to one listing sees that one only.
    let (status, scoped) =
        srv.call(&carol, "tokens/create", &[("name", "registry"), ("expires_in_days", ""), ("scope", "research/shared")]).await;
    assert_eq!(status, 200, "{scoped}");
    assert_eq!(names(&get(&srv, "/v0.1/servers", scoped.as_str()).await.1), ["127.0.0.1.tools/research.shared"]);

    // Clients that take a base URL only (VS Code) put the token in the path.
    let erin = srv.token("erin");
    let (status, by_path) = get(&srv, &format!("/registry/{erin}/v0.1/servers"), None).await;
    assert_eq!(status, 200);
    assert_eq!(names(&by_path), listed);
    let (status, one) = get(&srv, &format!("/registry/{erin}/v0.1/servers/{name}/versions/1.0.0"), None).await;
    assert_eq!((status, one["server"]["version"].as_str()), (200, Some("1.0.0")));
    let (status, all) = get(&srv, &format!("/registry/{erin}/v0.1/servers/{name}/versions"), None).await;
    assert_eq!((status, all["metadata"]["count"].as_u64()), (200, Some(2)));
    assert_eq!(get(&srv, "/registry/tsk_wrong/v0.1/servers", None).await.0, 401);
});

server_test!(the_registry_pages_by_name_and_searches_names_and_titles, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    for name in ["alpha", "bravo", "charlie"] {
        let id = srv.create_tool_titled(&carol, name, &format!("The {name} tool"), "everyone").await;
        srv.publish(&carol, id, name).await;
    }
    let token = srv.token("carol");
    let (_, all) = get(&srv, "/v0.1/servers?limit=100", Some(&token)).await;
    let all = names(&all);
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            Some(c) => format!("/v0.1/servers?limit=2&cursor={c}"),
            None => "/v0.1/servers?limit=2".to_owned(),
        };
        let (status, page) = get(&srv, &path, Some(&token)).await;
        assert_eq!(status, 200);
        assert!(page["servers"].as_array().unwrap().len() <= 2);
        seen.extend(names(&page));
        match page["metadata"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, all, "pages cover everything once, in order");
    let (_, found) = get(&srv, "/v0.1/servers?search=BRAVO", Some(&token)).await;
    assert_eq!(names(&found), ["127.0.0.1.tools/research.bravo"]);
    let (_, found) = get(&srv, "/v0.1/servers?search=the%20charlie", Some(&token)).await;
    assert_eq!(names(&found), ["127.0.0.1.tools/research.charlie"]);
    assert_eq!(get(&srv, "/v0.1/servers?limit=0", Some(&token)).await.0, 422);
    assert_eq!(get(&srv, "/v0.1/servers?limit=101", Some(&token)).await.0, 422);
});
