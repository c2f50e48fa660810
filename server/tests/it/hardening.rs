//! Abuse from inside, against the real server process: whatever a tool's code
//! does, what its run hands the host stays within the run's own limits, and a
//! caller over their share is refused while nobody else is.

use crate::common::TestServer;
use crate::mcp::{call, Session};
use serde_json::json;

process_test!(what_a_run_hands_the_host_is_bounded_by_the_runs_own_limits, |srv: TestServer| async move {
    let alice = srv.member("alice", "research").await;
    let tool = srv.create_tool(&alice, "abuse", "private").await;
    // Room for the runs' 32 MiB heaps and a few more pool threads; before, the
    // first run alone took ~900 MiB outside its heap (here: an abort).
    srv.limit_memory(400);
    let before = srv.peak_rss_kib();
    for (code, expect) in [
        // 900 arguments of 1 MiB each (one string, 900 times): the console keeps 256 KiB.
        ("console.log(...Array(900).fill('x'.repeat(1 << 20))); return 'logged';", "logged"),
        // 700 rows sharing one 1 MiB cell: refused before the table is built outside the heap.
        ("const big = 'x'.repeat(1 << 20); return $json2MarkdownTable(Array(700).fill({a: big}));", "larger than"),
        ("const m = 'x'.repeat(1 << 20); for (let i = 0; i < 1000; i++) $progress(i, 1000, m); return 'done';", "done"),
    ] {
        let target = json!({"Draft": {"code": code, "args": []}});
        let (status, body) = srv.server_fn(&alice, "tools/run", json!({"tool": tool, "target": target, "input": "{}"})).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.to_string().contains(expect), "{code}: {body}");
    }
    assert_eq!(reqwest::get(srv.url("/healthz")).await.unwrap().status(), 200, "the server survives");
    let grew_mib = (srv.peak_rss_kib() - before) / 1024;
    // Each run may use its 32 MiB heap; before, the first run alone raised the peak by ~900 MiB.
    assert!(grew_mib < 120, "the server's peak memory grew by {grew_mib} MiB");
});

server_test!(
    a_caller_with_too_many_calls_in_flight_is_refused_and_nobody_else_is,
    ["--sandbox-caller-calls", "1"],
    |srv: TestServer| async move {
        let alice = srv.member("alice", "research").await;
        let tool = srv.create_tool(&alice, "spin", "private").await;
        let spin = || {
            srv.server_fn(
                &alice,
                "tools/run",
                json!({"tool": tool, "target": {"Draft": {"code": "while (true) {}", "args": []}}, "input": "{}"}),
            )
        };
        // Two runs of alice's at once, one more than her share: whichever comes second is refused at once.
        let (mut a, mut b) = (std::pin::pin!(spin()), std::pin::pin!(spin()));
        let (refused, spinning) = tokio::select! {
            answer = &mut a => (answer, b),
            answer = &mut b => (answer, a),
        };
        assert_eq!(refused.0, 429, "{}", refused.1);
        assert!(refused.1.to_string().contains("Too many calls in flight for you; try again shortly."), "{}", refused.1);
        // While her loop runs, her MCP calls are refused too, with a message a model can read...
        let echo = call(1, "echo", json!({"text": "hi"}));
        let hers = Session::open(srv.url("/mcp/tools/demo/echo"), &srv.token("alice").await).await.request(&echo).await;
        let result = &hers.last().unwrap()["result"];
        assert_eq!(
            (&result["isError"], &result["content"][0]["text"]),
            (&json!(true), &json!("Too many calls in flight for you; try again shortly."))
        );
        // ...and nobody else's are.
        let admins = Session::open(srv.url("/mcp/tools/demo/echo"), &srv.token("admin").await).await.request(&echo).await;
        assert_eq!(admins.last().unwrap()["result"]["content"][0]["text"], "hi");
        let (status, body) = spinning.await;
        assert_eq!(status, 200, "{body}");
        assert!(body.to_string().contains("Timed out after 2000 ms"), "{body}");
    }
);

