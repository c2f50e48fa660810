//! The marketplace: search, filters, sorts, pages and visibility, featured
//! listings and usage figures, on SQLite and on PostgreSQL (same answers).

use toolshed_domain::accounts::Registration;
use toolshed_domain::ids::ToolId;
use toolshed_domain::market::{BrowsePage, BrowseQuery, ListingCard, ListingKind};
use toolshed_domain::names::{Description, Tags, Title};
use toolshed_domain::tools::{NewTool, Source, Tool, ToolError, ToolSettings, Visibility};
use toolshed_domain::usage::{Outcome, UsageRecord};
use toolshed_domain::{now_ms, Db, Settings, Toolshed, User};

use crate::support::listing;

const DAY_MS: i64 = 86_400_000;

async fn user(ts: &Toolshed, name: &str, department: &str, is_admin: bool) -> User {
    let mut reg = Registration::parse(name, &format!("{name} Example"), department, "a-long-enough-password").unwrap();
    reg.is_admin = is_admin;
    reg.role = toolshed_domain::names::Role::Author;
    ts.accounts().register(reg, None).await.unwrap()
}

/// Sets a column the UI has no button for yet (moderation, forks, times).
async fn set(ts: &Toolshed, id: ToolId, column: &str, value: impl ToString) {
    let sql = format!("UPDATE tools SET {column} = $1 WHERE id = $2");
    match value.to_string().parse::<i64>() {
        Ok(n) => sqlx::query(&sql).bind(n).bind(id.0).execute(ts.db().pool()).await.unwrap(),
        Err(_) => sqlx::query(&sql).bind(value.to_string()).bind(id.0).execute(ts.db().pool()).await.unwrap(),
    };
}

/// `n` calls of `tool`, `days_ago` days ago, lasting `ms` each, `errors` of them failed.
async fn calls(ts: &Toolshed, tool: &Tool, user: &User, days_ago: i64, n: i64, errors: i64, ms: i64) {
    for i in 0..n {
        sqlx::query(
            "INSERT INTO usage_records (at_ms, tool_id, version, user_id, transport, duration_us, outcome) VALUES ($1, $2, 1, $3, 'test', $4, $5)",
        )
        .bind(now_ms() - days_ago * DAY_MS)
        .bind(tool.id.0)
        .bind(user.id.0)
        .bind(ms * 1000)
        .bind(if i < errors { "tool_error" } else { "ok" })
        .execute(ts.db().pool())
        .await
        .unwrap();
    }
}

fn search(text: &str) -> BrowseQuery {
    BrowseQuery::parse(text, "", "", "", "", "").unwrap()
}

async fn names(ts: &Toolshed, user: &User, query: &BrowseQuery) -> Vec<String> {
    ts.market().browse(user, query).await.unwrap().cards.into_iter().map(|c| c.name).collect()
}

/// Alice and Bob in finance, Carol in legal, Root an admin; four public tools.
async fn market(db: Db) -> (Toolshed, [User; 4], Vec<Tool>) {
    let ts = Toolshed::new(db, Settings::default());
    let alice = user(&ts, "alice", "finance", false).await;
    let bob = user(&ts, "bob", "finance", false).await;
    let carol = user(&ts, "carol", "legal", false).await;
    let root = user(&ts, "root", "it", true).await;
    let tools = vec![
        listing(&ts, &alice, "fx_rate", "Currency converter | Converts amounts with the *daily* ECB rate. | finance fx | everyone").await,
        listing(&ts, &alice, "ledger", "Ledger lookup | Finds postings; mentions the exchange rate once. | finance accounting | everyone")
            .await,
        listing(&ts, &carol, "contract_search", "Contract search | Full-text search over signed contracts. | legal search | everyone")
            .await,
        listing(&ts, &carol, "nda", "NDA generator | Drafts a mutual non-disclosure agreement. | legal templates | everyone").await,
    ];
    (ts, [alice, bob, carol, root], tools)
}

