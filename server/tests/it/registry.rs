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

    // One page holds them all (the demo data alone is more than the default page).
    let (status, list) = get(&srv, "/v0.1/servers?limit=100", Some(&srv.token("erin").await)).await;
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
    assert!(names(&get(&srv, "/v0.1/servers?limit=100", Some(&srv.token("carol").await)).await.1)
        .iter()
        .any(|n| n.ends_with("research.secret")));

    // Versions: newest first, older ones pinned.
    let name = "127.0.0.1.tools%2Fresearch.shared";
    let (status, versions) = get(&srv, &format!("/v0.1/servers/{name}/versions"), Some(&srv.token("erin").await)).await;
    assert_eq!(status, 200, "{versions}");
    let versions = versions["servers"].as_array().unwrap().clone();
    assert_eq!(versions.iter().map(|v| v["server"]["version"].as_str().unwrap()).collect::<Vec<_>>(), ["2.0.0", "1.0.0"]);
    assert_eq!(versions[1]["server"]["remotes"][0]["url"], srv.url("/mcp/tools/research/shared@v1"));
    assert_eq!(versions[1]["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"], false);
    let (status, latest) = get(&srv, &format!("/v0.1/servers/{name}/versions/latest"), Some(&srv.token("erin").await)).await;
    assert_eq!((status, latest["server"]["version"].as_str()), (200, Some("2.0.0")));
    let (status, one) = get(&srv, &format!("/v0.1/servers/{name}/versions/1.0.0"), Some(&srv.token("erin").await)).await;
    assert_eq!((status, one["server"]["version"].as_str()), (200, Some("1.0.0")));
    assert_eq!(get(&srv, &format!("/v0.1/servers/{name}/versions/7.0.0"), Some(&srv.token("erin").await)).await.0, 404);
    let hidden = "127.0.0.1.tools%2Fresearch.secret";
    assert_eq!(get(&srv, &format!("/v0.1/servers/{hidden}/versions/latest"), Some(&srv.token("erin").await)).await.0, 404);
    assert_eq!(get(&srv, "/v0.1/servers/nonsense/versions/latest", Some(&srv.token("erin").await)).await.0, 404);

    // A token limited to one listing sees that one only.
    let (status, scoped) =
        srv.call(&carol, "tokens/create", &[("name", "registry"), ("expires_in_days", ""), ("scope", "research/shared")]).await;
    assert_eq!(status, 200, "{scoped}");
    assert_eq!(names(&get(&srv, "/v0.1/servers", scoped.as_str()).await.1), ["127.0.0.1.tools/research.shared"]);

    // Clients that take a base URL only (VS Code) put the token in the path.
    let erin = srv.token("erin").await;
    let (status, by_path) = get(&srv, &format!("/registry/{erin}/v0.1/servers?limit=100"), None).await;
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
    let token = srv.token("carol").await;
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

/// The research department's entries of a list: name, version, and whether it is the latest.
fn research(list: &Value) -> Vec<(String, String, bool)> {
    let official = "io.modelcontextprotocol.registry/official";
    list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["server"]["name"].as_str().unwrap().starts_with("127.0.0.1.tools/research."))
        .map(|s| {
            let version = s["server"]["version"].as_str().unwrap().to_owned();
            (s["server"]["name"].as_str().unwrap().to_owned(), version, s["_meta"][official]["isLatest"].as_bool().unwrap())
        })
        .collect()
}

fn entry(name: &str, version: &str, latest: bool) -> (String, String, bool) {
    (format!("127.0.0.1.tools/research.{name}"), version.to_owned(), latest)
}

/// Every page of `path` (which has a `limit`), following `nextCursor`.
async fn all_pages(srv: &TestServer, path: &str, token: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page_path = match &cursor {
            Some(c) => format!("{path}&cursor={c}"),
            None => path.to_owned(),
        };
        let (status, page) = get(srv, &page_path, Some(token)).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(names(&page));
        match page["metadata"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return seen,
        }
    }
}

