//! Abuse from inside, against the real server process: whatever a tool's code
//! does, what its run hands the host stays within the run's own limits.

use crate::common::TestServer;
use serde_json::json;

server_test!(what_a_run_hands_the_host_is_bounded_by_the_runs_own_limits, |srv: TestServer| async move {
    let alice = srv.member("alice", "research").await;
    let tool = srv.create_tool(&alice, "abuse", "private").await;
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
    let grew_mib = (srv.peak_rss_kib() - before) / 1024;
    // Each run may use its 32 MiB heap; before, the first run alone raised the peak by ~900 MiB.
    assert!(grew_mib < 120, "the server's peak memory grew by {grew_mib} MiB");
});