store_test!(search_finds_listings_by_any_of_their_words_in_name_title_description_and_tags_best_first, |db: Db| async move {
    let (ts, [alice, ..], _) = market(db).await;
    assert_eq!(names(&ts, &alice, &search("converter")).await, ["fx_rate"], "title");
    assert_eq!(names(&ts, &alice, &search("fx")).await, ["fx_rate"], "name part and tag");
    assert_eq!(names(&ts, &alice, &search("DAILY ecb")).await, ["fx_rate"], "description words, any case");
    assert_eq!(names(&ts, &alice, &search("accounting")).await, ["ledger"], "tag");
    assert_eq!(names(&ts, &alice, &search("contr")).await, ["contract_search"], "words match as prefixes");
    assert_eq!(names(&ts, &alice, &search("non-disclosure")).await, ["nda"], "punctuation separates words");
    assert_eq!(names(&ts, &alice, &search("daily policies")).await, ["fx_rate"], "a word is found by what its stem keeps");
    let either = ts.market().browse(&alice, &search("converter nda")).await.unwrap();
    assert_eq!(either.total, 2, "any word may match");
    let best = names(&ts, &alice, &search("agreement converter daily ecb")).await;
    assert_eq!(best, ["fx_rate", "nda"], "best first: more of the words ranks higher");
    let page = ts.market().browse(&alice, &search("")).await.unwrap();
    assert_eq!(page.total, 4, "no words: everything");
});

store_test!(chinese_text_is_found_by_the_words_it_shares_with_the_search_without_spaces, |db: Db| async move {
    let (ts, [alice, ..], _) = market(db.clone()).await;
    let claims = listing(&ts, &alice, "claims", "差旅报销规定 | 出租车和住宿费用的报销上限。 | finance | everyone").await;
    assert_eq!(names(&ts, &alice, &search("出租车能报销吗")).await, ["claims"], "出租 and 报销 are in its text");
    assert_eq!(names(&ts, &alice, &search("住宿")).await, ["claims"], "a word in the middle of a run");
    assert!(names(&ts, &alice, &search("年假余额")).await.is_empty(), "no pair in common");
    let settings = ToolSettings {
        title: Title::parse("会议室预订").unwrap(),
        description: Description::parse("预订会议室。").unwrap(),
        tags: Tags::parse("").unwrap(),
        visibility: Visibility::Everyone,
        read_only_hint: true,
        destructive_hint: false,
        fetch_allow: Vec::new(),
        timeout_ms: 1_000,
        memory_mib: 32,
        task_support: Default::default(),
        serves: Default::default(),
    };
    ts.tools().update_tool_settings(&alice, claims.id, settings).await.unwrap();
    assert!(names(&ts, &alice, &search("报销")).await.is_empty(), "its old words are gone");
    assert_eq!(names(&ts, &alice, &search("预订会议室")).await, ["claims"]);
    // Listings from before the pairs were kept get theirs when the server starts.
    sqlx::query("UPDATE tools SET cjk_pairs = NULL").execute(db.pool()).await.unwrap();
    assert!(names(&ts, &alice, &search("议室")).await.is_empty());
    db.migrate().await.unwrap();
    assert_eq!(names(&ts, &alice, &search("议室")).await, ["claims"]);
});

store_test!(matches_in_name_or_title_rank_above_matches_in_the_description, |db: Db| async move {
    let (ts, [alice, ..], _) = market(db).await;
    assert_eq!(names(&ts, &alice, &search("rate")).await, ["fx_rate", "ledger"]);
    assert_eq!(names(&ts, &alice, &search("search")).await, ["contract_search"]);
    let by_relevance = BrowseQuery::parse("finance", "", "", "", "relevance", "").unwrap();
    assert_eq!(ts.market().browse(&alice, &by_relevance).await.unwrap().total, 2);
});

