use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use super::*;

fn run(code: &str) -> RunOutcome {
    run_blocking(RunRequest::new(code))
}

fn with_limits(code: &str, edit: impl FnOnce(&mut Limits)) -> RunOutcome {
    let mut req = RunRequest::new(code);
    edit(&mut req.limits);
    run_blocking(req)
}

fn args(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap()
}

/// Answers `count` requests on a loopback port with `respond(path)`, then stops.
fn http_server(count: usize, respond: impl Fn(&str) -> String + Send + 'static) -> u16 {
    recording_server(count, move |head| respond(head.split(' ').nth(1).unwrap_or("/"))).0
}

/// Answers `count` requests on a loopback port with `respond(head)` (request
/// line and headers), and sends every head it got down the channel.
fn recording_server(count: usize, respond: impl Fn(&str) -> String + Send + 'static) -> (u16, std::sync::mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (heads, received) = std::sync::mpsc::channel();
    thread::spawn(move || {
        for stream in listener.incoming().take(count) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            while reader.read_line(&mut head).unwrap() > 0 && !head.ends_with("\r\n\r\n") {}
            // Reported before answering: once the client has its answer, the test can count it.
            let _ = heads.send(head.clone());
            stream.write_all(respond(&head).as_bytes()).unwrap();
        }
    });
    (port, received)
}

fn http_response(status: &str, extra_headers: &str, body: &str) -> String {
    format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}", body.len())
}

#[test]
fn a_string_result_is_returned_as_text() {
    let outcome = run_blocking(RunRequest { args: args(json!({"text": "hello"})), ..RunRequest::new("return $text") });
    assert_eq!(outcome.result, Ok(ToolValue::Text("hello".into())));
    assert!(outcome.peak_memory_bytes > 0);
}

#[test]
fn other_results_are_returned_as_json_and_undefined_as_empty_text() {
    assert_eq!(run("return {a: [1, 2.5, null], b: 'x'}").result, Ok(ToolValue::Json(json!({"a": [1, 2.5, null], "b": "x"}))));
    assert_eq!(run("return 42").result, Ok(ToolValue::Json(json!(42))));
    assert_eq!(run("const x = 1;").result, Ok(ToolValue::Text(String::new())));
}

#[test]
fn env_and_context_are_frozen() {
    let outcome = run_blocking(RunRequest {
        env: [("API_BASE".to_string(), "https://x.test".to_string())].into(),
        context: args(json!({"caller": "ann"})),
        ..RunRequest::new("try { $env.API_BASE = 'changed'; } catch (e) { return [e.name, $env.API_BASE] }")
    });
    assert_eq!(outcome.result, Ok(ToolValue::Json(json!(["TypeError", "https://x.test"]))));
}

#[test]
fn arguments_are_readable_as_dollar_names_and_through_args() {
    let outcome = run_blocking(RunRequest {
        args: args(json!({"city": "Oslo", "days": 3, "first-name": "Ann", "env": "arg"})),
        env: [("API_BASE".to_string(), "https://x.test".to_string())].into(),
        context: args(json!({"caller": "ann"})),
        ..RunRequest::new(
            "return [$city, $days, args['first-name'], typeof $first, $env.API_BASE,\n\
                     args.env, Object.isFrozen($context), $context.caller];",
        )
    });
    assert_eq!(outcome.result, Ok(ToolValue::Json(json!(["Oslo", 3, "Ann", "undefined", "https://x.test", "arg", true, "ann"]))));
}

#[test]
fn an_infinite_loop_times_out_and_the_next_call_works() {
    let outcome = with_limits("while (true) {}", |l| l.wall_clock_ms = 200);
    assert_eq!(outcome.result, Err(RunError::Timeout { limit_ms: 200 }));
    assert!(outcome.duration < Duration::from_secs(1), "{:?}", outcome.duration);
    assert_eq!(run("return 'fine'").result, Ok(ToolValue::Text("fine".into())));
}

#[test]
fn a_timeout_cannot_be_caught_by_the_tool() {
    let outcome = with_limits("try { while (true) {} } catch (e) { return 'caught' }", |l| l.wall_clock_ms = 100);
    assert_eq!(outcome.result, Err(RunError::Timeout { limit_ms: 100 }));
}

#[test]
fn a_pending_await_still_times_out() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts the connection and never answers, for at most 3 s.
    thread::spawn(move || {
        let _held = listener.accept();
        thread::sleep(Duration::from_secs(3));
    });
    let mut req = loopback(port, format!("await $fetch('http://127.0.0.1:{port}/slow'); return 'unreachable'"));
    req.limits.wall_clock_ms = 300;
    let outcome = run_blocking(req);
    assert_eq!(outcome.result, Err(RunError::Timeout { limit_ms: 300 }));
    assert!(outcome.duration < Duration::from_secs(2), "{:?}", outcome.duration);
}

#[test]
fn a_promise_nothing_can_resolve_is_reported() {
    let outcome = run("await new Promise(() => {}); return 1");
    assert_eq!(outcome.result, Err(RunError::NeverSettled));
}

#[test]
fn allocating_a_huge_array_reports_out_of_memory() {
    let outcome = with_limits("const chunks = [];\nwhile (true) chunks.push(new Array(100000).fill(1.5));", |l| l.memory_bytes = 8 * MIB);
    assert_eq!(outcome.result, Err(RunError::OutOfMemory { limit_bytes: 8 * MIB }));
    assert!(outcome.peak_memory_bytes <= 8 * MIB);
    assert!(outcome.peak_memory_bytes > 7 * MIB, "{}", outcome.peak_memory_bytes);
    assert_eq!(outcome.result.unwrap_err().to_string(), "Out of memory (limit 8 MiB)");
}

#[test]
fn a_huge_string_reports_out_of_memory() {
    let outcome = with_limits("return 'x'.repeat(64 * 1024 * 1024)", |l| l.memory_bytes = 4 * MIB);
    assert_eq!(outcome.result, Err(RunError::OutOfMemory { limit_bytes: 4 * MIB }));
}

