//! The browse page over real HTTP, as a browser without JavaScript sees it:
//! search in the URL, visibility, escaping, and bad input.

mod common;

use common::TestServer;
use serde_json::json;

/// Alice (finance) publishes a public, a department and a private tool.
async fn listings(srv: &TestServer) -> reqwest::Client {
    let alice = srv.member("alice", "finance").await;
    for (name, title, visibility) in [
        ("public_fx", "<b>Bold</b> FX rates", "everyone"),
        ("team_fx", "Team FX rates", "department"),
        ("secret_fx", "Secret FX rates", "private"),
    ] {
        let tool = srv.create_tool_titled(&alice, name, title, visibility).await;
        srv.publish(&alice, tool, "rate").await;
    }
    alice
}

/// The browse server function, called the way the wasm calls it.
async fn browse(srv: &TestServer, client: &reqwest::Client, q: &str) -> (u16, serde_json::Value) {
    let fields = [("q", q), ("department", ""), ("tag", ""), ("kind", ""), ("sort", ""), ("page", "")];
    let res = client.post(srv.url("/api/market/browse")).header("Accept", "application/json").form(&fields).send().await.unwrap();
    (res.status().as_u16(), res.json().await.unwrap_or_default())
}

server_test!(the_browse_page_searches_from_its_url_and_shows_only_what_the_reader_may_see, |srv: TestServer| async move {
    let alice = listings(&srv).await;
    let carol = srv.member("carol", "legal").await;

    let (status, html) = srv.page(&carol, "/browse?q=fx+rates&sort=newest").await;
    assert_eq!(status, 200);
    assert!(html.contains("public_fx") && html.contains("1 listing"), "{html}");
    assert!(!html.contains("team_fx") && !html.contains("secret_fx"), "department and private listings never leak");
    assert!(html.contains("&lt;b&gt;Bold&lt;/b&gt; FX rates") && !html.contains("<b>Bold</b>"), "titles are text, not markup");
    assert!(html.contains(r#"value="fx rates""#), "the form keeps the search");

    let (_, html) = srv.page(&alice, "/browse?q=fx&department=finance").await;
    assert!(html.contains("3 listings"), "the author sees all three");
    let (_, html) = srv.page(&carol, "/browse?kind=bundle").await;
    assert!(html.contains("Nothing found"));
});

server_test!(bad_search_input_is_a_clear_error_and_injection_is_just_text, |srv: TestServer| async move {
    listings(&srv).await;
    let carol = srv.member("carol", "legal").await;
    let long = "x".repeat(10_000);
    let (status, body) = browse(&srv, &carol, &long).await;
    assert_eq!((status, body), (422, json!({"Invalid": "Search: must be at most 200 characters"})));
    let (_, html) = srv.page(&carol, &format!("/browse?q={long}")).await;
    assert!(html.contains("Search: must be at most 200 characters"), "the page says what is wrong");
    let (_, html) = srv.page(&carol, "/browse?page=two").await;
    assert!(html.contains("Page: must be a whole number from 1 to 10000"));

    for q in ["%27%3B+DROP+TABLE+tools%3B--", "%22fx", "fx+OR+*", "NEAR%28fx", "%3Cscript%3Ealert(1)%3C%2Fscript%3E"] {
        let (status, html) = srv.page(&carol, &format!("/browse?q={q}")).await;
        assert_eq!(status, 200, "{q}");
        assert!(!html.contains("<script>alert(1)"), "{q}: the search is echoed as text");
    }
    let (_, html) = srv.page(&carol, "/browse?q=fx").await;
    assert!(html.contains("public_fx"), "the tools table survived");
    let (status, _) = browse(&srv, &srv.browser(), "").await;
    assert_eq!(status, 401, "signed out: nothing");
});
