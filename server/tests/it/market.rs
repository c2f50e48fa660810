//! The browse page over real HTTP, as a browser without JavaScript sees it:
//! search in the URL, visibility, escaping, and bad input.

use crate::common::TestServer;
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
    let (_, html) = srv.page(&carol, "/browse?q=fx&kind=bundle").await;
    assert!(html.contains("Nothing found"));
});

server_test!(bad_search_input_is_a_clear_error_and_injection_is_just_text, |srv: TestServer| async move {
    listings(&srv).await;
    let carol = srv.member("carol", "legal").await;
    let long = "x".repeat(10_000);
    let (status, body) = browse(&srv, &carol, &long).await;
    assert_eq!((status, body), (422, json!({"Invalid": "Search: must be at most 1000 characters"})));
    let (_, html) = srv.page(&carol, &format!("/browse?q={long}")).await;
    assert!(html.contains("Search: must be at most 1000 characters"), "the page says what is wrong");
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

server_test!(forking_with_a_plain_form_opens_the_forks_editor_and_the_source_lists_it, |srv: TestServer| async move {
    let alice = listings(&srv).await;
    let carol = srv.member("carol", "legal").await;
    let (_, source) = srv.page(&carol, "/tools/finance/public_fx").await;
    assert!(source.contains("fork-form"), "a visible, published tool offers a fork form");
    let public_id = {
        let res = carol
            .post(srv.url("/api/tools/detail"))
            .header("Accept", "application/json")
            .form(&[("department", "finance"), ("name", "public_fx")])
            .send()
            .await
            .unwrap();
        res.json::<serde_json::Value>().await.unwrap()["id"].as_i64().unwrap()
    };
    let res = srv
        .post_form_from(&carol, "/tools/finance/public_fx", "/api/listings/fork", &[("listing", &public_id.to_string()), ("name", "my_fx")])
        .await;
    assert_eq!(res.status(), 302);
    assert_eq!(res.headers()["location"], "/tools/legal/my_fx/edit");

    let (_, fork_page) = srv.page(&carol, "/tools/legal/my_fx").await;
    assert!(fork_page.contains("Forked from") && fork_page.contains("finance/public_fx@v1"), "{fork_page}");
    // The source publishes again: the fork's page says so.
    srv.publish(&alice, public_id, "a better rate").await;
    let (_, fork_page) = srv.page(&carol, "/tools/legal/my_fx").await;
    assert!(fork_page.contains("has published v2 since this was forked from v1"), "{fork_page}");
    // Published forks are listed on the source's page.
    let res = carol
        .post(srv.url("/api/tools/detail"))
        .header("Accept", "application/json")
        .form(&[("department", "legal"), ("name", "my_fx")])
        .send()
        .await
        .unwrap();
    let fork_id = res.json::<serde_json::Value>().await.unwrap()["id"].as_i64().unwrap();
    let res = carol
        .post(srv.url("/api/tools/publish"))
        .header("Accept", "application/json")
        .form(&[("tool", fork_id.to_string()), ("version", "1".into())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let (_, source) = srv.page(&alice, "/tools/finance/public_fx").await;
    assert!(source.contains("legal/my_fx"), "the source lists its fork");
});

server_test!(forking_a_listing_you_cannot_see_is_not_found_and_reveals_nothing, |srv: TestServer| async move {
    let alice = listings(&srv).await;
    let res = alice
        .post(srv.url("/api/tools/detail"))
        .header("Accept", "application/json")
        .form(&[("department", "finance"), ("name", "secret_fx")])
        .send()
        .await
        .unwrap();
    let secret = res.json::<serde_json::Value>().await.unwrap()["id"].as_i64().unwrap();
    let carol = srv.member("carol", "legal").await;
    let res = carol
        .post(srv.url("/api/listings/fork"))
        .header("Accept", "application/json")
        .form(&[("listing", secret.to_string().as_str()), ("name", "stolen")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let body = res.text().await.unwrap();
    assert!(!body.contains("secret"), "{body}");
    let res = carol
        .post(srv.url("/api/listings/fork"))
        .header("Accept", "application/json")
        .form(&[("listing", "999999"), ("name", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
});

server_test!(the_signed_in_home_page_has_a_search_box_and_listings_to_open, |srv: TestServer| async move {
    let ada = srv.member("ada", "research").await;
    let (status, html) = srv.page(&ada, "/").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"action="/browse""#) && html.contains(r#"name="q""#), "a search form that works without wasm: {html}");
    // Nothing is featured on a new instance: the most used listings stand in.
    assert!(html.contains("Most used") && html.contains(r#"href="/tools/demo/echo""#), "{html}");
});