store_test!(filters_narrow_by_department_tag_and_kind, |db: Db| async move {
    let (ts, [alice, ..], _) = market(db).await;
    let q = |d: &str, tag: &str, kind: &str| BrowseQuery::parse("", d, tag, kind, "newest", "").unwrap();
    assert_eq!(names(&ts, &alice, &q("legal", "", "")).await, ["nda", "contract_search"]);
    assert_eq!(names(&ts, &alice, &q("", "finance", "")).await, ["ledger", "fx_rate"]);
    assert_eq!(names(&ts, &alice, &q("finance", "fx", "tool")).await, ["fx_rate"]);
    assert!(names(&ts, &alice, &q("", "fin", "")).await.is_empty(), "tags match whole");
    assert!(names(&ts, &alice, &q("nowhere", "", "")).await.is_empty());
    let bundles = ts.market().browse(&alice, &q("", "", "bundle")).await.unwrap();
    assert_eq!((bundles.total, bundles.cards.len()), (0, 0), "no bundles exist yet");
    assert_eq!(BrowseQuery::parse("", "", "", "widget", "", "").unwrap_err().to_string(), "Kind: must be tool or bundle");
    assert!(BrowseQuery::parse("", "", "", "", "cheapest", "").is_err());
    assert!(BrowseQuery::parse("", "Not A Slug!", "", "", "", "").is_err());
});

store_test!(sorts_by_calls_in_the_last_30_days_newest_and_recently_updated, |db: Db| async move {
    let (ts, [alice, ..], tools) = market(db).await;
    let [fx, ledger, contract, nda] = [&tools[0], &tools[1], &tools[2], &tools[3]];
    calls(&ts, ledger, &alice, 1, 3, 0, 5).await;
    calls(&ts, nda, &alice, 29, 2, 0, 5).await;
    calls(&ts, fx, &alice, 31, 9, 0, 5).await; // too old to count
    for (i, t) in [nda, contract, ledger, fx].iter().enumerate() {
        set(&ts, t.id, "created_at", 1_000 + i as i64).await;
    }
    for (i, t) in [contract, fx, nda, ledger].iter().enumerate() {
        set(&ts, t.id, "updated_at", 5_000 + i as i64).await;
    }
    let sorted = |s: &str| BrowseQuery::parse("", "", "", "", s, "").unwrap();
    assert_eq!(names(&ts, &alice, &sorted("most_used")).await[..2], ["ledger", "nda"]);
    assert_eq!(names(&ts, &alice, &sorted("")).await[..2], ["ledger", "nda"], "no words: most used first");
    assert_eq!(names(&ts, &alice, &sorted("newest")).await, ["fx_rate", "ledger", "contract_search", "nda"]);
    assert_eq!(names(&ts, &alice, &sorted("updated")).await, ["ledger", "nda", "fx_rate", "contract_search"]);
    let cards = ts.market().browse(&alice, &sorted("most_used")).await.unwrap().cards;
    assert_eq!(cards.iter().map(|c| c.calls_30d).collect::<Vec<_>>(), [3, 2, 0, 0]);
});

store_test!(pages_split_the_results_and_the_total_counts_every_page, |db: Db| async move {
    let (ts, [alice, ..], _) = market(db).await;
    let page = |n: &str| BrowseQuery { per_page: 3, ..BrowseQuery::parse("", "", "", "", "newest", n).unwrap() };
    let first: BrowsePage = ts.market().browse(&alice, &page("1")).await.unwrap();
    let second = ts.market().browse(&alice, &page("2")).await.unwrap();
    assert_eq!((first.total, first.cards.len(), first.page_count()), (4, 3, 2));
    assert_eq!((second.total, second.cards.len()), (4, 1));
    assert!(ts.market().browse(&alice, &page("3")).await.unwrap().cards.is_empty());
    for bad in ["0", "-1", "two", "10001"] {
        let e = BrowseQuery::parse("", "", "", "", "", bad).unwrap_err();
        assert_eq!(e.to_string(), "Page: must be a whole number from 1 to 10000");
    }
});

