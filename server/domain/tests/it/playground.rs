//! The playground's rules on SQLite and PostgreSQL: who may configure chat
//! endpoints, how their keys are sealed and changed, what the audit log keeps,
//! and which turns are refused before any model is asked.

use crate::support::{finance_and_legal as world, text_arg};
use sqlx::Row;
use toolshed_domain::accounts::Registration;
use toolshed_domain::admin::AuditFilter;
use toolshed_domain::playground::{ChatEndpointId, EndpointSpec, ListingRef, Message, PlaygroundError, TurnRequest};
use toolshed_domain::tools::{ListingKind, NewTool, Source};
use toolshed_domain::{Db, Toolshed, User};

async fn admin(ts: &Toolshed) -> User {
    let mut reg = Registration::parse("root", "Root", "it", "a-long-enough-password").unwrap();
    reg.is_admin = true;
    ts.accounts().register(reg, None).await.unwrap()
}

fn spec(name: &str, key: &str, clear: bool) -> EndpointSpec {
    EndpointSpec::parse(name, "http://127.0.0.1:9/v1", "qwen2.5", key, clear, "").unwrap()
}

async fn sealed_key(ts: &Toolshed, id: ChatEndpointId) -> Option<Vec<u8>> {
    sqlx::query("SELECT api_key FROM chat_endpoints WHERE id = $1")
        .bind(id.0)
        .fetch_one(ts.db().pool())
        .await
        .unwrap()
        .try_get("api_key")
        .unwrap()
}

store_test!(an_endpoints_key_is_sealed_to_its_row_kept_replaced_or_cleared, |db: Db| async move {
    let (ts, _, _, _) = world(db).await;
    let root = admin(&ts).await;
    let e = ts.playground().create_chat_endpoint(&root, spec("Local", "sk-plain-secret", false)).await.unwrap();
    assert!(e.has_key);
    let sealed = sealed_key(&ts, e.id).await.expect("a key is stored");
    assert!(!sealed.windows(6).any(|w| w == b"secret"), "never in clear");
    let purpose = format!("chat_endpoint:{}", e.id);
    assert_eq!(ts.secrets().open(&purpose, &sealed).unwrap(), "sk-plain-secret");
    // Bound to the row: the same bytes do not open as another endpoint's key.
    let other = ts.playground().create_chat_endpoint(&root, spec("Other", "", false)).await.unwrap();
    assert!(!other.has_key && sealed_key(&ts, other.id).await.is_none());
    assert!(ts.secrets().open(&format!("chat_endpoint:{}", other.id), &sealed).is_err());

    // A blank key field keeps the key; a new one replaces it; clearing removes it.
    let kept = ts.playground().update_chat_endpoint(&root, e.id, spec("Local LLM", "", false)).await.unwrap();
    assert_eq!((kept.name.as_str(), kept.has_key), ("Local LLM", true));
    assert_eq!(sealed_key(&ts, e.id).await.as_deref(), Some(sealed.as_slice()));
    ts.playground().update_chat_endpoint(&root, e.id, spec("Local LLM", "sk-new", false)).await.unwrap();
    assert_eq!(ts.secrets().open(&purpose, &sealed_key(&ts, e.id).await.unwrap()).unwrap(), "sk-new");
    let cleared = ts.playground().update_chat_endpoint(&root, e.id, spec("Local LLM", "", true)).await.unwrap();
    assert!(!cleared.has_key && sealed_key(&ts, e.id).await.is_none());
});

