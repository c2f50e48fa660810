//! Failed calls kept for their tool's editors and replayed against their
//! recorded `$fetch` answers, on SQLite and on PostgreSQL.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::support::user;
use serde_json::json;
use toolshed_domain::names::{Description, Tags, Title};
use toolshed_domain::outbound::InternalHosts;
use toolshed_domain::sandbox::ToolValue;
use toolshed_domain::tools::{Check, NewTool, RunSource, Source, ToolError, ToolSettings, Visibility};
use toolshed_domain::{Db, Settings, Toolshed};

/// What the rates API sends back in a credential-like response header.
const REQUEST_KEY: &str = "9f8e7d6c";

/// A rates API on loopback: `/rates` answers, `/fees` is down for
/// maintenance. Counts the requests it gets.
fn rates_api() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut head = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            while reader.read_line(&mut head).unwrap() > 0 && !head.ends_with("\r\n\r\n") {}
            count.fetch_add(1, Ordering::SeqCst);
            let (status, body) =
                if head.starts_with("GET /rates") { ("200 OK", r#"{"EUR":2}"#) } else { ("503 Service Unavailable", "maintenance") };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nX-Request-Key: rk-{REQUEST_KEY}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, served)
}

const BROKEN: &str = "console.log('converting with key ' + $api_key);\n\
    const rates = await (await $fetch(`${$context.base}/rates?key=${$api_key}`)).json();\n\
    const fees = await $fetch(`${$context.base}/fees`);\n\
    return { total: $amount * rates.EUR + (await fees.json()).fee };";

const FIXED: &str = "const rates = await (await $fetch(`${$context.base}/rates?key=${$api_key}`)).json();\n\
    const fees = await $fetch(`${$context.base}/fees`);\n\
    const fee = fees.ok ? (await fees.json()).fee : 0;\n\
    return { total: $amount * rates.EUR + fee };";

fn source(code: &str, port: u16) -> Source {
    let args = serde_json::from_value(json!([
        {"name": "amount", "type": {"kind": "number"}, "required": true},
        {"name": "api_key", "type": {"kind": "string"}, "required": true, "sensitive": true}
    ]))
    .unwrap();
    // `$context` has no base URL: the code gets the port written in.
    Source::parse(&code.replace("${$context.base}", &format!("http://127.0.0.1:{port}")), args, None).unwrap()
}

store_test!(a_failed_call_is_kept_redacted_for_editors_and_replays_without_the_network, |db: Db| async move {
    let ts = Toolshed::new(db, Settings { internal_hosts: InternalHosts::parse("127.0.0.1"), ..Settings::default() });
    let (alice, bob, carol) = (user(&ts, "alice", "finance").await, user(&ts, "bob", "finance").await, user(&ts, "carol", "legal").await);
    let (port, served) = rates_api();
    let tool = ts.tools().create_tool(&alice, NewTool::parse("convert", "Convert", "", "", "everyone").unwrap()).await.unwrap();
    let settings = ToolSettings {
        title: Title::parse("Convert").unwrap(),
        description: Description::parse("").unwrap(),
        tags: Tags::parse("").unwrap(),
        visibility: Visibility::Everyone,
        read_only_hint: true,
        destructive_hint: false,
        fetch_allow: vec![format!("127.0.0.1:{port}")],
        timeout_ms: 2_000,
        memory_mib: 32,
        task_support: Default::default(),
        serves: Default::default(),
    };
    ts.tools().update_tool_settings(&alice, tool.id, settings).await.unwrap();
    ts.tools().save_version(&alice, tool.id, source(BROKEN, port), "v1").await.unwrap();
    ts.tools().publish(&alice, tool.id, 1).await.unwrap();

    let input = json!({"amount": 10, "api_key": "k-12345678"});
    let call = ts.tools().run_tool(&carol, tool.id, RunSource::Published, input.clone(), "mcp-http", None).await.unwrap();
    let error = call.outcome.result.clone().unwrap_err().to_string();
    let ok =
        ts.tools().run_tool(&carol, tool.id, RunSource::Version(1), json!({"amount": 1, "api_key": "short"}), "test", None).await.unwrap();
    assert!(ok.outcome.result.is_err(), "a test run fails too, but is not a call to keep");
    ts.usage().flush().await;
    assert_eq!(served.load(Ordering::SeqCst), 4);

    // Kept once, for the tool's editors, with the sensitive value gone everywhere.
    let kept = ts.tools().failed_calls(&bob, tool.id).await.unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(ts.tools().failed_call_count(&alice, tool.id).await.unwrap(), 1);
    assert!(matches!(ts.tools().failed_call_count(&carol, tool.id).await, Err(ToolError::Forbidden)));
    assert_eq!((kept[0].caller.as_str(), kept[0].call.transport.as_str(), kept[0].call.version), ("carol", "mcp-http", 1));
    assert_eq!(kept[0].call.error, error);
    let recorded = ts.tools().failed_call(&alice, tool.id, kept[0].id).await.unwrap();
    let id = recorded.id;
    let recorded = recorded.call;
    assert_eq!(recorded.args, json!({"amount": 10, "api_key": "[redacted]"}));
    assert_eq!(recorded.console[0].message, "converting with key [redacted]");
    assert_eq!(recorded.fetches.len(), 2);
    assert_eq!(recorded.fetches[0].url, format!("http://127.0.0.1:{port}/rates?key=[redacted]"));
    let fees = recorded.fetches[1].response.clone().unwrap().unwrap();
    assert_eq!((fees.status, fees.body.as_str()), (503, "maintenance"));
    let stored: (String, String, String) =
        sqlx::query_as("SELECT args_json, console_json, fetches_json FROM failed_calls").fetch_one(ts.db().pool()).await.unwrap();
    assert!(!format!("{stored:?}").contains("k-12345678"), "the key is stored nowhere: {stored:?}");

    // Nobody else reads them (Carol may call the tool, not edit it), nor reaches them through another tool.
    assert!(matches!(ts.tools().failed_calls(&carol, tool.id).await, Err(ToolError::Forbidden)));
    assert!(matches!(ts.tools().failed_call(&carol, tool.id, id).await, Err(ToolError::Forbidden)));
    let other = ts.tools().create_tool(&alice, NewTool::parse("other", "Other", "", "", "everyone").unwrap()).await.unwrap();
    assert!(matches!(ts.tools().failed_call(&alice, other.id, id).await, Err(ToolError::NotFound)));
    let fixed = source(FIXED, port);
    let draft = || RunSource::Draft { code: fixed.code.to_string(), args: fixed.args.clone(), output_schema: None };
    assert!(matches!(ts.tools().replay_failed_call(&carol, tool.id, id, draft(), input.clone()).await, Err(ToolError::Forbidden)));

    // The replay reproduces the failure, then the fix passes, and the API hears nothing.
    let again = ts.tools().replay_failed_call(&alice, tool.id, id, RunSource::Version(1), recorded.args.clone()).await.unwrap();
    assert_eq!(again.outcome.result.unwrap_err().to_string(), error);
    let mended = ts.tools().replay_failed_call(&alice, tool.id, id, draft(), input.clone()).await.unwrap();
    assert_eq!(mended.outcome.result, Ok(ToolValue::Json(json!({"total": 20}))), "the real key matches the redacted URL");
    assert_eq!(served.load(Ordering::SeqCst), 4, "a replay never reaches the network");

    // Saved as a test case, the fix is checked against the recording, every time.
    let check = Check::Equals { expected: r#"{"total":20}"#.into() };
    assert!(matches!(
        ts.tools().save_test_case_from_call(&carol, tool.id, id, "fees down", recorded.args.clone(), check.clone()).await,
        Err(ToolError::Forbidden)
    ));
    ts.tools().save_test_case_from_call(&alice, tool.id, id, "fees down", recorded.args.clone(), check).await.unwrap();
    ts.tools().save_version(&alice, tool.id, fixed.clone(), "fees may be down").await.unwrap();
    let results = ts.tools().run_test_cases(&alice, tool.id, RunSource::Version(2)).await.unwrap();
    assert!(results[0].passed, "{results:?}");
    let results = ts.tools().run_test_cases(&alice, tool.id, RunSource::Version(1)).await.unwrap();
    assert!(!results[0].passed, "{results:?}");
    assert_eq!(served.load(Ordering::SeqCst), 4);

    // After 14 days a failed call is gone.
    sqlx::query("UPDATE failed_calls SET at_ms = at_ms - 15 * 86400000").execute(ts.db().pool()).await.unwrap();
    assert!(ts.tools().failed_calls(&alice, tool.id).await.unwrap().is_empty());
    assert!(matches!(ts.tools().failed_call(&alice, tool.id, id).await, Err(ToolError::NotFound)));
    ts.tools().run_tool(&carol, tool.id, RunSource::Version(1), input, "api", None).await.unwrap();
    ts.usage().flush().await;
    let rows: (i64,) = sqlx::query_as("SELECT COUNT(*) FROM failed_calls").fetch_one(ts.db().pool()).await.unwrap();
    assert_eq!(rows.0, 1, "the old one was pruned when the new one was written");
});

/// A value that every encoding changes: a space, `&`, `/`, `"`, `+`, non-ASCII.
const TRICKY_KEY: &str = "k-1 2&3/4\"ö+é";

/// Base64 for the sandbox, which has no `btoa`: of the text's UTF-8 bytes.
const BASE64_JS: &str = "const b64 = (s) => {\n\
    const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';\n\
    const bytes = unescape(encodeURIComponent(s));\n\
    let out = '';\n\
    for (let i = 0; i < bytes.length; i += 3) {\n\
      const n = (bytes.charCodeAt(i) << 16) | ((bytes.charCodeAt(i + 1) || 0) << 8) | (bytes.charCodeAt(i + 2) || 0);\n\
      out += abc[n >> 18 & 63] + abc[n >> 12 & 63] + (i + 1 < bytes.length ? abc[n >> 6 & 63] : '=') + (i + 2 < bytes.length ? abc[n & 63] : '=');\n\
    }\n\
    return out;\n\
  };\n";

/// The key sent every way code sends a value: `encodeURIComponent`, raw in
/// a query (the URL parser encodes what it must), a form body, JSON, base64
/// alone and inside `user:key`; and credential headers of several vendors.
const SPREADS_THE_KEY: &str = "const key = $api_key;\n\
    const r = await $fetch(`${$context.base}/rates?key=${encodeURIComponent(key)}&raw=${key}`, {\n\
      method: 'POST',\n\
      headers: {\n\
        'X-Proof': b64('user:' + key), 'X-Trace': b64(key),\n\
        'Ocp-Apim-Subscription-Key': 'sub-5e1f', 'X-Functions-Key': 'fn-77aa', 'DD-APPLICATION-KEY': 'dd-90b1',\n\
      },\n\
      body: 'key=' + encodeURIComponent(key).replace(/%20/g, '+') + '&doc=' + JSON.stringify({ key }),\n\
    });\n\
    console.log('sent ' + encodeURIComponent(key).toLowerCase());\n\
    throw new Error('rates said ' + r.status + ' for ' + b64(key));";

/// As `encodeURIComponent` writes it: all but `A-Z a-z 0-9 - _ . ! ~ * ' ( )`, hex upper or lower.
fn uri_component(value: &str, lower: bool) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'!' | b'~' | b'*' | b'\'' | b'(' | b')' => {
                char::from(b).to_string()
            }
            _ if lower => format!("%{b:02x}"),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

store_test!(a_sensitive_argument_is_stored_in_none_of_the_encodings_it_was_sent_in, |db: Db| async move {
    use base64::Engine;
    let ts = Toolshed::new(db, Settings { internal_hosts: InternalHosts::parse("127.0.0.1"), ..Settings::default() });
    let (alice, carol) = (user(&ts, "alice", "finance").await, user(&ts, "carol", "legal").await);
    let (port, _) = rates_api();
    let tool = ts.tools().create_tool(&alice, NewTool::parse("spread", "Spread", "", "", "everyone").unwrap()).await.unwrap();
    let settings = ToolSettings {
        title: Title::parse("Spread").unwrap(),
        description: Description::parse("").unwrap(),
        tags: Tags::parse("").unwrap(),
        visibility: Visibility::Everyone,
        read_only_hint: false,
        destructive_hint: false,
        fetch_allow: vec![format!("127.0.0.1:{port}")],
        timeout_ms: 2_000,
        memory_mib: 32,
        task_support: Default::default(),
        serves: Default::default(),
    };
    ts.tools().update_tool_settings(&alice, tool.id, settings).await.unwrap();
    ts.tools().save_version(&alice, tool.id, source(&format!("{BASE64_JS}{SPREADS_THE_KEY}"), port), "v1").await.unwrap();
    ts.tools().publish(&alice, tool.id, 1).await.unwrap();

    let call = ts.tools().run_tool(&carol, tool.id, RunSource::Published, json!({"amount": 1, "api_key": TRICKY_KEY}), "mcp-http", None);
    let error = call.await.unwrap().outcome.result.unwrap_err().to_string();
    assert!(error.starts_with("Error: rates said 503 for "), "the code ran to its end: {error}");
    ts.usage().flush().await;

    let kept = ts.tools().failed_calls(&alice, tool.id).await.unwrap();
    let recorded = ts.tools().failed_call(&alice, tool.id, kept[0].id).await.unwrap().call;
    let sent = &recorded.fetches[0];
    assert_eq!(sent.url, format!("http://127.0.0.1:{port}/rates?key=[redacted]&raw=[redacted]"));
    assert_eq!(sent.request_body.as_deref(), Some(r#"key=[redacted]&doc={"key":"[redacted]"}"#));
    assert_eq!(recorded.console[0].message, "sent [redacted]");
    assert!(recorded.error.starts_with("Error: rates said 503 for [redacted] (line "), "{}", recorded.error);
    let header =
        |headers: &[(String, String)], name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
    assert_eq!(header(&sent.request_headers, "X-Trace").as_deref(), Some("[redacted]"));
    let proof = header(&sent.request_headers, "X-Proof").unwrap();
    assert!(proof.starts_with("dXNlcj") && proof.contains("[redacted]"), "only user: is left of the base64 text: {proof}");
    for name in ["Ocp-Apim-Subscription-Key", "X-Functions-Key", "DD-APPLICATION-KEY"] {
        assert_eq!(header(&sent.request_headers, name).as_deref(), Some("[redacted]"), "{name}");
    }
    let response = sent.response.clone().unwrap().unwrap();
    assert_eq!(header(&response.headers, "X-Request-Key").as_deref(), Some("[redacted]"));

    // What is stored holds the key in none of its forms, nor the vendors' keys.
    let stored: (String, String, String, String) =
        sqlx::query_as("SELECT args_json, console_json, fetches_json, error FROM failed_calls").fetch_one(ts.db().pool()).await.unwrap();
    let stored = format!("{} {} {} {}", stored.0, stored.1, stored.2, stored.3);
    let json = serde_json::to_string(TRICKY_KEY).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let forms = [
        TRICKY_KEY.to_owned(),
        json.trim_matches('"').to_owned(),
        serde_json::to_string(json.trim_matches('"')).unwrap().trim_matches('"').to_owned(),
        uri_component(TRICKY_KEY, false),
        uri_component(TRICKY_KEY, true),
        url::form_urlencoded::byte_serialize(TRICKY_KEY.as_bytes()).collect(),
        url::Url::parse(&format!("http://h/?raw={TRICKY_KEY}")).unwrap().query().unwrap().trim_start_matches("raw=").to_owned(),
        b64.encode(TRICKY_KEY),
        b64.encode(format!("user:{TRICKY_KEY}")),
        "sub-5e1f".into(),
        "fn-77aa".into(),
        "dd-90b1".into(),
        format!("rk-{REQUEST_KEY}"),
    ];
    for form in forms {
        assert!(!stored.contains(&form), "{form} is stored: {stored}");
    }
});
