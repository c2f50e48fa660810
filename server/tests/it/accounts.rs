//! Accounts over real HTTP: what a browser (with or without JavaScript) sees.

use crate::common::{redirected_error, TestServer};

server_test!(registering_signs_the_new_user_in, |srv: TestServer| async move {
    let browser = srv.browser();
    let res = srv.register(&browser, "Grace", "compilers-all-the-way").await;
    assert_eq!(res.status(), 302, "a form post is redirected");
    assert!(redirected_error(&res).is_none(), "{:?}", redirected_error(&res));
    let cookie = res.headers().get("set-cookie").expect("a session cookie").to_str().unwrap().to_owned();
    assert!(cookie.starts_with("toolshed_session="), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain http base URL: no Secure flag");
    let (status, html) = srv.page(&browser, "/account").await;
    assert_eq!(status, 200);
    assert!(html.contains("Grace Example"), "the account page names the user");
});

server_test!(the_account_page_names_the_role_someone_was_invited_as, |srv: TestServer| async move {
    for (name, role, shown) in [("ada", "author", "Author"), ("max", "maintainer", "Maintainer"), ("mia", "member", "Member")] {
        let client = srv.joined(name, "research", role).await;
        // Without the hydration markers (`<!>`) Leptos puts between parts.
        let html = srv.page(&client, "/account").await.1.replace("<!>", "");
        assert!(html.contains(&format!("<dt>Role</dt><dd>{shown}</dd>")), "{role}: {html}");
    }
    let html = srv.page(&srv.admin().await, "/account").await.1.replace("<!>", "");
    assert!(html.contains("<dt>Role</dt><dd>Administrator</dd>"), "{html}");
});

server_test!(a_session_cookie_sent_in_quotes_is_understood, |srv: TestServer| async move {
    let res = srv.register(&srv.browser(), "Grace", "compilers-all-the-way").await;
    let set = res.headers().get("set-cookie").unwrap().to_str().unwrap();
    let value = set.split(';').next().unwrap().strip_prefix("toolshed_session=").unwrap();
    // RFC 6265 allows a quoted cookie-value; some HTTP clients send them so.
    for cookie in [format!("toolshed_session=\"{value}\""), format!("theme=\"dark\"; toolshed_session=\"{value}\"")] {
        let res = reqwest::Client::new().get(srv.url("/account")).header("Cookie", &cookie).send().await.unwrap();
        assert_eq!(res.status(), 200, "{cookie}");
        assert!(res.text().await.unwrap().contains("Grace Example"), "{cookie}");
    }
});

server_test!(a_wrong_password_gets_the_generic_error_and_no_session, |srv: TestServer| async move {
    let browser = srv.browser();
    srv.register(&browser, "grace", "compilers-all-the-way").await;
    let fresh = srv.browser();
    let res = srv.post_form(&fresh, "/api/login", &[("username", "grace"), ("password", "wrong-password")]).await;
    assert_eq!(res.status(), 302);
    assert_eq!(redirected_error(&res), Some(serde_json::json!({"BadCredentials": "Invalid username or password."})));
    let res = srv.post_form_from(&fresh, "/login", "/api/login", &[("username", "nobody"), ("password", "wrong-password")]).await;
    assert_eq!(redirected_error(&res), Some(serde_json::json!({"BadCredentials": "Invalid username or password."})));
    let (_, html) = srv.page(&fresh, "/").await;
    assert!(html.contains("Sign in") && !html.contains("grace Example"));
    // The page a no-JS browser lands on shows the message.
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let (_, html) = srv.page(&fresh, &location[srv.base.len()..]).await;
    assert!(html.contains("Invalid username or password."), "{html}");
});

server_test!(signing_in_and_out_works_with_plain_forms, |srv: TestServer| async move {
    srv.register(&srv.browser(), "grace", "compilers-all-the-way").await;
    let browser = srv.browser();
    let res =
        srv.post_form(&browser, "/api/login", &[("username", "GRACE"), ("password", "compilers-all-the-way"), ("next", "/account")]).await;
    assert_eq!(res.status(), 302);
    assert_eq!(res.headers()["location"], "/account");
    assert_eq!(srv.page(&browser, "/account").await.0, 200);
    let res = srv.post_form(&browser, "/api/logout", &[]).await;
    assert_eq!(res.status(), 302);
    let (_, html) = srv.page(&browser, "/").await;
    assert!(!html.contains("grace Example"));
});

server_test!(after_signing_in_a_next_leading_off_the_site_goes_home, |srv: TestServer| async move {
    srv.register(&srv.browser(), "grace", "compilers-all-the-way").await;
    let here = format!("{}/account?tab=tokens", srv.base);
    for (next, location) in [
        ("//evil.example/", "/"),
        // What `/login?next=/%09/evil.example` puts in the form: a browser drops the tab.
        ("/\t/evil.example", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        // A path, kept as the browser would read it.
        ("/%09/evil.example", "/%09/evil.example"),
        ("  /account\n", "/account"),
        (&here, "/account?tab=tokens"),
    ] {
        let browser = srv.browser();
        let res =
            srv.post_form(&browser, "/api/login", &[("username", "grace"), ("password", "compilers-all-the-way"), ("next", next)]).await;
        assert_eq!(res.status(), 302, "{next:?}");
        assert_eq!(res.headers()["location"], location, "{next:?}");
    }
});

server_test!(duplicate_usernames_and_weak_passwords_are_refused_clearly, |srv: TestServer| async move {
    let browser = srv.browser();
    srv.register(&browser, "grace", "compilers-all-the-way").await;
    let other = srv.browser();
    let res = srv.register(&other, "Grace", "another-long-password").await;
    assert_eq!(redirected_error(&res), Some(serde_json::json!({"Conflict": "The username “grace” is already taken."})));
    let res = srv.register(&other, "ada", "short").await;
    assert_eq!(redirected_error(&res), Some(serde_json::json!({"Invalid": "Password: must be at least 10 characters"})));
    let long = "x".repeat(40);
    let res = srv.register(&other, &long, "a-perfectly-fine-password").await;
    assert_eq!(redirected_error(&res), Some(serde_json::json!({"Invalid": "Username: must be at most 32 characters"})));
    let res = srv.register(&other, "ada", "").await;
    assert_eq!(redirected_error(&res), Some(serde_json::json!({"Invalid": "Password: is required"})));
});

server_test!(a_post_from_another_origin_is_refused, |srv: TestServer| async move {
    let res = srv
        .browser()
        .post(srv.url("/api/login"))
        .header("Origin", "https://evil.example")
        .form(&[("username", "admin"), ("password", srv.admin_password.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert!(res.headers().get("set-cookie").is_none());
    let res = srv.browser().post(srv.url("/api/logout")).header("Sec-Fetch-Site", "cross-site").send().await.unwrap();
    assert_eq!(res.status(), 403);
});

server_test!(a_forged_session_cookie_is_treated_as_signed_out, |srv: TestServer| async move {
    let client = reqwest::Client::new();
    let res =
        client.get(srv.url("/account")).header("Cookie", "toolshed_session=AAAAAAAAAAAAAAAAAAAAAA.forged-signature").send().await.unwrap();
    let html = res.text().await.unwrap();
    assert!(!html.contains("Change password"), "no account page for a forged cookie");
});

server_test!(changing_the_password_signs_out_other_sessions, |srv: TestServer| async move {
    let laptop = srv.browser();
    srv.register(&laptop, "grace", "compilers-all-the-way").await;
    let phone = srv.browser();
    srv.post_form(&phone, "/api/login", &[("username", "grace"), ("password", "compilers-all-the-way")]).await;
    assert!(srv.page(&phone, "/account").await.1.contains("Change password"));
    let res = srv
        .post_form(
            &laptop,
            "/api/change_password",
            &[("current", "compilers-all-the-way"), ("new", "nanoseconds-of-wire"), ("confirm", "nanoseconds-of-wire")],
        )
        .await;
    assert!(redirected_error(&res).is_none(), "{:?}", redirected_error(&res));
    assert!(srv.page(&laptop, "/account").await.1.contains("Change password"), "this session carries on");
    assert!(!srv.page(&phone, "/account").await.1.contains("Change password"), "the other one is signed out");
});

server_test!(the_first_admin_can_sign_in_with_the_printed_password, |srv: TestServer| async move {
    assert_eq!(srv.admin_password.len(), 20);
    let browser = srv.browser();
    let res = srv.post_form(&browser, "/api/login", &[("username", "admin"), ("password", &srv.admin_password)]).await;
    assert!(redirected_error(&res).is_none());
    assert!(srv.page(&browser, "/account").await.1.contains("Administrator"));
});

server_test!(oversized_bodies_are_refused, |srv: TestServer| async move {
    let big = "x".repeat(3 * 1024 * 1024);
    let sent = srv
        .browser()
        .post(srv.url("/api/login"))
        .header("Origin", &srv.base)
        .form(&[("username", "admin"), ("password", big.as_str())])
        .send()
        .await;
    match sent {
        Ok(res) => assert_eq!(res.status(), 413),
        // The server answers 413 and closes before the client has written it all.
        Err(e) => assert!(e.is_request(), "{e}"),
    }
    assert_eq!(srv.page(&srv.browser(), "/healthz").await.1, "ok", "still serving");
});

server_test!(unknown_pages_answer_404_with_a_page, |srv: TestServer| async move {
    let (status, html) = srv.page(&srv.browser(), "/no/such/page").await;
    assert_eq!(status, 404);
    assert!(html.contains("Page not found"));
});

server_test!(repeated_wrong_passwords_are_rate_limited, |srv: TestServer| async move {
    srv.register(&srv.browser(), "grace", "compilers-all-the-way").await;
    let browser = srv.browser();
    for _ in 0..5 {
        srv.post_form(&browser, "/api/login", &[("username", "grace"), ("password", "guess-guess")]).await;
    }
    let res = srv.post_form(&browser, "/api/login", &[("username", "grace"), ("password", "compilers-all-the-way")]).await;
    assert_eq!(
        redirected_error(&res),
        Some(serde_json::json!({"TooManyAttempts": "Too many failed sign-in attempts. Try again in a few minutes."}))
    );
});

process_test!(a_clean_shutdown_exits_successfully, |mut srv: TestServer| async move {
    assert!(srv.stops_cleanly().await);
});

// Port 9 on loopback: nothing listens, so the provider "cannot be reached".
server_test!(
    single_sign_on_failures_end_on_the_sign_in_page_with_one_sentence_said_once,
    ["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id", "toolshed", "--oidc-name", "Example ID"],
    |srv: TestServer| async move {
        let browser = srv.browser();
        let (_, page) = srv.page(&browser, "/login?next=/tools/mine").await;
        // A plain link (no wasm needed), left to the browser by the wasm router, keeping where the visitor was going.
        assert!(
            page.contains(
                r#"<a href="/auth/sso?next=%2Ftools%2Fmine" rel="external" class="button sso-button">Sign in with <!>Example ID"#
            ),
            "{page}"
        );

        let failed = |res: reqwest::Response| {
            assert_eq!(res.status(), 303);
            assert_eq!(res.headers()["location"], "/login?sso=failed");
        };
        failed(browser.get(srv.url("/auth/sso?next=/tools/mine")).send().await.unwrap());
        let (status, options) = srv.call(&browser, "login/options", &[]).await;
        assert_eq!(status, 200);
        assert_eq!(options["failure"], "The identity provider cannot be reached right now. Try again in a moment.");
        assert_eq!(srv.call(&browser, "login/options", &[]).await.1["failure"], serde_json::Value::Null, "said once");

        // A callback this browser did not start (a forged or replayed one) signs nobody in.
        failed(browser.get(srv.url("/auth/sso/callback?code=stolen&state=guess")).send().await.unwrap());
        let failure = srv.call(&browser, "login/options", &[]).await.1["failure"].clone();
        assert_eq!(failure, "This sign-in was started too long ago or in another window. Start again.");
        assert_eq!(srv.call(&browser, "me", &[]).await.1, serde_json::Value::Null);
    }
);

server_test!(without_single_sign_on_there_is_no_provider_button_and_no_sso_route, |srv: TestServer| async move {
    let browser = srv.browser();
    let (_, page) = srv.page(&browser, "/login").await;
    assert!(!page.contains("sso-button"), "{page}");
    assert_eq!(browser.get(srv.url("/auth/sso")).send().await.unwrap().status(), 404);
});
