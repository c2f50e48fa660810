//! The official Rust SDK's client (rmcp) against the real server, over
//! Streamable HTTP. (The TypeScript and Python SDKs are in end2end/.)

use crate::common::TestServer;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::ServiceExt;
use serde_json::json;

fn transport(srv: &TestServer, path: &str, token: &str) -> impl rmcp::transport::Transport<rmcp::RoleClient> {
    StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(srv.url(path)).auth_header(token))
}

fn arguments(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap()
}

server_test!(the_rust_sdk_client_lists_and_calls_a_published_tool, |srv: TestServer| async move {
    let token = srv.token("admin").await;
    let client = ().serve(transport(&srv, "/mcp/tools/demo/word_stats", &token)).await.expect("initialize");
    let server = client.peer_info().expect("server info");
    let implementation = server.server_info.clone().expect("the server names itself");
    assert_eq!((implementation.name.as_str(), implementation.version.as_str()), ("demo/word_stats", "v1"));
    assert!(server.instructions.as_deref().unwrap_or_default().contains("Counts words"));

    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "word_stats");
    assert_eq!(tools[0].input_schema["required"], json!(["text"]));

    let result =
        client.call_tool(CallToolRequestParams::new("word_stats").with_arguments(arguments(json!({"text": "a b a"})))).await.unwrap();
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        result.structured_content,
        Some(json!({"words": 3, "characters": 5, "top": [{"word": "a", "count": 2}, {"word": "b", "count": 1}]}))
    );

    let bad = client.call_tool(CallToolRequestParams::new("word_stats").with_arguments(arguments(json!({"text": 7})))).await.unwrap();
    assert_eq!(bad.is_error, Some(true), "bad arguments are a tool error the model can read");
    let unknown = client.call_tool(CallToolRequestParams::new("nope")).await;
    assert!(unknown.is_err(), "an unknown tool is a protocol error");
    client.cancel().await.unwrap();
});

server_test!(the_rust_sdk_client_is_refused_without_a_valid_token, |srv: TestServer| async move {
    let refused = ().serve(transport(&srv, "/mcp/tools/demo/echo", "tsk_not-a-token")).await;
    assert!(refused.is_err());
    let token = srv.token("admin").await;
    let missing = ().serve(transport(&srv, "/mcp/tools/demo/no_such_tool", &token)).await;
    assert!(missing.is_err());
});
