//! Code mode, on SQLite and on PostgreSQL: the bundle setting (who may set it,
//! what the endpoint then lists, the audit row sessions hear), and `run_code`:
//! member calls through `tools.x` validated, limited and recorded like direct
//! calls, their errors thrown into the model's code, and the run's own limits.

use crate::support;

use crate::support::{finance_and_legal as world, text_arg};
use sqlx::Row;
use toolshed_domain::bundles::MemberSpec;
use toolshed_domain::code_mode::transcript;
use toolshed_domain::names::CodeMode;
use toolshed_domain::names::{Description, Tags, Title};
use toolshed_domain::sandbox::{RunError, RunOutcome, SandboxConfig};
use toolshed_domain::tools::{NewTool, Source, Tool, ToolError, ToolSettings, Via, Visibility};
use toolshed_domain::{Db, Settings, Toolshed, User};

async fn tool(ts: &Toolshed, author: &User, name: &str, visibility: &str, code: &str) -> Tool {
    let t = ts
        .tools()
        .create_tool(author, NewTool::parse(name, &format!("The {name} tool"), "Does a thing.", "demo", visibility).unwrap())
        .await
        .unwrap();
    ts.tools().save_version(author, t.id, Source::parse(code, text_arg(), None).unwrap(), "").await.unwrap();
    ts.tools().publish(author, t.id, 1).await.unwrap()
}

/// Alice's `finance/kit`: upper (text), count (JSON), fail (throws), slow
/// (loops, 200 ms limit) and mine (private to Alice), in code mode `instead`.
async fn kit(ts: &Toolshed, alice: &User) -> Tool {
    let upper = tool(ts, alice, "upper", "everyone", "return $text.toUpperCase();").await;
    let count = tool(ts, alice, "count", "everyone", "return { length: $text.length };").await;
    let fail = tool(ts, alice, "fail", "everyone", "throw new Error('boom: ' + $text);").await;
    let slow = tool(ts, alice, "slow", "everyone", "while (true) {}").await;
    let limits = ToolSettings {
        title: Title::parse("Slow").unwrap(),
        description: Description::parse("").unwrap(),
        tags: Tags::parse("").unwrap(),
        visibility: Visibility::Everyone,
        read_only_hint: true,
        destructive_hint: false,
        fetch_allow: Vec::new(),
        timeout_ms: 200,
        memory_mib: 32,
        task_support: Default::default(),
        serves: Default::default(),
    };
    ts.tools().update_tool_settings(alice, slow.id, limits).await.unwrap();
    let mine = tool(ts, alice, "mine", "private", "return 'private ' + $text;").await;
    let b =
        ts.tools().create_bundle(alice, NewTool::parse("kit", "Kit", "Tools that go together.", "kit", "everyone").unwrap()).await.unwrap();
    let members: Vec<MemberSpec> = [&upper, &count, &fail, &slow, &mine]
        .iter()
        .map(|t| MemberSpec { tool: t.id, pinned_version: None, exposed_name: String::new() })
        .collect();
    ts.bundles().save_bundle_version(alice, b.id, &members, "first").await.unwrap();
    ts.tools().publish(alice, b.id, 1).await.unwrap();
    ts.code_mode().set_code_mode(alice, b.id, CodeMode::Instead).await.unwrap()
}

const VIA: Via<'static> = Via { transport: "test", token_id: None, bundle_id: None };

async fn run(ts: &Toolshed, user: &User, bundle: &Tool, code: &str) -> RunOutcome {
    ts.code_mode().run_code(user, bundle, code.into(), VIA).await.unwrap()
}