store_test!(department_and_private_listings_are_neither_shown_nor_counted_for_outsiders, |db: Db| async move {
    let (ts, [alice, bob, carol, root], tools) = market(db).await;
    let team = listing(&ts, &alice, "team_budget", "Team budget | Budget rate tables. | finance | department").await;
    let own = listing(&ts, &alice, "my_rates", "My rates | Private rate notes. | finance | private").await;
    set(&ts, team.id, "forked_from_tool_id", tools[0].id.0).await;
    set(&ts, own.id, "forked_from_tool_id", tools[0].id.0).await;
    let everything = search("");
    let rates = search("rate");
    assert_eq!(ts.market().browse(&carol, &everything).await.unwrap().total, 4, "carol (legal) sees the public four");
    assert_eq!(names(&ts, &carol, &rates).await, ["fx_rate", "ledger"]);
    assert_eq!(ts.market().browse(&bob, &everything).await.unwrap().total, 5, "bob (finance) also sees the department's");
    assert!(!names(&ts, &bob, &rates).await.contains(&"my_rates".to_owned()));
    assert_eq!(ts.market().browse(&alice, &everything).await.unwrap().total, 6, "alice sees her private one");
    assert_eq!(ts.market().browse(&root, &everything).await.unwrap().total, 6, "admins see all");
    let forks = |page: BrowsePage| page.cards.iter().find(|c| c.name == "fx_rate").unwrap().fork_count;
    assert_eq!(forks(ts.market().browse(&carol, &rates).await.unwrap()), 0, "forks carol may not see are not counted");
    assert_eq!(forks(ts.market().browse(&bob, &rates).await.unwrap()), 1);
    assert_eq!(forks(ts.market().browse(&alice, &rates).await.unwrap()), 2);
    let in_finance = BrowseQuery::parse("", "finance", "", "", "", "").unwrap();
    assert_eq!(ts.market().browse(&carol, &in_finance).await.unwrap().total, 2);
});

store_test!(hidden_disabled_and_unpublished_tools_are_never_listed, |db: Db| async move {
    let (ts, [alice, _, carol, root], tools) = market(db).await;
    set(&ts, tools[0].id, "status", "hidden").await;
    set(&ts, tools[1].id, "status", "disabled").await;
    ts.tools().create_tool(&alice, NewTool::parse("unpublished", "Unpublished rate", "", "", "everyone").unwrap()).await.unwrap();
    for who in [&alice, &carol, &root] {
        assert_eq!(names(&ts, who, &search("rate")).await, Vec::<String>::new());
        assert_eq!(ts.market().browse(who, &search("")).await.unwrap().total, 2);
    }
});

store_test!(sql_and_search_syntax_in_queries_and_descriptions_is_just_text, |db: Db| async move {
    let (ts, [alice, _, carol, root], _) = market(db).await;
    let nasty = "Robert'); DROP TABLE tools;-- <script>alert(1)</script> \"quoted\" NEAR(a b) OR *";
    let tool = ts.tools().create_tool(&alice, NewTool::parse("nasty", "Nasty", nasty, "", "everyone").unwrap()).await.unwrap();
    ts.tools().save_version(&alice, tool.id, Source::parse("return 1;", vec![], None).unwrap(), "").await.unwrap();
    // A tag models would read and pages drop holds the publish until an admin lets it through.
    assert!(matches!(ts.tools().publish(&alice, tool.id, 1).await, Err(ToolError::HiddenInstructions(_))));
    ts.moderation()
        .accept_findings(&root, tool.id, &toolshed_domain::names::ModerationNote::parse("A test of escaping.").unwrap())
        .await
        .unwrap();
    ts.tools().publish(&alice, tool.id, 1).await.unwrap();
    for q in [nasty, "'", "\"", "\"unbalanced", "*", "OR", "a OR", "-x", "NEAR(", "col:val", "a AND NOT b", "%", "_", "\\", "$1", "')--"] {
        let page = ts.market().browse(&carol, &search(q)).await;
        assert!(page.is_ok(), "{q:?}: {page:?}");
    }
    assert_eq!(names(&ts, &carol, &search("drop table")).await, ["nasty"]);
    assert_eq!(names(&ts, &carol, &search("script alert")).await, ["nasty"]);
    assert_eq!(names(&ts, &carol, &search("\"NEAR\" OR")).await, ["nasty"], "operators are words");
    let card = ts.market().browse(&carol, &search("robert")).await.unwrap().cards.remove(0);
    assert!(card.summary.contains("DROP TABLE tools"), "{}", card.summary);
    assert!(!card.summary.contains("<script>"), "Markdown's HTML is left out of the summary: {}", card.summary);
    assert_eq!(ts.market().browse(&carol, &search("")).await.unwrap().total, 5, "tools is still there");
});

