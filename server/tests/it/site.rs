//! The app's own files under /pkg: named after their contents by the build
//! (`pkg/hash.txt` lists the names), so browsers keep them for good.

use crate::common::{TempDir, TestServer};
use toolshed_domain::store::Backend;

/// A built site in miniature: the names `scripts/build.sh` gives, with stand-in contents.
fn site() -> std::path::PathBuf {
    crate::common::repo_root().join("server/tests/fixtures/site")
}
const FOR_GOOD: &str = "public, max-age=31536000, immutable";

#[tokio::test]
async fn pages_name_the_content_named_files_and_browsers_keep_those_for_good() {
    let srv = TestServer::process(Backend::Sqlite, &["--site-root", site().to_str().unwrap()]).await;
    let page = reqwest::get(srv.url("/")).await.unwrap().text().await.unwrap();
    for file in ["/pkg/toolshed.0123456789abcdef.js", "/pkg/toolshed.0123456789abcdef.wasm", "/pkg/toolshed.fedcba9876543210.css"] {
        assert!(page.contains(&format!("\"{file}\"")), "the page names {file}: {page}");
        let res = reqwest::get(srv.url(file)).await.unwrap();
        assert_eq!(res.status(), 200, "{file}");
        assert_eq!(res.headers()["cache-control"], FOR_GOOD, "{file}");
    }
    // A lazy page's chunk (scripts/site.mjs names them after the build too).
    let res = reqwest::get(srv.url("/pkg/chunk_3.0123456789abcdef.wasm")).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], FOR_GOOD);
    // A file whose name stays the same across builds is checked again each time.
    let res = reqwest::get(srv.url("/pkg/editor.js")).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-cache");
    let res = reqwest::get(srv.url("/pkg/hash.txt")).await.unwrap();
    assert_eq!(res.headers()["cache-control"], "no-cache");
}

#[tokio::test]
async fn a_server_started_beside_its_built_site_serves_pages() {
    // `make run`: the binary started from the clone, the site found at target/site.
    let clone = TempDir::new();
    std::fs::create_dir(clone.path().join("target")).unwrap();
    std::os::unix::fs::symlink(site(), clone.path().join("target/site")).unwrap();
    let srv = TestServer::process_in(clone.path(), Backend::Sqlite, &[]).await;
    let res = reqwest::get(srv.url("/")).await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.text().await.unwrap().contains("/pkg/toolshed.0123456789abcdef.wasm"));
}