/// The usage rows of member calls: (tool name, bundle id, transport, outcome), oldest first.
async fn usage(ts: &Toolshed, db: &Db) -> Vec<(String, Option<i64>, String, String)> {
    ts.usage().flush().await;
    let rows = sqlx::query(
        "SELECT t.name, u.bundle_id, u.transport, u.outcome FROM usage_records u JOIN tools t ON t.id = u.tool_id ORDER BY u.id",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    rows.iter().map(|r| (r.get("name"), r.get("bundle_id"), r.get("transport"), r.get("outcome"))).collect()
}

store_test!(code_mode_is_set_by_editors_audited_and_changes_what_the_endpoint_lists, |db: Db| async move {
    let (ts, alice, bob, carol) = world(db.clone()).await;
    let b = kit(&ts, &alice).await;
    assert_eq!(b.code_mode, CodeMode::Instead);
    let names = |defs: Vec<toolshed_domain::codegen::ToolDef>| defs.into_iter().map(|d| d.name).collect::<Vec<_>>();
    let listed = ts.code_mode().mcp_tool_defs(&carol, &b).await.unwrap();
    assert_eq!(names(listed.clone()), ["run_code"]);
    assert!(listed[0].description.contains("upper(input: UpperInput): Promise<UpperOutput>;"), "{}", listed[0].description);
    assert!(!listed[0].description.contains("mine("), "Carol's run_code does not describe a member she may not see");

    let b = ts.code_mode().set_code_mode(&bob, b.id, CodeMode::Beside).await.unwrap();
    assert_eq!(names(ts.code_mode().mcp_tool_defs(&alice, &b).await.unwrap()), ["upper", "count", "fail", "slow", "mine", "run_code"]);
    let b = ts.code_mode().set_code_mode(&alice, b.id, CodeMode::Off).await.unwrap();
    assert_eq!(names(ts.code_mode().mcp_tool_defs(&alice, &b).await.unwrap()), ["upper", "count", "fail", "slow", "mine"]);
    assert!(matches!(ts.code_mode().run_code(&alice, &b, "return 1".into(), VIA).await, Err(ToolError::NotFound)), "no run_code while off");

    assert!(
        matches!(ts.code_mode().set_code_mode(&carol, b.id, CodeMode::Instead).await, Err(ToolError::Forbidden)),
        "Carol may not edit finance's bundle"
    );
    let upper = ts.tools().tool_by_slug(&alice, "finance", "upper").await.unwrap();
    assert!(
        matches!(ts.code_mode().set_code_mode(&alice, upper.id, CodeMode::Instead).await, Err(ToolError::NotFound)),
        "a tool has no code mode"
    );
    assert!(CodeMode::parse("sometimes").is_err());
    let named_run_code = [MemberSpec { tool: upper.id, pinned_version: None, exposed_name: "run_code".into() }];
    let refused = ts.bundles().save_bundle_version(&alice, b.id, &named_run_code, "clash").await.unwrap_err().to_string();
    assert!(refused.contains("“run_code” is the name of code mode's tool"), "{refused}");

    let rows = sqlx::query("SELECT actor_id, after_json FROM audit_log WHERE action = 'bundle.code_mode_changed' AND target = 'bundle:finance/kit' ORDER BY id")
        .fetch_all(db.pool())
        .await
        .unwrap();
    let afters: Vec<String> = rows.iter().map(|r| r.get::<String, _>("after_json")).collect();
    let actors: Vec<i64> = rows.iter().map(|r| r.get::<i64, _>("actor_id")).collect();
    assert_eq!(actors, [alice.id.0, bob.id.0, alice.id.0]);
    assert!(afters[0].contains("instead") && afters[1].contains("beside") && afters[2].contains("off"), "{afters:?}");
});

store_test!(run_code_calls_members_validated_and_recorded_with_the_bundle, |db: Db| async move {
    let (ts, alice, _bob, carol) = world(db.clone()).await;
    let b = kit(&ts, &alice).await;
    let outcome = run(
        &ts,
        &carol,
        &b,
        "const a = await tools.upper({ text: 'hi' });\nconst c = await tools.count({ text: 'four' });\nconsole.log(a, c.length);\nreturn { a, n: c.length };",
    )
    .await;
    assert_eq!(transcript(&outcome).unwrap(), "HI 4\n{\"a\":\"HI\",\"n\":4}");

    let outcome = run(&ts, &carol, &b, "try { await tools.upper({ txt: 'x' }); } catch (e) { console.log(e.message); }").await;
    let text = transcript(&outcome).unwrap();
    assert!(text.starts_with("upper: Invalid arguments:") && text.contains("text"), "{text}");

    let usage = usage(&ts, &db).await;
    let bundle_id = Some(b.id.0);
    assert_eq!(
        usage,
        [
            ("upper".into(), bundle_id, "test+run_code".into(), "ok".into()),
            ("count".into(), bundle_id, "test+run_code".into(), "ok".into()),
            ("upper".into(), bundle_id, "test+run_code".into(), "invalid_arguments".into()),
        ]
    );
});

store_test!(member_failures_are_thrown_into_the_code_as_errors, |db: Db| async move {
    let (ts, alice, _bob, _carol) = world(db.clone()).await;
    let b = kit(&ts, &alice).await;
    let code = "for (const name of ['fail', 'slow']) {\n  try { await tools[name]({ text: 'x' }); } catch (e) { console.log(e instanceof Error, e.message); }\n}\nreturn 'still running';";
    let outcome = run(&ts, &alice, &b, code).await;
    assert_eq!(transcript(&outcome).unwrap(), "true fail: Error: boom: x (line 1)\ntrue slow: Timed out after 200 ms\nstill running");

    // Uncaught, the member's error ends the run at the model's line.
    let outcome = run(&ts, &alice, &b, "console.log('before');\n\nawait tools.fail({ text: 'y' });").await;
    match &outcome.result {
        Err(RunError::Thrown { message, line, .. }) => {
            assert_eq!(message, "fail: Error: boom: y (line 1)");
            assert_eq!(*line, Some(3));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(transcript(&outcome).unwrap_err(), "before\nError: fail: Error: boom: y (line 1) (line 3)");
    let outcomes: Vec<String> = usage(&ts, &db).await.into_iter().map(|u| format!("{}={}", u.0, u.3)).collect();
    assert_eq!(outcomes, ["fail=tool_error", "slow=timeout", "fail=tool_error"]);

    // Kept for the members' editors to replay, like failed direct calls.
    let kept = sqlx::query("SELECT t.name, f.args_json FROM failed_calls f JOIN tools t ON t.id = f.tool_id ORDER BY f.id")
        .fetch_all(db.pool())
        .await
        .unwrap();
    let kept: Vec<(String, String)> = kept.iter().map(|r| (r.get("name"), r.get("args_json"))).collect();
    let expected = [("fail", r#"{"text":"x"}"#), ("slow", r#"{"text":"x"}"#), ("fail", r#"{"text":"y"}"#)];
    assert_eq!(kept, expected.map(|(n, a)| (n.to_owned(), a.to_owned())));
});

store_test!(calling_a_tool_outside_the_bundle_or_unseen_throws_the_list_of_names, |db: Db| async move {
    let (ts, alice, _bob, carol) = world(db.clone()).await;
    let b = kit(&ts, &alice).await;
    let outcome =
        run(&ts, &carol, &b, "try { await tools.nope({}); } catch (e) { console.log(e.message); }\nawait tools.mine({ text: 'x' });").await;
    let text = transcript(&outcome).unwrap_err();
    assert!(text.starts_with("there is no tool “nope” here; the tools are: upper, count, fail, slow\n"), "{text}");
    assert!(text.ends_with("there is no tool “mine” here; the tools are: upper, count, fail, slow (line 2)"), "{text}");
    // Alice sees her private tool, so hers works.
    assert_eq!(transcript(&run(&ts, &alice, &b, "return await tools.mine({ text: 'x' });").await).unwrap(), "private x");
    assert_eq!(usage(&ts, &db).await.len(), 1, "unknown names run nothing and record nothing");
});

store_test!(run_code_stops_infinite_loops_endless_tool_calls_and_memory_bombs, |db: Db| async move {
    let (ts, alice, _bob, _carol) = world(db.clone()).await;
    let b = kit(&ts, &alice).await;
    let outcome = run(&ts, &alice, &b, "while (true) {}").await;
    assert!(matches!(outcome.result, Err(RunError::Timeout { limit_ms: 2000 })), "{:?}", outcome.result);

    let outcome = run(&ts, &alice, &b, "let n = 0;\nwhile (true) { await tools.upper({ text: String(n++) }); }").await;
    let error = outcome.result.unwrap_err().to_string();
    assert_eq!(error, "Error: too many tool calls (limit 50 per run) (line 2)");
    assert_eq!(usage(&ts, &db).await.len(), 50);

    let outcome = run(&ts, &alice, &b, "const a = [];\nwhile (true) a.push('x'.repeat(1 << 20) + a.length);").await;
    assert!(matches!(outcome.result, Err(RunError::OutOfMemory { .. })), "{:?}", outcome.result);

    // A member that would run past the caller's deadline is cut at it.
    let outcome = run(
        &ts,
        &alice,
        &b,
        "const t = Date.now();\nwhile (Date.now() - t < 1900) {}\nawait tools.slow({ text: 'x' }).catch(() => {});\nwhile (true) {}",
    )
    .await;
    assert!(matches!(outcome.result, Err(RunError::Timeout { .. })), "{:?}", outcome.result);
    assert!(outcome.duration.as_millis() < 2400, "{:?}", outcome.duration);
});

store_test!(run_code_has_no_fetch_and_no_env, |db: Db| async move {
    let (ts, alice, _bob, _carol) = world(db.clone()).await;
    let b = kit(&ts, &alice).await;
    let outcome = run(&ts, &alice, &b, "console.log(typeof $fetch, typeof $env, typeof tools.upper);").await;
    assert_eq!(transcript(&outcome).unwrap(), "undefined undefined function");
    let outcome = run(&ts, &alice, &b, "await $fetch('https://example.com/');").await;
    assert!(outcome.result.unwrap_err().to_string().contains("$fetch is not defined"));
});

store_test!(concurrent_run_code_calls_beyond_the_pool_size_all_finish, |db: Db| async move {
    let settings = Settings { sandbox: SandboxConfig { workers: 2, ..SandboxConfig::default() }, ..Settings::default() };
    let ts = Toolshed::new(db, settings);
    let alice = support::user(&ts, "alice", "finance").await;
    let b = kit(&ts, &alice).await;
    let mut runs = tokio::task::JoinSet::new();
    for i in 0..8 {
        let (ts, alice, b) = (ts.clone(), alice.clone(), b.clone());
        let code = format!(
            "const a = await tools.upper({{ text: 'run{i}' }});\nconst c = await tools.count({{ text: a }});\nreturn a + ' ' + c.length;"
        );
        runs.spawn(async move { (i, transcript(&ts.code_mode().run_code(&alice, &b, code, VIA).await.unwrap())) });
    }
    let mut done = 0;
    while let Some(joined) = runs.join_next().await {
        let (i, text) = joined.unwrap();
        assert_eq!(text.unwrap(), format!("RUN{i} 4"));
        done += 1;
    }
    assert_eq!(done, 8);
});