#[test]
fn deep_recursion_reports_a_stack_overflow() {
    let outcome = run("function down(n) { return down(n + 1) + 1; }\nreturn down(0);");
    assert_eq!(outcome.result, Err(RunError::StackOverflow { line: Some(1) }));
}

#[test]
fn a_syntax_error_reports_its_line() {
    let outcome = run("const a = 1;\nconst b = ;\nreturn a;");
    match outcome.result {
        Err(RunError::Syntax { message, line }) => {
            assert_eq!(line, Some(2), "{message}");
            assert!(!message.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_thrown_error_reports_name_message_and_line() {
    let outcome = run("const a = 1;\nconst f = undefined;\nawait null;\nf();");
    let error = outcome.result.unwrap_err();
    match &error {
        RunError::Thrown { name, message, line, stack } => {
            assert_eq!(name, "TypeError");
            assert!(message.contains("not a function"), "{message}");
            assert_eq!(*line, Some(4));
            assert!(stack.as_deref().unwrap_or("").contains("tool.js:4"), "{stack:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(error.to_string().starts_with("TypeError: "), "{error}");
    assert!(error.to_string().ends_with(" (line 4)"), "{error}");
}

#[test]
fn a_thrown_string_or_custom_error_is_reported() {
    assert_eq!(
        run("throw 'city not found'").result,
        Err(RunError::Thrown { name: "Error".into(), message: "city not found".into(), line: None, stack: None })
    );
    match run("class NotFound extends Error { constructor(m) { super(m); this.name = 'NotFound'; } }\n\
               throw new NotFound('no such city');")
    .result
    {
        Err(RunError::Thrown { name, message, line, .. }) => {
            // The stack is captured where the error is constructed: in the class, line 1.
            assert_eq!((name.as_str(), message.as_str(), line), ("NotFound", "no such city", Some(1)));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_console_output_is_truncated() {
    let outcome = with_limits("for (let i = 0; i < 10000; i++) console.log('x'.repeat(100));\nreturn 'done'", |l| l.console_bytes = 4096);
    assert_eq!(outcome.result, Ok(ToolValue::Text("done".into())));
    let last = outcome.console.last().unwrap();
    assert!(last.message.contains("truncated"), "{}", last.message);
    assert_eq!(last.level, LogLevel::Warn);
    let kept: usize = outcome.console.iter().map(|l| l.message.len()).sum();
    assert!(kept <= 4096 + 100, "{kept}");
    assert!(outcome.console.len() < 40);
}

#[test]
fn a_non_serializable_result_is_a_clear_error() {
    for (code, expected) in [("return 10n", "BigInt"), ("const o = {}; o.self = o; return o", "circular"), ("return () => 1", "function")] {
        match run(code).result {
            Err(error @ RunError::NotSerializable { .. }) => {
                let text = error.to_string();
                assert!(text.starts_with("The result is not JSON-serializable"), "{text}");
                assert!(text.to_lowercase().contains(&expected.to_lowercase()), "{text}");
            }
            other => panic!("{code}: {other:?}"),
        }
    }
}

#[test]
fn an_oversized_result_is_refused() {
    let outcome = with_limits("return 'x'.repeat(2048)", |l| l.result_bytes = 1024);
    assert_eq!(outcome.result, Err(RunError::OutputTooLarge { limit_bytes: 1024, actual_bytes: 2048 }));
}

#[test]
fn fetch_with_an_account_takes_an_app_name_and_no_authorization_header_of_its_own() {
    let code = "const tries = [{account: 'Jira!'}, {account: 'jira', headers: {authorization: 'Bearer mine'}}];\n\
        const said = [];\n\
        for (const init of tries) { try { await $fetch('https://api.example.com/', init); } catch (e) { said.push(e.message); } }\n\
        return said;";
    let mut req = RunRequest::new(code);
    req.fetch_allow = vec!["api.example.com".into()];
    let said = run_blocking(req).result.unwrap().to_json();
    assert_eq!(
        said,
        serde_json::json!([
            "$fetch: init.account \"Jira!\" is not an app name",
            "$fetch: give init.account or an Authorization header, not both"
        ])
    );
}

#[test]
fn fetch_to_a_host_not_on_the_allow_list_is_rejected() {
    let mut req = RunRequest::new("try { await $fetch('https://evil.example.org/x'); } catch (e) { return e.message }");
    req.fetch_allow = vec!["api.example.com".into(), "*.example.net".into()];
    assert_eq!(
        run_blocking(req).result,
        Ok(ToolValue::Text(
            "evil.example.org:443 is not on this tool's fetch allow-list (an entry without a port allows 80 and 443)".into()
        ))
    );
    let mut req = RunRequest::new("await $fetch('http://api.example.com:8080/');");
    req.fetch_allow = vec!["api.example.com".into()];
    match run_blocking(req).result {
        Err(RunError::Thrown { name, message, line, .. }) => {
            assert_eq!(name, "Error");
            assert!(message.starts_with("api.example.com:8080 is not on this tool's fetch allow-list"), "{message}");
            assert_eq!(line, Some(1));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn fetch_never_reaches_an_internal_address_even_when_allow_listed() {
    // Refused before any connection: nothing listens on these, and nothing is tried.
    for url in ["http://127.0.0.1:9/", "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://[::1]:9/"] {
        let mut req = RunRequest::new(format!("try {{ await $fetch('{url}'); }} catch (e) {{ return e.message }}"));
        req.fetch_allow = vec!["127.0.0.1:9".into(), "169.254.169.254".into(), "10.0.0.1".into(), "[::1]:9".into()];
        match run_blocking(req).result {
            Ok(ToolValue::Text(message)) => assert!(message.contains("internal address"), "{url}: {message}"),
            other => panic!("{url}: {other:?}"),
        }
    }
}

/// A request that may reach loopback `port`: allow-listed, and named as an internal host.
fn loopback(port: u16, code: String) -> RunRequest {
    let mut req = RunRequest::new(code);
    req.fetch_allow = vec![format!("127.0.0.1:{port}")];
    req.internal_hosts = crate::outbound::InternalHosts::parse("127.0.0.1");
    req
}

#[test]
fn fetch_to_an_allowed_host_returns_status_and_body() {
    let port = http_server(2, |path| match path {
        "/hello" => http_response("200 OK", "Content-Type: application/json\r\nX-Test: yes\r\n", r#"{"greeting":"hi"}"#),
        _ => http_response("404 Not Found", "", "nope"),
    });
    let req = loopback(
        port,
        format!(
            "const base = 'http://127.0.0.1:{port}';\n\
         const r = await $fetch(base + '/hello', {{ headers: {{ 'x-a': '1' }} }});\n\
         const missing = await $fetch(base + '/missing', {{ method: 'POST', body: 'q' }});\n\
         return {{ status: r.status, ok: r.ok, test: r.headers['x-test'], body: await r.json(),\n\
                  missing: [missing.status, missing.ok, await missing.text()] }};"
        ),
    );
    assert_eq!(
        run_blocking(req).result,
        Ok(ToolValue::Json(json!({
            "status": 200, "ok": true, "test": "yes", "body": {"greeting": "hi"},
            "missing": [404, false, "nope"]
        })))
    );
}

#[test]
fn a_read_only_tools_fetch_sends_get_and_head_and_refuses_the_rest() {
    let port = http_server(2, |path| http_response("200 OK", "", path));
    let mut req = loopback(
        port,
        format!(
            "const base = 'http://127.0.0.1:{port}';\n\
         const got = await (await $fetch(base + '/get')).text();\n\
         const head = (await $fetch(base + '/head', {{ method: 'HEAD' }})).status;\n\
         let post;\n\
         try {{ await $fetch(base + '/post', {{ method: 'post', body: 'x' }}); post = 'sent'; }} catch (e) {{ post = e.message; }}\n\
         return [got, head, post];"
        ),
    );
    req.read_only = true;
    assert_eq!(
        run_blocking(req).result,
        Ok(ToolValue::Json(json!(["/get", 200, "this tool is read-only: $fetch sends only GET and HEAD requests, not POST"])))
    );
}

#[test]
fn a_read_only_tools_fetch_refuses_a_method_override_or_a_body_and_sends_nothing() {
    let (port, heads) = recording_server(1, |_| http_response("200 OK", "", "ok"));
    let mut req = loopback(
        port,
        format!(
            "const base = 'http://127.0.0.1:{port}';\n\
         const refused = [];\n\
         const attempt = async (path, init) => {{\n\
           try {{ await $fetch(base + path, init); refused.push('sent'); }} catch (e) {{ refused.push(e.message); }}\n\
         }};\n\
         for (const header of ['X-HTTP-Method-Override', 'x-http-method', 'X-Method-Override']) {{\n\
           await attempt('/override', {{ headers: {{ [header]: 'DELETE' }} }});\n\
         }}\n\
         await attempt('/body', {{ body: 'delete=all' }});\n\
         await attempt('/head-body', {{ method: 'HEAD', body: 'x' }});\n\
         await $fetch(base + '/plain');\n\
         return refused;"
        ),
    );
    req.read_only = true;
    let overridden = |header: &str| {
        format!("this tool is read-only: $fetch does not send {header}, which asks the server to take the GET as another method")
    };
    assert_eq!(
        run_blocking(req).result,
        Ok(ToolValue::Json(json!([
            overridden("X-HTTP-Method-Override"),
            overridden("x-http-method"),
            overridden("X-Method-Override"),
            "this tool is read-only: $fetch sends GET requests without a body",
            "this tool is read-only: $fetch sends HEAD requests without a body",
        ])))
    );
    // The server took one connection and ends: every request it got is here.
    let received: Vec<String> = heads.iter().collect();
    assert_eq!(received.len(), 1, "{received:?}");
    assert!(received[0].starts_with("GET /plain "), "{received:?}");
}

#[test]
fn fetch_enforces_its_timeout_response_size_and_concurrency() {
    let port = http_server(3, |path| match path {
        "/big" => http_response("200 OK", "", &"x".repeat(2048)),
        _ => http_response("200 OK", "", path),
    });
    let hang = TcpListener::bind("127.0.0.1:0").unwrap();
    let hang_port = hang.local_addr().unwrap().port();
    thread::spawn(move || {
        let _held = hang.accept();
        thread::sleep(Duration::from_secs(2));
    });
    let mut req = RunRequest::new(format!(
        "const base = 'http://127.0.0.1:{port}';\n\
         const texts = await Promise.all(['/a', '/b'].map(p => $fetch(base + p).then(r => r.text())));\n\
         const errors = [];\n\
         for (const url of [base + '/big', 'http://127.0.0.1:{hang_port}/', 'ftp://127.0.0.1/']) {{\n\
           try {{ await $fetch(url); }} catch (e) {{ errors.push(e.message); }}\n\
         }}\n\
         return {{ texts, errors }};"
    ));
    req.fetch_allow = vec![format!("127.0.0.1:{port}"), format!("127.0.0.1:{hang_port}")];
    req.internal_hosts = crate::outbound::InternalHosts::parse("127.0.0.1");
    req.limits.fetch_response_bytes = 1024;
    req.limits.fetch_timeout_ms = 200;
    let outcome = run_blocking(req);
    assert_eq!(
        outcome.result,
        Ok(ToolValue::Json(json!({
            "texts": ["/a", "/b"],
            "errors": [
                format!("response body from http://127.0.0.1:{port}/big exceeds 1 KiB"),
                format!("request to http://127.0.0.1:{hang_port}/ timed out after 200 ms"),
                "only http and https URLs can be reached, not ftp://127.0.0.1/",
            ]
        })))
    );
}

#[test]
fn fetch_does_not_follow_redirects_off_the_allow_list_or_to_internal_addresses() {
    for (location, refusal) in [
        ("http://elsewhere.test/", "redirect refused: elsewhere.test:80 is not on this tool's fetch allow-list"),
        ("http://169.254.169.254/latest/meta-data/", "redirect refused: 169.254.169.254 is an internal address"),
    ] {
        let header = format!("Location: {location}\r\n");
        let port = http_server(1, move |_| http_response("302 Found", &header, ""));
        let mut req = loopback(port, format!("await $fetch('http://127.0.0.1:{port}/')"));
        req.fetch_allow.push("169.254.169.254".into());
        match run_blocking(req).result {
            Err(RunError::Thrown { message, .. }) => assert!(message.starts_with(refusal), "{message}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn globals_do_not_leak_between_calls() {
    let first = run("globalThis.leak = 42; Object.prototype.polluted = 1; return 'set'");
    assert_eq!(first.result, Ok(ToolValue::Text("set".into())));
    let second = run("return [typeof leak, typeof ({}).polluted, typeof eval].join()");
    assert_eq!(second.result, Ok(ToolValue::Text("undefined,undefined,undefined".into())));
}

#[test]
fn a_thread_keeps_its_runtime_between_runs_and_no_run_sees_what_another_left() {
    let first = run("globalThis.leak = 42; Object.prototype.polluted = 1; Array.prototype.push = null; return 'set'");
    assert_eq!(first.result, Ok(ToolValue::Text("set".into())));
    let kept = engine::kept_runs().expect("a clean run's runtime is kept");
    let second = run("const a = []; a.push(1); return [typeof leak, typeof ({}).polluted, a.length].join()");
    assert_eq!(second.result, Ok(ToolValue::Text("undefined,undefined,1".into())));
    assert_eq!(engine::kept_runs(), Some(kept + 1), "the second run used the same runtime");
}

#[test]
fn a_kept_runtime_gives_each_run_its_whole_memory_limit() {
    // Garbage with cycles, left for the collector: freed before the next run.
    let big =
        "const a = []; for (let i = 0; i < 40; i++) { const o = {data: new Array(10000).fill(i)}; o.self = o; a.push(o); } return 'ok'";
    assert_eq!(with_limits(big, |l| l.memory_bytes = 8 * MIB).result, Ok(ToolValue::Text("ok".into())));
    assert!(engine::kept_runs().is_some());
    let small = run("return 1");
    assert!(small.peak_memory_bytes < MIB, "the last run's memory was given back: {}", small.peak_memory_bytes);
    assert_eq!(with_limits(big, |l| l.memory_bytes = 8 * MIB).result, Ok(ToolValue::Text("ok".into())));
}

/// Runs `code` on a thread that keeps a runtime, and checks that the run
/// failed and the runtime was dropped with it.
fn drops_the_kept_runtime(code: &str, limits: impl FnOnce(&mut Limits)) {
    assert_eq!(run("return 1").result, Ok(ToolValue::Json(json!(1))));
    assert!(engine::kept_runs().is_some());
    assert!(with_limits(code, limits).result.is_err(), "{code}");
    assert_eq!(engine::kept_runs(), None, "{code}");
}

#[test]
fn a_runtime_is_not_kept_after_a_run_that_hit_a_limit() {
    drops_the_kept_runtime("while (true) {}", |l| l.wall_clock_ms = 100);
    drops_the_kept_runtime("const a = []; while (true) a.push(new Array(100000).fill(1.5));", |l| l.memory_bytes = 4 * MIB);
    drops_the_kept_runtime("function down(n) { return down(n + 1) + 1; }\nreturn down(0);", |_| ());
    drops_the_kept_runtime("await new Promise(() => {}); return 1", |_| ());
}

#[test]
fn json2markdowntable_renders_rows() {
    let outcome = run("return $json2MarkdownTable([{name: 'a|b', n: 1}, {name: 'c', tags: ['x'], at: new Date(0)}])");
    assert_eq!(
        outcome.result,
        Ok(ToolValue::Text(
            "| name | n | tags | at |\n| --- | --- | --- | --- |\n| a\\|b | 1 |  |  |\n\
             | c |  | [\"x\"] | 1970-01-01T00:00:00.000Z |"
                .into()
        ))
    );
    let with_columns = run("return $json2MarkdownTable([{a: 1, b: 2}], ['b'])");
    assert_eq!(with_columns.result, Ok(ToolValue::Text("| b |\n| --- |\n| 2 |".into())));
}

#[test]
fn console_lines_carry_level_and_elapsed_ms() {
    let outcome = run("console.log('a', {b: 1}, 2, [1], null, undefined);\n\
         console.warn(new TypeError('bad'));\nconsole.error('e');\n\
         console.info('i');\nconsole.debug('d');");
    let lines: Vec<(LogLevel, &str)> = outcome.console.iter().map(|l| (l.level, l.message.as_str())).collect();
    assert_eq!(
        lines,
        vec![
            (LogLevel::Log, "a {\"b\":1} 2 [1] null undefined"),
            (LogLevel::Warn, "TypeError: bad"),
            (LogLevel::Error, "e"),
            (LogLevel::Info, "i"),
            (LogLevel::Debug, "d"),
        ]
    );
    assert!(outcome.console.iter().all(|l| l.elapsed_ms < 1000));

    let timed = run("console.log('early');\nconst t = Date.now();\nwhile (Date.now() - t < 40) {}\nconsole.log('late');");
    assert!(timed.console[1].elapsed_ms >= 30, "{:?}", timed.console);
    assert!(timed.console[0].elapsed_ms < timed.console[1].elapsed_ms);
}

#[test]
fn progress_events_reach_the_host() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut req = RunRequest::new("$progress(1, 3, 'one');\nconsole.log('hi');\n$progress(2);");
    req.events = Some(tx);
    run_blocking(req);
    let mut events = Vec::new();
    while let Ok(event) = rx.try_recv() {
        events.push(event);
    }
    assert_eq!(events.len(), 3);
    assert_eq!(events[0], RunEvent::Progress { done: 1.0, total: Some(3.0), message: Some("one".into()) });
    assert!(matches!(&events[1], RunEvent::Console(line) if line.message == "hi"));
    assert_eq!(events[2], RunEvent::Progress { done: 2.0, total: None, message: None });
}

#[test]
fn what_a_run_sends_the_host_live_is_bounded_for_a_listener_that_never_reads() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut req = RunRequest::new(
        "const m = 'x'.repeat(1 << 20);\n\
         for (let i = 0; i < 5000; i++) { $progress(i, 5000, m); console.log(m); }\n\
         return 'done';",
    );
    req.events = Some(tx);
    req.limits.wall_clock_ms = 10_000;
    assert_eq!(run_blocking(req).result, Ok(ToolValue::Text("done".into())));
    let (mut progress, mut bytes) = (0, 0);
    while let Ok(event) = rx.try_recv() {
        match event {
            RunEvent::Progress { message, .. } => {
                progress += 1;
                bytes += message.map_or(0, |m| m.len());
            }
            RunEvent::Console(line) => bytes += line.message.len(),
        }
    }
    assert_eq!(progress, 1000, "at most 1000 progress reports a run");
    assert!(bytes < 2 * 1024 * 1024, "{bytes} bytes queued for a listener that never reads");
}

#[test]
fn errors_display_as_user_messages() {
    assert_eq!(RunError::Timeout { limit_ms: 2000 }.to_string(), "Timed out after 2000 ms");
    assert_eq!(RunError::OutOfMemory { limit_bytes: 32 * MIB }.to_string(), "Out of memory (limit 32 MiB)");
    assert_eq!(
        RunError::Thrown { name: "TypeError".into(), message: "x is not a function".into(), line: Some(3), stack: None }.to_string(),
        "TypeError: x is not a function (line 3)"
    );
}

#[test]
fn outcomes_serialize_for_the_api() {
    let outcome = run("console.info('x'); return {n: 1}");
    let value = serde_json::to_value(&outcome).unwrap();
    assert_eq!(value["result"]["Ok"], json!({"type": "json", "value": {"n": 1}}));
    assert_eq!(value["console"][0]["level"], "info");
    let back: RunOutcome = serde_json::from_value(value).unwrap();
    assert_eq!(back, outcome);
}

#[test]
fn builtins_the_code_names_are_available() {
    let outcome = run("return [new Date(0).toISOString(), 'a-b'.replace(/-/g, '+'), [...new Set([1, 1, 2])],\n\
                 new Map([['k', 'v']]).get('k'), 'abc'.match('b').index];");
    assert_eq!(outcome.result, Ok(ToolValue::Json(json!(["1970-01-01T00:00:00.000Z", "a+b", [1, 2], "v", 1]))));
}

#[test]
fn globals_the_code_never_names_are_not_installed() {
    // Only names spelled out in the source are installed; that is what keeps calls cheap.
    let hidden = run("return typeof globalThis['con' + 'sole']");
    assert_eq!(hidden.result, Ok(ToolValue::Text("undefined".into())));
    let named = run("return typeof console");
    assert_eq!(named.result, Ok(ToolValue::Text("object".into())));
}

const VALUE: &str = "sk-live-0123456789";

/// A run whose `$env.KEY` is an outbound-only secret bound to loopback `port`,
/// that may also fetch from `other`.
fn with_outbound_secret(port: u16, other: u16, code: String) -> RunRequest {
    let mut req = loopback(port, code);
    req.fetch_allow.push(format!("127.0.0.1:{other}"));
    req.env.insert("KEY".into(), placeholder("KEY"));
    req.outbound_secrets = vec![OutboundSecret::new("KEY", VALUE, vec![format!("127.0.0.1:{port}")])];
    req
}

/// Echoes the request line and headers back, in the body and in a header.
fn echo(head: &str) -> String {
    let line = head.lines().find(|l| l.to_ascii_lowercase().starts_with("authorization")).unwrap_or_default();
    http_response("200 OK", &format!("X-Echo: {line}\r\n"), head)
}

#[test]
fn an_outbound_secret_reaches_its_host_but_never_the_code() {
    let (port, heads) = recording_server(1, echo);
    let (other, stray) = recording_server(1, echo);
    let code = format!(
        "const k = $env.KEY;\n\
         console.log('key', k, k.split('').join(' '), JSON.stringify($env));\n\
         const r = await $fetch('http://127.0.0.1:{port}/echo?key=' + encodeURIComponent(k), {{ headers: {{ Authorization: 'Bearer ' + k }} }});\n\
         const refused = await $fetch('http://127.0.0.1:{other}/steal', {{ headers: {{ 'x-key': k }} }}).then(() => 'sent', e => e.message);\n\
         return {{ k, spread: [...k].join(' '), body: await r.text(), echo: r.headers['x-echo'], length: r.headers['content-length'], refused }};"
    );
    let outcome = run_blocking(with_outbound_secret(port, other, code));
    let head = heads.recv_timeout(Duration::from_secs(5)).expect("the bound host was called");
    assert!(head.starts_with(&format!("GET /echo?key={VALUE} ")), "{head}");
    assert!(head.contains(&format!("authorization: Bearer {VALUE}\r\n")), "{head}");
    assert!(stray.recv_timeout(Duration::from_millis(300)).is_err(), "nothing reached the unbound host");

    let seen = serde_json::to_string(&outcome).unwrap();
    assert!(!seen.contains("0123456789") && !seen.contains("0 1 2 3"), "{seen}");
    let Ok(ToolValue::Json(result)) = outcome.result else { panic!("{:?}", outcome.result) };
    assert_eq!(result["k"], "{{secret:KEY}}");
    assert!(result["body"].as_str().unwrap().contains("authorization: Bearer {{secret:KEY}}"), "{result}");
    assert!(result["body"].as_str().unwrap().starts_with("GET /echo?key={{secret:KEY}} "), "{result}");
    assert_eq!(result["echo"], "authorization: Bearer {{secret:KEY}}");
    assert_eq!(result["length"], result["body"].as_str().unwrap().len().to_string(), "the value's length is not told");
    assert_eq!(
        result["refused"],
        format!("$fetch refused: secret KEY may be sent only to 127.0.0.1:{port} (an entry without a port means 80 and 443), not to 127.0.0.1:{other}; nothing was sent")
    );
}

#[test]
fn a_redirect_off_the_bound_host_never_carries_the_value() {
    let (other, landed) = recording_server(2, echo);
    // The bound host sends the code elsewhere: with its header, and with the value in the location.
    for (location, outcome) in
        [(format!("http://127.0.0.1:{other}/landing"), "landed"), (format!("http://127.0.0.1:{other}/landing?k={VALUE}"), "refused")]
    {
        let header = format!("Location: {location}\r\n");
        let (port, heads) = recording_server(1, move |_| http_response("302 Found", &header, ""));
        let code = format!(
            "return await $fetch('http://127.0.0.1:{port}/go', {{ headers: {{ 'x-key': $env.KEY, 'x-plain': 'kept' }} }})\n\
               .then(r => r.text(), e => e.message);"
        );
        let result = run_blocking(with_outbound_secret(port, other, code)).result;
        assert!(heads.recv_timeout(Duration::from_secs(5)).unwrap().contains(&format!("x-key: {VALUE}")), "the bound host got it");
        match outcome {
            "landed" => {
                let head = landed.recv_timeout(Duration::from_secs(5)).expect("the redirect was followed");
                assert!(head.contains("x-plain: kept") && !head.contains("x-key") && !head.contains(VALUE), "{head}");
            }
            _ => {
                let Ok(ToolValue::Text(message)) = result else { panic!("{result:?}") };
                assert!(message.starts_with("$fetch refused: secret KEY may be sent only to"), "{message}");
                assert!(!message.contains(VALUE), "{message}");
                assert!(landed.recv_timeout(Duration::from_millis(300)).is_err(), "nothing reached the other host");
            }
        }
    }
}

#[test]
fn errors_of_a_request_carrying_the_value_name_only_its_placeholder() {
    // A closed port: the connection error names the URL that was being sent.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let code = format!("return await $fetch('http://127.0.0.1:{closed}/?key=' + $env.KEY).then(() => 'sent', e => e.message);");
    let outcome = run_blocking(with_outbound_secret(closed, closed, code));
    let Ok(ToolValue::Text(message)) = outcome.result else { panic!("{:?}", outcome.result) };
    assert!(!message.contains(VALUE) && !message.contains("0123456789"), "{message}");
}

#[test]
fn a_run_records_its_fetches_and_a_replay_answers_from_the_recording_without_the_network() {
    let (port, heads) = recording_server(10, |head| match head.split(' ').nth(1) {
        Some("/a") => http_response("200 OK", "Set-Cookie: session=s3cr3t\r\n", r#"{"n":1}"#),
        _ => http_response("500 Internal Server Error", "", "down"),
    });
    let base = format!("http://127.0.0.1:{port}");
    let fetch_both = format!(
        "const a = await (await $fetch('{base}/a', {{ headers: {{ authorization: 'Bearer abc', 'x-a': '1' }} }})).json();\n\
         const b = await $fetch('{base}/b');\n"
    );
    let broken = format!("{fetch_both}if (!b.ok) throw new Error('b is ' + await b.text());\nreturn a;");
    let first = run_blocking(loopback(port, broken.clone()));
    assert_eq!(first.result.as_ref().unwrap_err().to_string(), "Error: b is down (line 3)");
    assert_eq!(first.fetches.len(), 2);
    let a = &first.fetches[0];
    assert_eq!((a.method.as_str(), a.url.as_str()), ("GET", format!("{base}/a").as_str()));
    assert!(a.request_headers.contains(&("authorization".into(), "[redacted]".into())), "{:?}", a.request_headers);
    assert!(a.request_headers.contains(&("x-a".into(), "1".into())));
    let response = a.response.clone().unwrap().unwrap();
    assert_eq!((response.status, response.body.as_str()), (200, r#"{"n":1}"#));
    assert!(response.headers.contains(&("set-cookie".into(), "[redacted]".into())), "{:?}", response.headers);
    assert_eq!(heads.try_iter().count(), 2);

    // Nothing is allowed to go out now: only the recording can answer.
    let replay = |code: &str| {
        let mut req = RunRequest::new(code);
        req.replay = Some(std::sync::Arc::new(first.fetches.clone()));
        run_blocking(req)
    };
    let again = replay(&broken);
    assert_eq!(again.result, first.result, "the failure reproduces");
    assert_eq!(again.fetches.len(), 2, "a replay records what it served");
    let fixed = replay(&format!("{fetch_both}return {{ a, b: b.status }};"));
    assert_eq!(fixed.result, Ok(ToolValue::Json(json!({"a": {"n": 1}, "b": 500}))));
    let elsewhere = replay(&format!("return (await $fetch('{base}/c')).status"));
    let message = elsewhere.result.unwrap_err().to_string();
    assert!(message.contains(&format!("replay: the recorded call sent no GET {base}/c")), "{message}");
    assert_eq!(heads.try_iter().count(), 0, "a replay never touches the network");
}

#[test]
fn a_recording_keeps_bodies_within_its_budget() {
    let big = "x".repeat(300 * 1024);
    let port = http_server(1, move |_| http_response("200 OK", "", &big));
    let outcome = run_blocking(loopback(port, format!("return (await (await $fetch('http://127.0.0.1:{port}/')).text()).length")));
    assert_eq!(outcome.result, Ok(ToolValue::Json(json!(300 * 1024))), "the code gets the whole body");
    let recorded = &outcome.fetches[0];
    assert!(recorded.truncated);
    assert_eq!(recorded.response.as_ref().unwrap().as_ref().unwrap().body.len(), fetch::RECORDED_BODY_BYTES);
}

/// Runs `code` as a caller would: each round gives the answers from
/// `answers` to the questions the run stopped for (by key), and runs again,
/// until the run ends or asks what `answers` has no answer for.
fn asking(code: &str, answers: serde_json::Value) -> RunOutcome {
    let answers = args(answers);
    let mut input = Input::default();
    loop {
        let mut req = RunRequest::new(code);
        req.input = input.clone();
        let outcome = run_blocking(req);
        let Err(RunError::NeedsInput { requests }) = &outcome.result else { return outcome };
        let before = input.clone();
        for (key, question) in requests {
            if let Some(answer) = answers.get(key) {
                input.give(key.clone(), Answer::to(question, answer.clone()));
            }
        }
        if input == before {
            return outcome;
        }
    }
}

fn questions(outcome: &RunOutcome) -> serde_json::Map<String, serde_json::Value> {
    match &outcome.result {
        Err(RunError::NeedsInput { requests }) => requests.clone(),
        other => panic!("expected the run to stop asking, got {other:?}"),
    }
}

#[test]
fn a_question_without_an_answer_stops_the_run_before_the_code_after_it() {
    let code = "console.log('before');\n\
                const r = await $ask('Delete 3 files?', {type: 'object', properties: {ok: {type: 'boolean'}}, required: ['ok']});\n\
                console.log('after');\n\
                return r.content.ok ? 'deleted' : 'kept';";
    let outcome = asking(code, json!({}));
    let asked = questions(&outcome);
    assert_eq!(asked["ask1"]["method"], "elicitation/create");
    assert_eq!(asked["ask1"]["params"]["message"], "Delete 3 files?");
    let lines: Vec<&str> = outcome.console.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(lines, ["before"]);
    assert!(outcome.result.unwrap_err().to_string().contains("Delete 3 files?"));

    let answered = asking(code, json!({"ask1": {"action": "accept", "content": {"ok": true}}}));
    assert_eq!(answered.result, Ok(ToolValue::Text("deleted".into())));
}

#[test]
fn questions_asked_together_are_put_in_one_round() {
    let code = "const [a, b] = await Promise.all([$ask('First?'), $ask('Second?')]);\n\
                const roots = await $input({where: {method: 'roots/list'}});\n\
                return [a.action, b.action, roots.where.roots.length];";
    let first = questions(&asking(code, json!({})));
    assert_eq!(first.keys().collect::<Vec<_>>(), ["ask1", "ask2"]);
    let second = questions(&asking(code, json!({"ask1": {"action": "accept"}, "ask2": {"action": "decline"}})));
    assert_eq!(second.keys().collect::<Vec<_>>(), ["where"]);
    let all = json!({"ask1": {"action": "accept"}, "ask2": {"action": "decline"}, "where": {"roots": [{"uri": "file:///x"}]}});
    assert_eq!(asking(code, all).result, Ok(ToolValue::Json(json!(["accept", "decline", 1]))));
}

#[test]
fn catching_or_looping_after_a_question_does_not_run_on_and_nothing_goes_out() {
    let port = http_server(1, |_| http_response("200 OK", "", "sent"));
    for tail in ["while (true) {}", "return 'done anyway'", "return await $fetch(URL)"] {
        let code = format!(
            "const URL = 'http://127.0.0.1:{port}/';\n\
             try {{ $ask('Proceed?'); }} catch (e) {{}}\n\
             {tail}"
        );
        let outcome = run_blocking(loopback(port, code));
        assert!(questions(&outcome).contains_key("ask1"), "{tail}");
        assert!(!outcome.fetches.iter().any(|f| matches!(f.response, Some(Ok(_)))), "{tail}: a request went out");
    }
}

#[test]
fn a_question_that_is_no_question_is_an_error_the_code_can_handle() {
    let code = "try { await $input({k: {method: 'ping'}}); } catch (e) { return e.message; }";
    match asking(code, json!({})).result {
        Ok(ToolValue::Text(message)) => assert!(message.contains("the methods are elicitation/create"), "{message}"),
        other => panic!("{other:?}"),
    }
    let uncaught = asking("return await $ask('')", json!({}));
    assert!(matches!(uncaught.result, Err(RunError::Thrown { .. })), "{:?}", uncaught.result);
}

#[test]
fn content_blocks_are_a_result_only_as_the_object_content_returned() {
    let made = run("return $content([{type: 'text', text: 'chart:'}, {type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png'}])");
    assert_eq!(
        made.result,
        Ok(ToolValue::Content(vec![
            json!({"type": "text", "text": "chart:"}),
            json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"})
        ]))
    );
    // A copy, or the same shape built by hand, is plain JSON: nothing a tool computes passes for content.
    let copied = run("const c = $content([{type: 'text', text: 'x'}]); return JSON.parse(JSON.stringify(c))");
    assert_eq!(copied.result, Ok(ToolValue::Json(json!({"content": 1}))));
    let forged = run("return {content: [{type: 'image', data: 'AAAA', mimeType: 'image/png'}]}");
    assert!(matches!(forged.result, Ok(ToolValue::Json(_))));
}

#[test]
fn a_malformed_content_block_is_a_type_error_at_its_line() {
    let outcome = run("const ok = 1;\nreturn $content([{type: 'image', data: 'AAAA', mimeType: 'text/html'}])");
    match outcome.result {
        Err(RunError::Thrown { name, message, line, .. }) => {
            assert_eq!(name, "TypeError");
            assert!(message.contains("block 0: an image block's mimeType must be image/"), "{message}");
            assert_eq!(line, Some(2));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn sleep_settles_after_its_time_without_holding_the_run() {
    let outcome = run("const t = Date.now(); await $sleep(50); return Date.now() - t >= 45 ? 'slept' : 'woke early'");
    assert_eq!(outcome.result, Ok(ToolValue::Text("slept".into())));
    let refused = run("try { await $sleep(-1) } catch (e) { return e.message }");
    assert_eq!(refused.result, Ok(ToolValue::Text("$sleep takes a number of milliseconds, not -1".into())));
}

#[test]
fn a_sleep_past_the_time_limit_times_out() {
    let outcome = with_limits("await $sleep(60000); return 'late'", |l| l.wall_clock_ms = 100);
    assert_eq!(outcome.result, Err(RunError::Timeout { limit_ms: 100 }));
    assert!(outcome.duration < Duration::from_secs(5), "{:?}", outcome.duration);
}

/// Runs `code` (which logs once it is under way) and cancels it when that line arrives.
fn cancelled_once_started(code: &str) -> RunOutcome {
    let cancel = tokio_util::sync::CancellationToken::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut req = RunRequest::new(code);
    req.limits.wall_clock_ms = 60_000;
    req.events = Some(tx);
    req.cancel = Some(cancel.clone());
    let canceller = thread::spawn(move || {
        if rx.blocking_recv().is_some() {
            cancel.cancel();
        }
    });
    let outcome = run_blocking(req);
    canceller.join().unwrap();
    outcome
}

#[test]
fn a_cancelled_run_stops_at_once_whether_computing_or_waiting() {
    for code in ["console.log('under way'); while (true) {}", "console.log('under way'); await $sleep(60000); return 'late'"] {
        let outcome = cancelled_once_started(code);
        assert_eq!(outcome.result, Err(RunError::Cancelled), "{code}");
        assert!(outcome.duration < Duration::from_secs(10), "{code}: {:?}", outcome.duration);
    }
    // A cancel cannot be caught by the tool either.
    let caught = cancelled_once_started("console.log('under way'); try { while (true) {} } catch (e) { return 'caught' }");
    assert_eq!(caught.result, Err(RunError::Cancelled));
    assert_eq!(run("return 'fine'").result, Ok(ToolValue::Text("fine".into())));
}

/// A run whose code may fetch loopback `port` as the caller's account at
/// `jira`, holding `token`, renewed by `renewed` (recording what it is asked).
fn with_account(
    port: u16,
    code: String,
    token: &str,
    renewed: Option<&'static str>,
) -> (RunRequest, std::sync::mpsc::Receiver<(String, String)>) {
    let mut req = loopback(port, code);
    req.outbound_secrets = vec![OutboundSecret::new("account.jira", token, vec![format!("127.0.0.1:{port}")])];
    let (asked, asks) = std::sync::mpsc::channel();
    req.renew = Some(Renew::new(move |app, refused| {
        asked.send((app, refused)).unwrap();
        Box::pin(async move { renewed.map(str::to_owned) })
    }));
    (req, asks)
}

/// Takes only `tok-new`, and says back the token it was sent.
fn takes_the_new_token(head: &str) -> String {
    let bearer = head.lines().find_map(|l| l.strip_prefix("authorization: Bearer ")).unwrap_or_default().to_owned();
    match bearer.as_str() {
        "tok-new" => http_response("200 OK", "", "hello tok-new, not tok-old"),
        _ => http_response("401 Unauthorized", "", &format!("refused {bearer}")),
    }
}

#[test]
fn a_token_an_api_refuses_is_renewed_once_for_the_rest_of_the_run_and_neither_token_reaches_the_code() {
    let (port, heads) = recording_server(3, takes_the_new_token);
    let code = format!(
        "const first = await $fetch('http://127.0.0.1:{port}/a', {{method: 'POST', body: 'x', account: 'jira'}});\n\
         const second = await $fetch('http://127.0.0.1:{port}/b', {{account: 'jira'}});\n\
         return [first.status, await first.text(), second.status];"
    );
    let (req, asks) = with_account(port, code, "tok-old", Some("tok-new"));
    let outcome = run_blocking(req);
    assert_eq!(
        outcome.result.unwrap().to_json(),
        json!([200, "hello {{secret:account.jira}}, not {{secret:account.jira}}", 200]),
        "the POST was sent again with the new token; the old one is masked too"
    );
    assert_eq!(asks.try_iter().collect::<Vec<_>>(), vec![("jira".to_owned(), "tok-old".to_owned())], "renewed once, for the run");
    let sent: Vec<String> = heads.try_iter().map(|h| h.lines().find(|l| l.starts_with("authorization")).unwrap().to_owned()).collect();
    assert_eq!(sent, ["authorization: Bearer tok-old", "authorization: Bearer tok-new", "authorization: Bearer tok-new"]);
}

#[test]
fn a_refused_token_that_cannot_be_renewed_hands_the_code_the_401_after_one_try() {
    let (port, heads) = recording_server(1, takes_the_new_token);
    let code = format!("const r = await $fetch('http://127.0.0.1:{port}/a', {{account: 'jira'}});\nreturn [r.status, await r.text()];");
    let (req, asks) = with_account(port, code, "tok-old", None);
    let outcome = run_blocking(req);
    assert_eq!(outcome.result.unwrap().to_json(), json!([401, "refused {{secret:account.jira}}"]));
    assert_eq!(asks.try_iter().count(), 1);
    assert_eq!(heads.try_iter().count(), 1, "not sent again without a new token");
}

#[test]
fn an_api_that_refuses_every_token_costs_one_renewal_a_run() {
    let (port, heads) = recording_server(4, |_| http_response("401 Unauthorized", "", "no"));
    let code = format!(
        "const statuses = [];\n\
         for (const path of ['a', 'b', 'c']) statuses.push((await $fetch('http://127.0.0.1:{port}/' + path, {{account: 'jira'}})).status);\n\
         return statuses;"
    );
    let (req, asks) = with_account(port, code, "tok-old", Some("tok-new"));
    assert_eq!(run_blocking(req).result.unwrap().to_json(), json!([401, 401, 401]));
    assert_eq!(asks.try_iter().count(), 1, "renewed once");
    let sent: Vec<String> = heads.try_iter().map(|h| h.lines().find(|l| l.starts_with("authorization")).unwrap().to_owned()).collect();
    assert_eq!(
        sent,
        [
            "authorization: Bearer tok-old",
            "authorization: Bearer tok-new",
            "authorization: Bearer tok-new",
            "authorization: Bearer tok-new"
        ]
    );
}
