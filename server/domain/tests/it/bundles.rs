//! Forks and bundles, on SQLite and on PostgreSQL: what a fork copies and
//! remembers, what a bundle serves to whom, and the mistakes an author can make.

use crate::support::{finance_and_legal as world, text_arg};
use serde_json::json;
use toolshed_domain::bundles::MemberSpec;
use toolshed_domain::market::{BrowseQuery, ListingKind};
use toolshed_domain::names::{DepartmentName, ToolName};
use toolshed_domain::tools::{Check, EnvKind, NewTool, RunSource, Source, Tool, ToolError};
use toolshed_domain::{Db, Toolshed, User};

/// A tool with one version per body in `codes`, each published in turn (so
/// anyone may pin any of them), the last one published now.
async fn tool(ts: &Toolshed, author: &User, name: &str, visibility: &str, codes: &[&str]) -> Tool {
    let t = ts
        .tools()
        .create_tool(author, NewTool::parse(name, &format!("The {name} tool"), "Does a thing.", "demo", visibility).unwrap())
        .await
        .unwrap();
    let mut published = t;
    for code in codes {
        let n = ts.tools().save_version(author, published.id, Source::parse(code, text_arg(), None).unwrap(), "").await.unwrap();
        published = ts.tools().publish(author, published.id, n).await.unwrap();
    }
    published
}

fn member(tool: &Tool, pinned: Option<i64>, name: &str) -> MemberSpec {
    MemberSpec { tool: tool.id, pinned_version: pinned, exposed_name: name.into() }
}

async fn bundle(ts: &Toolshed, author: &User, name: &str, members: &[MemberSpec]) -> Tool {
    let b = ts
        .tools()
        .create_bundle(author, NewTool::parse(name, "A bundle", "Tools that go together.", "kit", "everyone").unwrap())
        .await
        .unwrap();
    ts.bundles().save_bundle_version(author, b.id, members, "first").await.unwrap();
    ts.tools().publish(author, b.id, 1).await.unwrap()
}

fn name(raw: &str) -> ToolName {
    ToolName::parse(raw).unwrap()
}

/// The names a bundle serves to `user`, with the tool and version behind each.
async fn served(ts: &Toolshed, user: &User, b: &Tool) -> Vec<String> {
    let b = ts.tools().tool(user, b.id).await.unwrap();
    ts.bundles()
        .served_tools(user, &b)
        .await
        .unwrap()
        .tools
        .iter()
        .map(|s| format!("{}={}@v{}", s.name, s.tool.slug(), s.version))
        .collect()
}

store_test!(a_fork_copies_the_published_version_and_test_cases_into_the_forkers_department, |db: Db| async move {
    let (ts, alice, _, carol) = world(db).await;
    let src = tool(&ts, &alice, "shout", "everyone", &["return $text;", "return $text.toUpperCase();"]).await;
    ts.tools().save_test_case(&alice, src.id, "hello", json!({"text": "hi"}), Check::Equals { expected: "HI".into() }).await.unwrap();
    ts.tools().set_env_var(&alice, src.id, "API_KEY", "s3cret", EnvKind::Secret).await.unwrap();
    // A newer saved version that is not published is not what a fork copies.
    ts.tools().save_version(&alice, src.id, Source::parse("return 'draft';", text_arg(), None).unwrap(), "wip").await.unwrap();

    let fork = ts.tools().fork(&carol, src.id, name("shout")).await.unwrap();
    assert_eq!(fork.slug(), "legal/shout");
    assert_eq!(fork.title, format!("{} ({})", src.title, carol.department.title), "never the same title as its source");
    assert_eq!(fork.owner_username, "carol");
    assert_eq!(fork.forked_from.map(|f| (f.id, f.version)), Some((src.id, 2)));
    assert_eq!(fork.published_version, None, "a fork starts unpublished");
    let v1 = ts.tools().version(&carol, fork.id, 1).await.unwrap();
    assert_eq!(v1.code, "return $text.toUpperCase();");
    assert_eq!(v1.args, text_arg());
    assert_eq!(v1.changelog, "Forked from finance/shout@v2");
    let cases = ts.tools().test_cases(&carol, fork.id).await.unwrap();
    assert_eq!(cases.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["hello"]);
    assert!(ts.tools().env_vars(&carol, fork.id).await.unwrap().is_empty(), "another team's $env (and secrets) stay behind");

    ts.tools().publish(&carol, fork.id, 1).await.unwrap();
    let out = ts.tools().run_tool(&carol, fork.id, RunSource::Published, json!({"text": "ok"}), "test", None).await.unwrap();
    assert_eq!(out.outcome.result.unwrap(), toolshed_domain::sandbox::ToolValue::Text("OK".into()));
    let forks = ts.market().forks(&alice, src.id).await.unwrap();
    assert_eq!(forks.iter().map(|c| c.slug()).collect::<Vec<_>>(), ["legal/shout"]);
});