store_test!(only_admins_configure_endpoints_with_unique_names_and_every_change_is_audited_without_the_key, |db: Db| async move {
    let (ts, alice, _, _) = world(db).await;
    let root = admin(&ts).await;
    assert!(matches!(ts.playground().create_chat_endpoint(&alice, spec("Mine", "k", false)).await, Err(PlaygroundError::Forbidden)));
    let e = ts.playground().create_chat_endpoint(&root, spec("DeepSeek", "sk-audited", false)).await.unwrap();
    assert!(matches!(
        ts.playground().update_chat_endpoint(&alice, e.id, spec("Hijacked", "", false)).await,
        Err(PlaygroundError::Forbidden)
    ));
    assert!(matches!(ts.playground().delete_chat_endpoint(&alice, e.id).await, Err(PlaygroundError::Forbidden)));
    assert!(
        matches!(ts.playground().create_chat_endpoint(&root, spec("DeepSeek", "", false)).await, Err(PlaygroundError::NameTaken(n)) if n == "DeepSeek")
    );
    let second = ts.playground().create_chat_endpoint(&root, spec("Ollama", "", false)).await.unwrap();
    assert!(matches!(
        ts.playground().update_chat_endpoint(&root, second.id, spec("DeepSeek", "", false)).await,
        Err(PlaygroundError::NameTaken(_))
    ));
    // Members see the endpoints, to pick one.
    let names: Vec<String> = ts.playground().chat_endpoints(&alice).await.unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["DeepSeek", "Ollama"]);

    ts.playground().update_chat_endpoint(&root, e.id, spec("DeepSeek", "sk-audited-2", false)).await.unwrap();
    ts.playground().delete_chat_endpoint(&root, e.id).await.unwrap();
    assert!(matches!(ts.playground().delete_chat_endpoint(&root, e.id).await, Err(PlaygroundError::UnknownEndpoint)));
    let log = ts
        .admin()
        .audit_log(
            &root,
            &AuditFilter { action: "chat_endpoint.".into(), target: "chat_endpoint:DeepSeek".into(), page: 1, ..Default::default() },
        )
        .await
        .unwrap();
    let mut actions: Vec<&str> = log.entries.iter().map(|a| a.action.as_str()).collect();
    actions.sort();
    assert_eq!(actions, ["chat_endpoint.created", "chat_endpoint.deleted", "chat_endpoint.updated"]);
    for entry in &log.entries {
        let text = format!("{} {}", entry.before.as_deref().unwrap_or_default(), entry.after.as_deref().unwrap_or_default());
        assert!(!text.contains("sk-audited"), "the key stays out of the audit log: {text}");
        assert!(text.contains(r#""key":"set""#), "{text}");
        assert_eq!(entry.actor.as_deref(), Some("root"));
    }
});

store_test!(a_turn_is_refused_before_the_model_is_asked_for_listings_the_user_cannot_see, |db: Db| async move {
    let (ts, alice, bob, carol) = world(db).await;
    let root = admin(&ts).await;
    let endpoint = ts.playground().create_chat_endpoint(&root, spec("Local", "", false)).await.unwrap();
    let tool = ts.tools().create_tool(&alice, NewTool::parse("ledger", "Ledger", "", "", "department").unwrap()).await.unwrap();
    ts.tools().save_version(&alice, tool.id, Source::parse("return $text;", text_arg(), None).unwrap(), "").await.unwrap();
    ts.tools().publish(&alice, tool.id, 1).await.unwrap();
    let request = |messages: Vec<Message>, endpoint: ChatEndpointId| TurnRequest {
        listing: ListingRef { kind: ListingKind::Tool, department: "finance".into(), name: "ledger".into() },
        endpoint,
        messages,
    };
    let hi = || vec![Message::User { content: "hi".into() }];
    // Bob shares the department; Carol (legal) is told it does not exist.
    assert!(ts.playground().playground_turn(&bob, request(hi(), endpoint.id)).await.is_ok());
    assert!(matches!(ts.playground().playground_turn(&carol, request(hi(), endpoint.id)).await, Err(PlaygroundError::NotFound)));
    assert!(matches!(
        ts.playground().playground_turn(&bob, request(hi(), ChatEndpointId(endpoint.id.0 + 50))).await,
        Err(PlaygroundError::UnknownEndpoint)
    ));
    let ends_with_model =
        vec![Message::User { content: "hi".into() }, Message::Assistant { content: Some("hello".into()), tool_calls: vec![] }];
    assert!(matches!(ts.playground().playground_turn(&bob, request(ends_with_model, endpoint.id)).await, Err(PlaygroundError::Invalid(_))));
    assert!(matches!(ts.playground().playground_turn(&bob, request(vec![], endpoint.id)).await, Err(PlaygroundError::Invalid(_))));
    let long: Vec<Message> = (0..=toolshed_domain::playground::MAX_MESSAGES).map(|_| Message::User { content: "again".into() }).collect();
    assert!(matches!(ts.playground().playground_turn(&bob, request(long, endpoint.id)).await, Err(PlaygroundError::Invalid(_))));
    // A draft-only tool has nothing to chat with.
    let draft = ts.tools().create_tool(&alice, NewTool::parse("draft", "Draft", "", "", "everyone").unwrap()).await.unwrap();
    let draft_ref = TurnRequest {
        listing: ListingRef { kind: ListingKind::Tool, department: "finance".into(), name: draft.name.clone() },
        endpoint: endpoint.id,
        messages: hi(),
    };
    assert!(matches!(ts.playground().playground_turn(&alice, draft_ref).await, Err(PlaygroundError::NotFound)));
});