/// A sign-in the way the wasm sends it (JSON back); `forwarded_for` as a proxy adds it.
async fn sign_in_status(srv: &TestServer, client: &reqwest::Client, user: &str, password: &str, forwarded_for: &str) -> u16 {
    client
        .post(srv.url("/api/login"))
        .header("Accept", "application/json")
        .header("Origin", &srv.base)
        .header("X-Forwarded-For", forwarded_for)
        .form(&[("username", user), ("password", password)])
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

const GRACE: &str = "compilers-all-the-way";

server_test!(
    behind_a_trusted_proxy_guesses_lock_out_the_guessers_address_and_nobody_else,
    ["--trusted-proxies", "127.0.0.1"],
    |srv: TestServer| async move {
        srv.register(&srv.browser(), "grace", GRACE).await;
        let attacker = srv.browser();
        for _ in 0..5 {
            assert_eq!(sign_in_status(&srv, &attacker, "grace", "guess-guess", "203.0.113.66").await, 401);
        }
        assert_eq!(sign_in_status(&srv, &attacker, "grace", GRACE, "203.0.113.66").await, 429);
        // Grace, from her own address behind the same proxy.
        assert_eq!(sign_in_status(&srv, &srv.browser(), "grace", GRACE, "203.0.113.7").await, 200);
        // A forged hop left of the proxy's own changes nothing for the attacker.
        assert_eq!(sign_in_status(&srv, &attacker, "grace", GRACE, "203.0.113.7, 203.0.113.66").await, 429);
    }
);

server_test!(without_trusted_proxies_a_forwarded_address_is_ignored, |srv: TestServer| async move {
    srv.register(&srv.browser(), "grace", GRACE).await;
    for i in 0..5 {
        sign_in_status(&srv, &srv.browser(), "grace", "guess-guess", &format!("203.0.113.{i}")).await;
    }
    assert_eq!(sign_in_status(&srv, &srv.browser(), "grace", GRACE, "203.0.113.99").await, 429);
});

server_test!(a_browser_that_signed_in_before_is_not_locked_out_by_guesses_from_its_address, |srv: TestServer| async move {
    srv.register(&srv.browser(), "grace", GRACE).await;
    let graces = srv.browser();
    assert_eq!(sign_in_status(&srv, &graces, "grace", GRACE, "").await, 200);
    for _ in 0..6 {
        sign_in_status(&srv, &srv.browser(), "grace", "guess-guess", "").await;
    }
    assert_eq!(sign_in_status(&srv, &srv.browser(), "grace", GRACE, "").await, 429);
    assert_eq!(sign_in_status(&srv, &graces, "grace", GRACE, "").await, 200);
});

server_test!(a_burst_of_concurrent_guesses_is_counted_in_full, |srv: TestServer| async move {
    srv.register(&srv.browser(), "grace", GRACE).await;
    let guesses = (0..39).map(|_| {
        let (url, base) = (srv.url("/api/login"), srv.base.clone());
        tokio::spawn(async move {
            let res = reqwest::Client::new()
                .post(url)
                .header("Accept", "application/json")
                .header("Origin", base)
                .form(&[("username", "grace"), ("password", "guess-guess")])
                .send();
            res.await.unwrap().status().as_u16()
        })
    });
    let mut checked = 0;
    for guess in guesses {
        match guess.await.unwrap() {
            401 => checked += 1,
            429 => {}
            other => panic!("a guess answered {other}"),
        }
    }
    assert!((1..=5).contains(&checked), "{checked} of 39 concurrent guesses were checked against a limit of 5");
});

server_test!(common_and_short_passwords_are_refused_at_registration, |srv: TestServer| async move {
    for weak in ["1234567890", "password12", "qwertyuiop", "short"] {
        let res = srv.register(&srv.browser(), "grace", weak).await;
        let err = crate::common::redirected_error(&res).unwrap_or_default().to_string();
        assert!(err.contains("too easy to guess") || err.contains("at least 10"), "{weak}: {err}");
    }
    let res = srv.register(&srv.browser(), "grace", GRACE).await;
    assert!(crate::common::redirected_error(&res).is_none());
});

server_test!(every_answer_carries_security_headers_and_pages_a_script_nonce, |srv: TestServer| async move {
    let admin = srv.admin().await;
    for path in ["/", "/admin", "/healthz", "/api/me", "/favicon.svg"] {
        let res = admin.get(srv.url(path)).send().await.unwrap();
        let header = |name: &str| res.headers().get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(header("referrer-policy"), "same-origin", "{path}");
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
        let csp = header("content-security-policy");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        let is_page = header("content-type").starts_with("text/html");
        let html = res.text().await.unwrap();
        if is_page {
            // Only scripts carrying this response's nonce run.
            let nonce = csp.split("'nonce-").nth(1).and_then(|n| n.split('\'').next()).expect("a nonce in the page's policy");
            let scripts = csp.split(';').map(str::trim).find(|d| d.starts_with("script-src")).unwrap();
            assert_eq!(scripts, format!("script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'"));
            let tags = html.matches("<script").count();
            assert!(tags > 0 && html.matches(&format!("nonce=\"{nonce}\"")).count() >= tags, "{path}: every script has the nonce");
        } else {
            assert!(csp.starts_with("default-src 'none'"), "{path}: {csp}");
        }
    }
});