store_test!(a_forks_test_cases_keep_their_checks_and_none_comes_from_a_real_call, |db: Db| async move {
    let (ts, alice, bob, carol) = world(db).await;
    let root = User { is_admin: true, ..carol.clone() };
    let code = "if ($text.startsWith('boom')) throw new Error('boom'); return { words: $text.split(' ').length, text: $text };";
    let src = tool(&ts, &alice, "count", "everyone", &[code]).await;
    let checks = [
        ("any success", Check::Succeeds),
        ("two words", Check::parse("json_path", Some("$.words"), Some("2")).unwrap()),
        ("keeps the text", Check::parse("contains", None, Some("a b")).unwrap()),
        ("shape", Check::parse("schema", None, Some(r#"{"type": "object", "required": ["words", "text"]}"#)).unwrap()),
        ("whole", Check::parse("equals", None, Some(r#"{"text": "a b", "words": 2}"#)).unwrap()),
    ];
    for (name, check) in checks {
        ts.tools().save_test_case(&alice, src.id, name, json!({"text": "a b"}), check).await.unwrap();
    }
    // Bob's call fails; Alice keeps it as a test case, with his arguments and the recording.
    let call = ts.tools().run_tool(&bob, src.id, RunSource::Published, json!({"text": "boom: bob's own words"}), "mcp-http", None);
    assert!(call.await.unwrap().outcome.result.is_err());
    ts.usage().flush().await;
    let kept = ts.tools().failed_calls(&alice, src.id).await.unwrap().remove(0);
    ts.tools().save_test_case_from_call(&alice, src.id, kept.id, "bob's call", kept.call.args.clone(), Check::Succeeds).await.unwrap();

    let fork = ts.tools().fork(&carol, src.id, name("count")).await.unwrap();
    let original = ts.tools().test_cases(&alice, src.id).await.unwrap();
    let copied = ts.tools().test_cases(&carol, fork.id).await.unwrap();
    let names: Vec<&str> = copied.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["any success", "keeps the text", "shape", "two words", "whole"], "nothing of Bob's call");
    for case in &copied {
        let from = original.iter().find(|o| o.name == case.name).unwrap();
        assert_eq!((&case.args, &case.check, &case.recording), (&from.args, &from.check, &None), "{}", case.name);
    }
    // They pass exactly as the source's do, so a department requiring tests publishes the fork.
    let results = |user: User, id| {
        let ts = ts.clone();
        async move {
            let results = ts.tools().run_test_cases(&user, id, RunSource::Version(1)).await.unwrap();
            results.into_iter().map(|r| (r.name, r.passed, r.reason)).collect::<Vec<_>>()
        }
    };
    let source_results = results(alice.clone(), src.id).await;
    assert_eq!(results(carol.clone(), fork.id).await, source_results.into_iter().filter(|r| r.0 != "bob's call").collect::<Vec<_>>());
    ts.admin().set_tests_required(&root, &DepartmentName::parse("legal").unwrap(), true).await.unwrap();
    assert_eq!(ts.tools().publish(&carol, fork.id, 1).await.unwrap().published_version, Some(1));
});

store_test!(forking_what_you_cannot_see_or_into_a_taken_name_is_refused, |db: Db| async move {
    let (ts, alice, bob, carol) = world(db).await;
    let internal = tool(&ts, &alice, "internal", "department", &["return 1;"]).await;
    assert!(matches!(ts.tools().fork(&carol, internal.id, name("copy")).await, Err(ToolError::NotFound)));
    // Bob sees it (same department) but the name is taken there.
    assert!(matches!(ts.tools().fork(&bob, internal.id, name("internal")).await, Err(ToolError::NameTaken(_))));
    ts.tools().fork(&bob, internal.id, name("internal-2")).await.unwrap();
    let unpublished = ts.tools().create_tool(&alice, NewTool::parse("wip", "WIP", "", "", "everyone").unwrap()).await.unwrap();
    assert!(matches!(ts.tools().fork(&carol, unpublished.id, name("wip")).await, Err(ToolError::NotPublished)));
});

store_test!(a_fork_learns_when_its_source_publishes_something_newer_and_sees_the_diff, |db: Db| async move {
    let (ts, alice, _, carol) = world(db).await;
    let src = tool(&ts, &alice, "shout", "everyone", &["return $text;"]).await;
    let fork = ts.tools().fork(&carol, src.id, name("shout")).await.unwrap();
    let up = ts.tools().upstream(&carol, &fork).await.unwrap().unwrap();
    assert_eq!((up.source.slug(), up.forked_version, up.newer.is_none()), ("finance/shout".into(), 1, true));

    ts.tools().save_version(&alice, src.id, Source::parse("return $text + '!';", text_arg(), None).unwrap(), "louder").await.unwrap();
    ts.tools().publish(&alice, src.id, 2).await.unwrap();
    let up = ts.tools().upstream(&carol, &fork).await.unwrap().unwrap();
    let diff = up.newer.expect("v2 is newer than the copied v1");
    assert_eq!((diff.from, diff.to), (1, 2));
    assert!(diff.code.contains("-return $text;") && diff.code.contains("+return $text + '!';"), "{}", diff.code);

    // A source that becomes private stops being named to the fork's readers.
    sqlx::query("UPDATE tools SET visibility = 'private' WHERE id = $1").bind(src.id.0).execute(ts.db().pool()).await.unwrap();
    assert!(ts.tools().upstream(&carol, &fork).await.unwrap().is_none());
});

store_test!(a_bundle_serves_pinned_and_following_members_under_their_exposed_names, |db: Db| async move {
    let (ts, alice, _, carol) = world(db).await;
    let shout = tool(&ts, &alice, "shout", "everyone", &["return $text;", "return $text.toUpperCase();"]).await;
    let echo = tool(&ts, &carol, "echo", "everyone", &["return $text;"]).await;
    let b = bundle(&ts, &alice, "kit", &[member(&shout, Some(1), "shout_v1"), member(&shout, None, ""), member(&echo, None, "")]).await;
    assert_eq!(b.kind, ListingKind::Bundle);
    assert_eq!(served(&ts, &carol, &b).await, ["shout_v1=finance/shout@v1", "shout=finance/shout@v2", "echo=legal/echo@v1"]);

    // Following means following: a new publish changes what the bundle serves; a pin does not move.
    ts.tools().save_version(&alice, shout.id, Source::parse("return '3';", text_arg(), None).unwrap(), "").await.unwrap();
    ts.tools().publish(&alice, shout.id, 3).await.unwrap();
    assert_eq!(served(&ts, &carol, &b).await[..2], ["shout_v1=finance/shout@v1", "shout=finance/shout@v3"]);

    // The page lists every member with what it serves.
    let members = ts.bundles().bundle_members(&carol, b.id, 1).await.unwrap();
    assert_eq!(
        members.iter().map(|m| (m.exposed_name.as_str(), m.pinned_version, m.serves)).collect::<Vec<_>>(),
        [("shout_v1", Some(1), Some(1)), ("shout", None, Some(3)), ("echo", None, Some(1)),]
    );
    // A bundle has no code to run or edit as a tool.
    assert!(matches!(ts.tools().run_tool(&alice, b.id, RunSource::Published, json!({}), "test", None).await, Err(ToolError::NotFound)));
    assert!(matches!(ts.tools().draft(&alice, b.id).await, Err(ToolError::NotFound)));
    assert!(matches!(ts.tools().tool_by_slug(&alice, "finance", "kit").await, Err(ToolError::NotFound)));
    assert_eq!(ts.tools().listing_by_slug(&alice, ListingKind::Bundle, "finance", "kit").await.unwrap().id, b.id);
});

store_test!(a_bundle_refuses_duplicate_names_unseen_tools_and_nothing_to_follow, |db: Db| async move {
    let (ts, alice, _, carol) = world(db).await;
    let shout = tool(&ts, &alice, "shout", "everyone", &["return 1;"]).await;
    let legal_shout = tool(&ts, &carol, "shout", "everyone", &["return 2;"]).await;
    let secret = tool(&ts, &carol, "secret", "private", &["return 3;"]).await;
    let b = ts.tools().create_bundle(&alice, NewTool::parse("kit", "Kit", "", "", "everyone").unwrap()).await.unwrap();

    let err =
        ts.bundles().save_bundle_version(&alice, b.id, &[member(&shout, None, ""), member(&legal_shout, None, "")], "").await.unwrap_err();
    let message = err.to_string();
    assert!(message.contains("“shout”") && message.contains("legal__shout"), "{message}");
    assert!(ts
        .bundles()
        .save_bundle_version(&alice, b.id, &[member(&shout, None, ""), member(&legal_shout, None, "legal__shout")], "")
        .await
        .is_ok());

    // A private tool of someone else's reads exactly like one that does not exist.
    let unseen = ts.bundles().save_bundle_version(&alice, b.id, &[member(&secret, None, "")], "").await.unwrap_err().to_string();
    let missing = MemberSpec { tool: toolshed_domain::ids::ToolId(999_999), pinned_version: None, exposed_name: String::new() };
    let nonexistent = ts.bundles().save_bundle_version(&alice, b.id, &[missing], "").await.unwrap_err().to_string();
    assert_eq!(unseen.replace(&secret.id.to_string(), "N"), nonexistent.replace("999999", "N"));
    assert!(!unseen.contains("secret"), "{unseen}");

    assert!(ts
        .bundles()
        .save_bundle_version(&alice, b.id, &[member(&shout, Some(7), "")], "")
        .await
        .unwrap_err()
        .to_string()
        .contains("no version 7"));
    assert!(ts.bundles().save_bundle_version(&alice, b.id, &[], "").await.unwrap_err().to_string().contains("at least one"));
    assert!(ts.bundles().save_bundle_version(&alice, b.id, &[member(&shout, None, "bad name")], "").await.is_err());
    let draft = ts.tools().create_tool(&alice, NewTool::parse("wip", "WIP", "", "", "everyone").unwrap()).await.unwrap();
    ts.tools().save_version(&alice, draft.id, Source::parse("return 0;", vec![], None).unwrap(), "").await.unwrap();
    let err = ts.bundles().save_bundle_version(&alice, b.id, &[member(&draft, None, "")], "").await.unwrap_err().to_string();
    assert!(err.contains("no published version to follow"), "{err}");
    assert!(
        ts.bundles().save_bundle_version(&alice, b.id, &[member(&draft, Some(1), "")], "").await.is_ok(),
        "pinning an unpublished version is fine"
    );
    // Someone outside the department may not change the bundle at all.
    assert!(matches!(ts.bundles().save_bundle_version(&carol, b.id, &[member(&shout, None, "")], "").await, Err(ToolError::Forbidden)));
});

store_test!(members_the_caller_may_not_see_or_that_are_hidden_are_not_served, |db: Db| async move {
    let (ts, alice, bob, carol) = world(db).await;
    let public = tool(&ts, &alice, "public", "everyone", &["return 1;"]).await;
    let internal = tool(&ts, &alice, "internal", "department", &["return 2;"]).await;
    let b = bundle(&ts, &alice, "kit", &[member(&public, None, ""), member(&internal, None, "")]).await;
    assert_eq!(served(&ts, &bob, &b).await, ["public=finance/public@v1", "internal=finance/internal@v1"]);
    assert_eq!(served(&ts, &carol, &b).await, ["public=finance/public@v1"], "legal does not see finance's internal tool");
    let members = ts.bundles().bundle_members(&carol, b.id, 1).await.unwrap();
    assert_eq!(members[1].slug, "(not visible to you)");
    assert!(members[1].unavailable.is_some());

    sqlx::query("UPDATE tools SET status = 'hidden' WHERE id = $1").bind(public.id.0).execute(ts.db().pool()).await.unwrap();
    assert_eq!(served(&ts, &bob, &b).await, ["internal=finance/internal@v1"]);
    // The bundle still names every member as something to watch for changes.
    let watched = ts.bundles().served_tools(&bob, &b).await.unwrap().member_targets;
    assert_eq!(watched, ["tool:finance/public", "tool:finance/internal"]);
});

store_test!(bundles_are_listed_searched_and_forked_like_tools, |db: Db| async move {
    let (ts, alice, _, carol) = world(db).await;
    let shout = tool(&ts, &alice, "shout", "everyone", &["return 1;"]).await;
    let b = bundle(&ts, &alice, "office_kit", &[member(&shout, None, "")]).await;
    let only_bundles = BrowseQuery::parse("", "", "", "bundle", "", "").unwrap();
    let page = ts.market().browse(&carol, &only_bundles).await.unwrap();
    assert_eq!(page.cards.iter().map(|c| (c.kind, c.slug())).collect::<Vec<_>>(), [(ListingKind::Bundle, "finance/office_kit".into())]);
    let found = ts.market().browse(&carol, &BrowseQuery::parse("office", "", "", "", "", "").unwrap()).await.unwrap();
    assert_eq!(found.total, 1);

    let fork = ts.tools().fork(&carol, b.id, name("office_kit")).await.unwrap();
    assert_eq!((fork.kind, fork.slug()), (ListingKind::Bundle, "legal/office_kit".into()));
    let members = ts.bundles().bundle_members(&carol, fork.id, 1).await.unwrap();
    assert_eq!(members.iter().map(|m| m.slug.as_str()).collect::<Vec<_>>(), ["finance/shout"]);
    ts.tools().publish(&carol, fork.id, 1).await.unwrap();
    assert_eq!(ts.market().browse(&carol, &only_bundles).await.unwrap().cards.iter().find(|c| c.id == b.id.0).unwrap().fork_count, 1);
});

store_test!(a_version_never_served_reaches_only_the_tools_editors, |db: Db| async move {
    let (ts, alice, bob, carol) = world(db).await;
    let t = tool(&ts, &alice, "calc", "everyone", &["return 'v1';"]).await;
    ts.tools().save_version(&alice, t.id, Source::parse("return 'v2, unreviewed';", text_arg(), None).unwrap(), "").await.unwrap();
    let run = |u: &User, n: i64| {
        let (ts, u) = (ts.clone(), u.clone());
        async move { ts.tools().run_tool(&u, t.id, RunSource::Version(n), json!({"text": "x"}), "test", None).await }
    };
    assert!(matches!(run(&carol, 2).await, Err(ToolError::NoSuchVersion(2))), "not to another department");
    assert!(run(&carol, 1).await.is_ok(), "the published one is anyone's");
    assert!(run(&bob, 2).await.is_ok(), "an editor tries it out");

    // Nor can another department pin it...
    let theirs = ts.tools().create_bundle(&carol, NewTool::parse("kit", "Kit", "", "", "everyone").unwrap()).await.unwrap();
    let refused = ts.bundles().save_bundle_version(&carol, theirs.id, &[member(&t, Some(2), "")], "").await.unwrap_err();
    assert!(refused.to_string().contains("has no version 2"), "{refused}");
    // ...and a bundle of its own department that pins it serves it to editors only.
    let ours = bundle(&ts, &alice, "ours", &[member(&t, Some(2), "calc")]).await;
    assert_eq!(served(&ts, &bob, &ours).await, ["calc=finance/calc@v2"]);
    assert!(served(&ts, &carol, &ours).await.is_empty());

    // Published once (even if rolled back since), it is everyone's.
    ts.tools().publish(&alice, t.id, 2).await.unwrap();
    ts.tools().publish(&alice, t.id, 1).await.unwrap();
    assert!(run(&carol, 2).await.is_ok());
    assert_eq!(served(&ts, &carol, &ours).await, ["calc=finance/calc@v2"]);
});

store_test!(a_disabled_listing_refuses_runs_by_version_number_too, |db: Db| async move {
    let (ts, alice, _, carol) = world(db).await;
    let t = tool(&ts, &alice, "calc", "everyone", &["return 'v1';"]).await;
    ts.tools().save_test_case(&alice, t.id, "one", json!({"text": "x"}), Check::Succeeds).await.unwrap();
    let root = User { is_admin: true, ..alice.clone() };
    let note = toolshed_domain::names::ModerationNote::parse("Leaks data.").unwrap();
    ts.moderation().moderate(&root, t.id, toolshed_domain::moderation::Action::Disable, &note).await.unwrap();
    for user in [&alice, &carol] {
        let run = ts.tools().run_tool(user, t.id, RunSource::Version(1), json!({"text": "x"}), "test", None).await;
        assert!(matches!(run, Err(ToolError::Disabled)), "{run:?}");
    }
    let cases = ts.tools().run_test_cases(&alice, t.id, RunSource::Version(1)).await.unwrap();
    assert!(!cases[0].passed && cases[0].actual.contains("disabled"), "{cases:?}");
});

store_test!(a_bundles_diff_does_not_name_members_the_reader_may_not_see, |db: Db| async move {
    let (ts, alice, _, carol) = world(db).await;
    let public = tool(&ts, &alice, "public_one", "everyone", &["return $text;"]).await;
    let secret = tool(&ts, &alice, "secret_project", "private", &["return $text;"]).await;
    let b = bundle(&ts, &alice, "kit", &[member(&public, None, "")]).await;
    ts.bundles().save_bundle_version(&alice, b.id, &[member(&public, None, ""), member(&secret, None, "")], "add").await.unwrap();
    let mine = ts.tools().diff_versions(&alice, b.id, 1, 2).await.unwrap();
    assert!(mine.code.contains("secret_project"), "{}", mine.code);
    let theirs = ts.tools().diff_versions(&carol, b.id, 1, 2).await.unwrap();
    assert!(!theirs.code.contains("secret_project") && theirs.code.contains("+(a tool you cannot see)"), "{}", theirs.code);
});