store_test!(an_overlong_search_is_a_clear_error, |db: Db| async move {
    let (ts, [alice, ..], _) = market(db).await;
    let e = BrowseQuery::parse(&"a".repeat(10_000), "", "", "", "", "").unwrap_err();
    assert_eq!(e.to_string(), "Search: must be at most 1000 characters");
    assert!(BrowseQuery::parse(&"a".repeat(1000), "", "", "", "", "").is_ok());
    assert!(ts.market().browse(&alice, &search(&"a".repeat(1000))).await.unwrap().cards.is_empty());
});

store_test!(admins_feature_listings_with_an_audit_row_and_the_home_page_shows_visible_ones, |db: Db| async move {
    let (ts, [alice, _, carol, root], tools) = market(db).await;
    let team = listing(&ts, &alice, "team_only", "Team only | | | department").await;
    assert!(matches!(ts.market().set_featured(&alice, tools[0].id, true).await, Err(ToolError::Forbidden)));
    assert!(matches!(ts.market().set_featured(&root, ToolId(9_999), true).await, Err(ToolError::NotFound)));
    for t in [&tools[0], &tools[3], &team] {
        ts.market().set_featured(&root, t.id, true).await.unwrap();
    }
    calls(&ts, &tools[3], &alice, 0, 2, 0, 1).await;
    let names = |cards: Vec<ListingCard>| cards.into_iter().map(|c| c.name).collect::<Vec<_>>();
    assert_eq!(names(ts.market().featured(&alice).await.unwrap()), ["nda", "team_only", "fx_rate"]);
    assert_eq!(names(ts.market().featured(&carol).await.unwrap()), ["nda", "fx_rate"], "a department listing is not featured to outsiders");
    ts.market().set_featured(&root, tools[3].id, false).await.unwrap();
    assert_eq!(names(ts.market().featured(&carol).await.unwrap()), ["fx_rate"]);
    let filter = toolshed_domain::admin::AuditFilter { action: "tool.".into(), ..Default::default() };
    let log = ts.admin().audit_log(&root, &filter).await.unwrap();
    let actions: Vec<_> =
        log.entries.iter().filter(|e| e.action.contains("featured")).map(|e| (e.action.as_str(), e.target.as_str())).collect();
    assert_eq!(actions[..2], [("tool.unfeatured", "tool:legal/nda"), ("tool.featured", "tool:finance/team_only")]);
    let kinds: Vec<_> = ts.market().featured(&carol).await.unwrap().into_iter().map(|c| (c.kind, c.featured)).collect();
    assert_eq!(kinds, [(ListingKind::Tool, true)]);
});