server_test!(the_registry_lists_the_servers_at_an_exact_version_and_pages_through_them, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let alpha = srv.create_tool(&carol, "alpha", "everyone").await;
    srv.publish(&carol, alpha, "one").await;
    srv.publish(&carol, alpha, "two").await;
    let bravo = srv.create_tool(&carol, "bravo", "everyone").await;
    srv.publish(&carol, bravo, "one").await;
    srv.create_tool(&carol, "charlie", "everyone").await;
    let token = srv.token("carol").await;

    // Version 1 of every listing that served it: Alpha's is no longer its latest, and pinned.
    let (status, ones) = get(&srv, "/v0.1/servers?version=1.0.0&limit=100", Some(&token)).await;
    assert_eq!(status, 200, "{ones}");
    assert_eq!(research(&ones), [entry("alpha", "1.0.0", false), entry("bravo", "1.0.0", true)]);
    let alpha_one = ones["servers"].as_array().unwrap().iter().find(|s| s["server"]["name"] == "127.0.0.1.tools/research.alpha").unwrap();
    assert_eq!(alpha_one["server"]["remotes"][0]["url"], srv.url("/mcp/tools/research/alpha@v1"));
    assert_eq!(ones["metadata"]["count"], ones["servers"].as_array().unwrap().len());
    let (_, twos) = get(&srv, "/v0.1/servers?version=2.0.0&limit=100", Some(&token)).await;
    assert_eq!(research(&twos), [entry("alpha", "2.0.0", true)]);
    // `latest` is what the list shows without a version.
    let (_, latest) = get(&srv, "/v0.1/servers?version=latest&limit=100", Some(&token)).await;
    assert_eq!(research(&latest), [entry("alpha", "2.0.0", true), entry("bravo", "1.0.0", true)]);
    assert_eq!(latest, get(&srv, "/v0.1/servers?limit=100", Some(&token)).await.1);
    // A version no listing here has.
    let (status, none) = get(&srv, "/v0.1/servers?version=1.2.3", Some(&token)).await;
    assert_eq!((status, names(&none).len()), (200, 0));

    // Pages of a filtered list cover it once, in order.
    assert_eq!(all_pages(&srv, "/v0.1/servers?version=1.0.0&limit=1", &token).await, names(&ones));
    assert_eq!(all_pages(&srv, "/v0.1/servers?version=2.0.0&limit=1", &token).await, names(&twos));
});

/// An entry's `updatedAt`, in Unix ms.
fn updated_ms(server: &Value) -> i64 {
    let at = server["_meta"]["io.modelcontextprotocol.registry/official"]["updatedAt"].as_str().unwrap();
    let t = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).unwrap();
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

fn rfc3339(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).unwrap();
    t.format(&time::format_description::well_known::Rfc3339).unwrap()
}

server_test!(the_registry_lists_the_servers_updated_since_a_time_and_refuses_a_malformed_one, |srv: TestServer| async move {
    let carol = srv.member("carol", "research").await;
    let alpha = srv.create_tool(&carol, "alpha", "everyone").await;
    srv.publish(&carol, alpha, "one").await;
    let bravo = srv.create_tool(&carol, "bravo", "everyone").await;
    srv.publish(&carol, bravo, "one").await;
    srv.publish(&carol, bravo, "two").await;
    let token = srv.token("carol").await;
    let (_, all) = get(&srv, "/v0.1/servers?limit=100", Some(&token)).await;
    let all = all["servers"].as_array().unwrap().clone();
    let alpha_at = updated_ms(all.iter().find(|s| s["server"]["name"] == "127.0.0.1.tools/research.alpha").unwrap());

    // Updated after the time, strictly: Alpha is in a millisecond before its update, and out at it.
    for since in [alpha_at - 1, alpha_at] {
        let query = format!("/v0.1/servers?limit=100&updated_since={}", rfc3339(since));
        let (status, list) = get(&srv, &query, Some(&token)).await;
        assert_eq!(status, 200, "{list}");
        let expected: Vec<&str> = all.iter().filter(|s| updated_ms(s) > since).map(|s| s["server"]["name"].as_str().unwrap()).collect();
        assert_eq!(names(&list), expected, "{query}");
        assert_eq!(names(&list).contains(&"127.0.0.1.tools/research.alpha".to_owned()), since < alpha_at);
    }
    let (_, everything) = get(&srv, "/v0.1/servers?limit=100&updated_since=2000-01-01T00:00:00Z", Some(&token)).await;
    assert_eq!(everything["servers"].as_array().unwrap(), &all);
    // With an offset (`+` encoded, or it is a space).
    let (status, nothing) = get(&srv, "/v0.1/servers?updated_since=2100-01-01T02:00:00.5%2B02:00", Some(&token)).await;
    assert_eq!((status, names(&nothing).len()), (200, 0));
    // With a version: each listing's version 1 and its own update time.
    let (_, ones) = get(&srv, "/v0.1/servers?limit=100&version=1.0.0", Some(&token)).await;
    let query = format!("/v0.1/servers?limit=100&version=1.0.0&updated_since={}", rfc3339(alpha_at));
    let (_, recent_ones) = get(&srv, &query, Some(&token)).await;
    let expected: Vec<&str> = ones["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| updated_ms(s) > alpha_at)
        .map(|s| s["server"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names(&recent_ones), expected);
    assert!(!expected.contains(&"127.0.0.1.tools/research.alpha"));
    // Empty, it filters nothing (as the official registry reads it).
    assert_eq!(get(&srv, "/v0.1/servers?limit=100&updated_since=", Some(&token)).await.1["servers"].as_array().unwrap(), &all);

    for bad in ["yesterday", "2025-08-07", "2025-08-07T13:15:04", "1754572504280"] {
        let (status, problem) = get(&srv, &format!("/v0.1/servers?updated_since={bad}"), Some(&token)).await;
        assert_eq!(status, 400, "{bad:?}: {problem}");
        assert!(problem["detail"].as_str().unwrap().contains("updated_since"), "{problem}");
    }
});
