//! The UI's server functions at the HTTP level, all of them: arguments a
//! function cannot be called with are the caller's mistake (400, saying what
//! is wrong), never the server's (500).

use serde_json::{json, Value};

use crate::common::TestServer;
// Server functions register themselves when the app is linked: so is their list here.
use app as _;

/// How a server function takes its arguments.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Encoding {
    /// The default: a form (`application/x-www-form-urlencoded`).
    Form,
    /// `input = crate::api::JsonArgs`.
    Json,
}

/// Every `#[server(…)]` in the app's sources: its path and how it takes its arguments.
fn declared() -> Vec<(String, Encoding)> {
    fn walk(dir: &std::path::Path, found: &mut Vec<(String, Encoding)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
                continue;
            }
            for line in std::fs::read_to_string(&path).unwrap().lines().filter(|l| l.starts_with("#[server(")) {
                let endpoint = line.split("endpoint = \"").nth(1).and_then(|r| r.split('"').next());
                let endpoint = endpoint.unwrap_or_else(|| panic!("{}: a server function without an endpoint: {line}", path.display()));
                let encoding = match line.split("input = ").nth(1) {
                    None => Encoding::Form,
                    Some(input) if input.starts_with("crate::api::JsonArgs") => Encoding::Json,
                    Some(_) => panic!(
                        "{}: take JSON arguments with crate::api::JsonArgs, which names a field that does not fit: {line}",
                        path.display()
                    ),
                };
                found.push((format!("/api/{endpoint}"), encoding));
            }
        }
    }
    let mut found = Vec::new();
    walk(&crate::common::repo_root().join("app/src"), &mut found);
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// Posts `body` to the server function at `path` the way the wasm does.
async fn post(srv: &TestServer, path: &str, encoding: Encoding, body: String) -> (u16, Value) {
    let content_type = match encoding {
        Encoding::Form => "application/x-www-form-urlencoded",
        Encoding::Json => "application/json",
    };
    let res = reqwest::Client::new()
        .post(srv.url(path))
        .header("Accept", "application/json")
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The field a `BadRequest` says is missing.
fn missing_field(answer: &Value) -> Option<String> {
    let why = answer["BadRequest"].as_str()?;
    Some(why.split("missing field `").nth(1)?.split('`').next()?.to_owned())
}

server_test!(every_server_function_answers_arguments_it_cannot_take_with_400_never_500, |srv: TestServer| async move {
    let functions = declared();
    // The list the server routes by (collected at link time) holds each of them, and nothing else.
    let mut registered: Vec<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, method)| {
            assert_eq!(method, axum::http::Method::POST, "{path}");
            path.to_owned()
        })
        .collect();
    registered.sort();
    assert_eq!(registered, functions.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>());
    assert!(functions.len() > 80, "{} server functions", functions.len());

    for (path, encoding) in functions {
        // Nothing at all: a function with required arguments names the first one missing.
        let empty = match encoding {
            Encoding::Form => String::new(),
            Encoding::Json => "{}".to_owned(),
        };
        let (status, answer) = post(&srv, &path, encoding, empty).await;
        assert!(status < 500, "{path} answered {status} to no arguments: {answer}");
        let Some(field) = missing_field(&answer) else {
            // Without required arguments it ran, as anyone not signed in.
            assert_ne!(status, 400, "{path}: {answer}");
            continue;
        };
        assert_eq!(status, 400, "{path}: {answer}");
        // The field with a value of a shape it does not take: a map (holding a
        // list) where it takes a plain value, else (it takes a structure) a plain value.
        let shapes = match encoding {
            Encoding::Form => [format!("{field}[x][]=1"), format!("{field}=x")],
            Encoding::Json => [json!({ field.as_str(): {"x": [1]} }).to_string(), json!({ field.as_str(): "x" }).to_string()],
        };
        let (mut status, mut answer) = post(&srv, &path, encoding, shapes[0].clone()).await;
        assert!(status < 500, "{path} answered {status} to {}: {answer}", shapes[0]);
        if status != 400 {
            (status, answer) = post(&srv, &path, encoding, shapes[1].clone()).await;
        }
        assert_eq!(status, 400, "{path} answered {status} to an ill-typed {field}: {answer}");
        let why = answer["BadRequest"].as_str().unwrap_or_else(|| panic!("{path}: {answer}"));
        if encoding == Encoding::Json {
            assert!(why.starts_with(&format!("{field}: ")), "{path}: {why}");
        }
    }
    // JSON that is not even JSON.
    let (status, answer) = post(&srv, "/api/tools/run", Encoding::Json, "{\"tool\": ".to_owned()).await;
    assert_eq!(status, 400, "{answer}");
});