store_test!(with_nothing_featured_the_home_page_shows_the_most_used_listings_the_person_may_see, |db: Db| async move {
    let (ts, [alice, _, carol, root], tools) = market(db).await;
    listing(&ts, &alice, "team_only", "Team only | | | department").await;
    calls(&ts, &tools[3], &alice, 0, 3, 0, 1).await;
    let (featured, cards) = ts.market().home_listings(&carol).await.unwrap();
    assert!(!featured);
    assert_eq!(cards.first().map(|c| c.name.as_str()), Some(tools[3].name.as_str()), "the most used first");
    assert!(cards.len() > 1 && cards.iter().all(|c| c.name != "team_only"), "another department's private listing is not shown");
    ts.market().set_featured(&root, tools[0].id, true).await.unwrap();
    let (featured, cards) = ts.market().home_listings(&carol).await.unwrap();
    assert!(featured);
    assert_eq!(cards.into_iter().map(|c| c.name).collect::<Vec<_>>(), [tools[0].name.clone()]);
});

store_test!(every_usage_record_handed_to_the_recorder_is_written_with_all_its_fields, |db: Db| async move {
    let (ts, [alice, ..], tools) = market(db).await;
    let fx = &tools[0];
    // More than one multi-row statement's worth.
    for i in 0..250i64 {
        ts.usage().record(UsageRecord {
            at_ms: now_ms(),
            tool_id: fx.id.0,
            version: (i % 2 == 0).then_some(1),
            user_id: alice.id.0,
            token_id: None,
            bundle_id: None,
            transport: format!("t{}", i % 3),
            duration_us: i,
            outcome: if i % 5 == 0 { Outcome::ToolError } else { Outcome::Ok },
            upstream_server_id: None,
            upstream_tool: (i == 7).then(|| "echo".to_owned()),
        });
    }
    ts.usage().flush().await;
    let row = sqlx::query(
        "SELECT COUNT(*) AS n, CAST(SUM(duration_us) AS BIGINT) AS us, \
         CAST(SUM(CASE WHEN version IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS unversioned, \
         CAST(SUM(CASE WHEN outcome = 'tool_error' THEN 1 ELSE 0 END) AS BIGINT) AS errors, \
         CAST(SUM(CASE WHEN transport = 't2' THEN 1 ELSE 0 END) AS BIGINT) AS t2, \
         CAST(SUM(CASE WHEN upstream_tool = 'echo' AND duration_us = 7 THEN 1 ELSE 0 END) AS BIGINT) AS upstream \
         FROM usage_records WHERE tool_id = $1",
    )
    .bind(fx.id.0)
    .fetch_one(ts.db().pool())
    .await
    .unwrap();
    let get = |c: &str| sqlx::Row::get::<i64, _>(&row, c);
    assert_eq!((get("n"), get("us"), get("unversioned"), get("errors"), get("t2"), get("upstream")), (250, (0..250).sum(), 125, 50, 83, 1));
});

store_test!(usage_stats_count_calls_per_day_errors_and_duration_percentiles, |db: Db| async move {
    let (ts, [alice, _, carol, _], tools) = market(db).await;
    let fx = &tools[0];
    calls(&ts, fx, &alice, 0, 7, 1, 100).await;
    calls(&ts, fx, &alice, 3, 12, 0, 10).await;
    calls(&ts, fx, &alice, 29, 1, 1, 1000).await;
    calls(&ts, fx, &alice, 40, 50, 50, 1).await; // outside the window
    let stats = ts.market().usage_stats(&carol, fx.id).await.unwrap();
    assert_eq!(stats.days.len(), 30);
    assert_eq!((stats.days[29].calls, stats.days[29].errors), (7, 1), "today");
    assert_eq!(stats.days[26].calls, 12);
    assert_eq!(stats.days[0].calls, 1);
    assert_eq!((stats.calls, stats.errors), (20, 2));
    assert!((stats.error_rate() - 0.1).abs() < 1e-9);
    assert_eq!((stats.p50_ms, stats.p95_ms), (Some(10.0), Some(100.0)));
    assert_eq!(ts.market().usage_stats(&carol, tools[1].id).await.unwrap().p50_ms, None, "no calls, no percentiles");
    let private = listing(&ts, &alice, "secret", "Secret | | | private").await;
    assert!(matches!(ts.market().usage_stats(&carol, private.id).await, Err(ToolError::NotFound)));
});
