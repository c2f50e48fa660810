//! The server as a library: one process may serve several (the tests do), and
//! what one of them does there leaves the others alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::TestServer;
use toolshed_domain::store::Backend;

// Leptos makes a server's route list by rendering the app with every resource
// in the process held back: a page that another server rendered meanwhile
// waited for its data for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_starting_beside_a_serving_one_leave_its_pages_answering() {
    let srv = TestServer::start_with(Backend::Sqlite, &[]).await;
    crate::common::within_time_limit(async {
        let starts: Vec<_> = (0..300).map(|_| srv.bind_beside()).collect();
        // On a thread of its own, while pages are asked for from this one.
        let starting = tokio::spawn(async move {
            for start in starts {
                start.await;
            }
        });
        let started = AtomicBool::new(false);
        let browsing = |path: &'static str| {
            let (srv, started, browser) = (&srv, &started, srv.browser());
            async move {
                while !started.load(Ordering::Relaxed) {
                    let page = tokio::time::timeout(Duration::from_secs(10), srv.page(&browser, path)).await;
                    let (status, html) = page.unwrap_or_else(|_| panic!("{path} answers within 10 s while servers start beside it"));
                    assert!(html.contains("</html>"), "{path}: {status} {html}");
                }
            }
        };
        let starting = async {
            starting.await.unwrap();
            started.store(true, Ordering::Relaxed);
        };
        tokio::join!(starting, browsing("/"), browsing("/no/such/page"));
    })
    .await;
}
