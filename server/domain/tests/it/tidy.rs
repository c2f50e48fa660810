//! Tidiness checks on the repository itself, so that what the docs say of the
//! code stays true: every file ARCHITECTURE.md names exists, the domain's
//! modules import one way, and none imports what the code map says it must
//! not know.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    crate::support::repo_root()
}

/// What a backquoted name is taken for a file or folder by: a file's extension, or a trailing `/`.
const FILE_EXTENSIONS: &[&str] = &[".rs", ".mjs", ".js", ".sh", ".md", ".json", ".toml", ".sql", ".py", ".css", ".ts", ".txt"];

/// The names in `text` that are files or folders of the repository: backquoted,
/// no spaces, a file's extension or a trailing `/`. URL paths (`/mcp/…`),
/// places outside the clone (`~/.cache`, `./data`) and what the build and the
/// tests write (`pkg/…`, names with a `HASH`, `end2end/output/`: a fresh clone
/// has none of them when this test runs) are not.
fn named_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| !name.contains(char::is_whitespace) && !name.is_empty())
        .filter(|name| name.ends_with('/') || FILE_EXTENSIONS.iter().any(|ext| name.ends_with(ext)))
        .filter(|name| !name.starts_with(['/', '~', '.', '…']) && !name.contains("://"))
        .filter(|name| !name.starts_with("pkg/") && !name.contains("HASH") && !name.contains("DATA_DIR") && !name.ends_with("output/"))
        .flat_map(expand_braces)
        .collect()
}

/// `migrations/{sqlite,postgres}/` names two folders.
fn expand_braces(name: &str) -> Vec<String> {
    match (name.find('{'), name.find('}')) {
        (Some(open), Some(close)) if open < close => name[open + 1..close]
            .split(',')
            .flat_map(|choice| expand_braces(&format!("{}{choice}{}", &name[..open], &name[close + 1..])))
            .collect(),
        _ => vec![name.to_owned()],
    }
}

/// Where a name in `block` may be written relative to: the root, and every
/// folder a name of the same block, or of the code map's first column, is in
/// or is (a row names its module's files by their names within it, the
/// walkthroughs name files within the crate they are in).
fn anchors(block: &str, code_map: &str, root: &Path) -> Vec<PathBuf> {
    let mut anchors = vec![root.to_path_buf()];
    for name in named_paths(block).into_iter().chain(named_paths(code_map)) {
        let path = root.join(name.trim_end_matches("/**"));
        let mut dir = if path.is_dir() { Some(path.as_path()) } else { path.parent() };
        while let Some(d) = dir.filter(|d| d.starts_with(root)) {
            anchors.push(d.to_path_buf());
            dir = d.parent();
        }
    }
    anchors
}

/// ARCHITECTURE.md's blocks: table rows, list items and paragraphs.
fn blocks(doc: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current = String::new();
    for line in doc.lines() {
        let starts_block = line.starts_with('|') || line.starts_with("- ") || line.trim().is_empty() || line.starts_with('#');
        if starts_block && !current.is_empty() {
            blocks.push(std::mem::take(&mut current));
        }
        current.push_str(line);
        current.push('\n');
    }
    blocks.push(current);
    blocks
}

/// The first cells of the code map's rows: the folders and files it describes.
fn first_column(doc: &str) -> String {
    doc.lines().filter(|line| line.starts_with("| `")).filter_map(|line| line.split(" | ").next()).collect::<Vec<_>>().join("\n")
}

/// A file's name relative to any anchor, or a glob's folder (`app/src/**`).
fn exists(name: &str, anchors: &[PathBuf]) -> bool {
    let name = name.trim_end_matches("/**");
    anchors.iter().any(|anchor| anchor.join(name).exists())
}

#[test]
fn every_file_and_folder_architecture_names_exists() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let code_map = first_column(&doc);
    let missing: Vec<String> = blocks(&doc)
        .iter()
        .flat_map(|block| {
            let anchors = anchors(block, &code_map, &root);
            named_paths(block).into_iter().filter(move |name| !exists(name, &anchors))
        })
        .collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md names files that do not exist: {missing:?}");
}

#[test]
fn a_name_that_does_not_exist_is_found_missing() {
    let root = root();
    let block = "| `server/domain/src/tools/` | drafts (`versions.rs`), `gone.rs` and `migrations/{sqlite,nope}/` |";
    let anchors = anchors(block, "", &root);
    let missing: Vec<String> = named_paths(block).into_iter().filter(|name| !exists(name, &anchors)).collect();
    assert_eq!(missing, ["gone.rs", "migrations/nope/"]);
}

/// A module of `server/domain/src` (`["tools", "versions"]`; the crate root is `[]`) and its source.
struct Module {
    path: Vec<String>,
    source: String,
}

/// Every module file under `src`, with its source up to its unit tests (what
/// a test module imports does not shape the crate).
fn modules(src: &Path) -> Vec<Module> {
    let mut files = vec![src.to_path_buf()];
    let mut modules = Vec::new();
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut segments: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(segments.last().map(String::as_str), Some("mod" | "lib")) {
                segments.pop();
            }
            // Unit tests live in a file of their own (`sandbox/tests.rs`) or below `#[cfg(test)]`.
            if segments.last().is_some_and(|s| s == "tests") {
                continue;
            }
            modules.push(Module { path: segments, source: std::fs::read_to_string(&path).unwrap() });
        }
    }
    modules
}

/// The code of `source` without comments and without its `#[cfg(test)]` items.
fn code(source: &str) -> String {
    let code: String = source.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    match code.find("#[cfg(test)]") {
        Some(tests) => code[..tests].to_owned(),
        None => code,
    }
}

/// The modules a module's code names.
fn named_modules(module: &Module, known: &std::collections::BTreeSet<Vec<String>>) -> std::collections::BTreeSet<Vec<String>> {
    written_paths(module).iter().filter_map(|path| resolve(&module.path, path, known)).filter(|target| *target != module.path).collect()
}

/// The paths as a module's code writes them: its `use` trees, expanded, and
/// every path written inline (`crate::…`, `super::…`, `axum::…`, or a child
/// module's, `cache::Epoch` in `lib.rs`).
fn written_paths(module: &Module) -> Vec<String> {
    let code = code(&module.source);
    let use_tree = regex::Regex::new(r"\buse\s+([^;]+);").unwrap();
    let inline = regex::Regex::new(r"(?:\b|::)[a-z_]\w*(?:::\w+)+").unwrap();
    let mut paths: Vec<String> =
        use_tree.captures_iter(&code).flat_map(|c| expand_use_tree(&c[1].replace(char::is_whitespace, ""))).collect();
    paths.extend(inline.find_iter(&code).map(|m| m.as_str().trim_start_matches("::").to_owned()));
    paths
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand_use_tree(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else { return vec![tree.to_owned()] };
    let (prefix, inner) = (&tree[..open], &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, ch) in inner.char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).flat_map(|p| expand_use_tree(&format!("{prefix}{p}"))).collect()
}

/// The module a path written in module `from` lands in: the longest module
/// prefix of it (`crate::tools::versions::Version` is in `tools::versions`).
/// A path to another crate is none.
fn resolve(from: &[String], path: &str, known: &std::collections::BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut segments = path.split("::").map(|s| s.split(" as ").next().unwrap_or(s)).peekable();
    let mut full: Vec<String> = match segments.peek().copied() {
        Some("crate") => {
            segments.next();
            Vec::new()
        }
        Some("super") => {
            let mut base = from.to_vec();
            while segments.peek() == Some(&"super") {
                segments.next();
                base.pop();
            }
            base
        }
        Some("self") => {
            segments.next();
            from.to_vec()
        }
        // A child module named without `self::` (`pub use versions::Version` in `tools/mod.rs`).
        Some(first) if known.contains(&[from, &[first.to_owned()]].concat()) => from.to_vec(),
        _ => return None,
    };
    full.extend(segments.map(str::to_owned));
    (0..=full.len()).rev().map(|n| full[..n].to_vec()).find(|prefix| known.contains(prefix))
}

/// The module graph's cycles, each sorted, as `a::b` names. The graph is seen
/// room by room: a folder module is one node to the modules beside it, and
/// its files are nodes to each other (`tools::versions` naming `accounts` is
/// an edge `tools` → `accounts`; naming `tools::test_cases`, an edge inside
/// `tools`). A module naming its own parent or child (the crate root, a
/// `mod.rs` and its files) is not an edge: a module and its parts are one room.
fn cycles(modules: &[Module]) -> Vec<Vec<String>> {
    let known: std::collections::BTreeSet<Vec<String>> = modules.iter().map(|m| m.path.clone()).collect();
    let mut nodes: Vec<Vec<String>> = known.iter().cloned().collect();
    let mut edges: std::collections::BTreeSet<(Vec<String>, Vec<String>)> = Default::default();
    for module in modules {
        for target in named_modules(module, &known) {
            let common = module.path.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == module.path.len() || common == target.len() {
                continue;
            }
            edges.insert((module.path[..=common].to_vec(), target[..=common].to_vec()));
        }
    }
    // Folders without a `mod.rs` are nodes too.
    for (from, to) in &edges {
        for node in [from, to] {
            if !nodes.contains(node) {
                nodes.push(node.clone());
            }
        }
    }
    let index: std::collections::BTreeMap<&Vec<String>, usize> = nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
    let mut adjacency = vec![Vec::new(); nodes.len()];
    for (from, to) in &edges {
        adjacency[index[from]].push(index[to]);
    }
    strongly_connected(&adjacency)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut names: Vec<String> = component.iter().map(|&i| nodes[i].join("::")).collect();
            names.sort();
            names
        })
        .collect()
}

/// Tarjan's algorithm, iteratively: the strongly connected components of a graph given as adjacency lists.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut components, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0)];
        while let Some((v, child)) = work.pop() {
            if child == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = edges[v].get(child) {
                work.push((v, child + 1));
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
        }
    }
    components
}

/// Who uses whom reads one way: a module that needs another's kind imports
/// it, and no chain of imports leads back (shared kinds live in leaf modules:
/// `names`, `store`, `outbound`, `usage`'s records).
#[test]
fn the_domain_has_no_import_cycle() {
    let found = cycles(&modules(&root().join("server/domain/src")));
    assert!(found.is_empty(), "import cycles in server/domain/src: {found:?}");
}

/// The same of the sandbox, a crate of its own.
#[test]
fn the_sandbox_has_no_import_cycle() {
    let found = cycles(&modules(&root().join("server/sandbox/src")));
    assert!(found.is_empty(), "import cycles in server/sandbox/src: {found:?}");
}

/// Sources as files of a crate's `src`, for the cycle finder's own tests.
fn crate_of(files: &[(&str, &str)]) -> Vec<Module> {
    files
        .iter()
        .map(|(path, source)| Module {
            path: path.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect(),
            source: (*source).to_owned(),
        })
        .collect()
}

#[test]
fn a_planted_cycle_is_found_whichever_way_its_imports_are_written() {
    let modules = crate_of(&[
        ("", "mod names; mod tools; mod audit; mod cache; pub use names::Name; fn f() { tools::run() }"),
        ("names", "use crate::{cache, tools::{versions::Version, Tool}};"),
        ("tools", "pub use versions::Version; use super::audit; pub use crate::Toolshed;"),
        ("tools/versions", "use super::Tool; pub struct Version; fn f() { crate::names::check(); }"),
        ("tools/runs", "use super::versions::Version;"),
        ("audit", "pub fn record() {}"),
        ("cache", "// use crate::tools;\n#[cfg(test)]\nmod tests { use crate::tools; }"),
    ]);
    assert_eq!(cycles(&modules), [["names", "tools"]]);
}

#[test]
fn a_crate_whose_imports_go_one_way_has_no_cycle() {
    let modules = crate_of(&[
        ("", "pub use tools::Tool; use crate::audit::record;"),
        ("tools", "use crate::audit::record; use crate::Toolshed; pub use versions::Version;"),
        ("tools/versions", "use super::Tool; use super::runs::Run; use crate::audit;"),
        ("tools/runs", "use std::fmt;"),
        ("audit", "use std::fmt;"),
    ]);
    assert_eq!(cycles(&modules), Vec::<Vec<String>>::new());
}

/// What each term of the code map's "must not know" column means in imports:
/// the paths a module of that row may not name.
const MUST_NOT_KNOW: &[(&str, &[&str])] = &[
    ("HTTP", &["axum", "http", "hyper", "tower_http"]),
    ("HTTP routes", &["axum", "tower_http"]),
    ("redirects", &["axum"]),
    ("cookies", &["tower_sessions::cookie", "cookie"]),
    ("MCP", &["rmcp"]),
    ("rmcp", &["rmcp"]),
    ("the database", &["sqlx", "crate::store"]),
    ("users", &["crate::accounts"]),
    ("the sandbox", &["crate::sandbox", "rquickjs"]),
    ("the OpenID protocol", &["openidconnect"]),
    ("the page", &["leptos"]),
];

/// Every path a module's code names, once each, `crate::`-relative ones made
/// absolute (`super::store::Db` in `tools/mod.rs` is `crate::store::Db`).
fn named_paths_in_code(module: &Module) -> std::collections::BTreeSet<String> {
    written_paths(module)
        .into_iter()
        .map(|path| {
            let mut segments: Vec<&str> = path.split("::").collect();
            let mut base = module.path.clone();
            match segments.first() {
                Some(&"super") => {
                    while segments.first() == Some(&"super") {
                        segments.remove(0);
                        base.pop();
                    }
                    ["crate".to_owned()]
                        .into_iter()
                        .chain(base)
                        .chain(segments.into_iter().map(str::to_owned))
                        .collect::<Vec<_>>()
                        .join("::")
                }
                _ => path,
            }
        })
        .collect()
}

/// The imports of `modules` that the code map in `doc` forbids their rows, and
/// terms of its "must not know" column that [`MUST_NOT_KNOW`] does not define.
fn breaches(doc: &str, modules: &[Module]) -> Vec<String> {
    let mut breaches = Vec::new();
    for row in doc.lines().filter(|line| line.starts_with("| `server/domain/src/")) {
        let cells: Vec<&str> = row.trim().trim_matches('|').split(" | ").map(str::trim).collect();
        let (Some(paths), Some(forbidden)) = (cells.first(), cells.get(2)) else { continue };
        let owned: Vec<Vec<String>> = named_paths(paths)
            .iter()
            .map(|p| {
                let p = p.trim_start_matches("server/domain/src/").trim_end_matches('/').trim_end_matches(".rs");
                p.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect()
            })
            .collect();
        for term in forbidden.split(", ").filter(|t| !t.is_empty()) {
            let prefixes = MUST_NOT_KNOW.iter().find(|(t, _)| *t == term).map(|(_, p)| *p);
            let Some(prefixes) = prefixes else {
                breaches.push(format!("{paths}: \"{term}\" is not in MUST_NOT_KNOW (say what it means in imports)"));
                continue;
            };
            for module in modules.iter().filter(|m| owned.iter().any(|o| m.path.starts_with(o))) {
                for path in named_paths_in_code(module) {
                    if let Some(prefix) = prefixes.iter().find(|p| path == **p || path.starts_with(&format!("{p}::"))) {
                        breaches.push(format!("{} names {path}, but must not know {term} ({prefix})", module.path.join("::")));
                    }
                }
            }
        }
    }
    breaches
}

#[test]
fn no_module_of_the_domain_imports_what_the_code_map_says_it_must_not_know() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let breaches = breaches(&doc, &modules(&root.join("server/domain/src")));
    assert!(breaches.is_empty(), "{breaches:#?}");
}

#[test]
fn a_planted_import_the_code_map_forbids_is_found() {
    let doc = "| `server/domain/src/tools/` | listings | HTTP, MCP |\n| `server/domain/src/scan.rs` | the scanner | the database |\n| `server/domain/src/names.rs` | names | feelings |\n";
    let modules = crate_of(&[
        ("tools/push", "use axum::http::StatusCode; fn f() { rmcp::model::Tool::default(); }"),
        ("scan", "use super::store::Db;"),
        ("names", "use std::fmt;"),
    ]);
    assert_eq!(
        breaches(doc, &modules),
        [
            "tools::push names axum::http::StatusCode, but must not know HTTP (axum)",
            "tools::push names rmcp::model::Tool::default, but must not know MCP (rmcp)",
            "scan names crate::store::Db, but must not know the database (crate::store)",
            "`server/domain/src/names.rs`: \"feelings\" is not in MUST_NOT_KNOW (say what it means in imports)",
        ]
    );
}

/// The modules other than the crate root that implement `Toolshed` (or give it
/// a public field): subsystems are handles, and `Toolshed` only hands them out.
fn facade_breaches(modules: &[Module]) -> Vec<String> {
    modules
        .iter()
        .filter(|m| {
            let code = code(&m.source);
            let implements = code.lines().any(|line| line.trim_start().starts_with("impl Toolshed"));
            let fields = code.split_once("pub struct Toolshed {").and_then(|(_, rest)| rest.split_once("\n}")).map(|(fields, _)| fields);
            (implements && !m.path.is_empty()) || fields.is_some_and(|f| f.contains("\n    pub "))
        })
        .map(|m| m.path.join("/"))
        .collect()
}

#[test]
fn only_the_crate_root_implements_toolshed() {
    let found = facade_breaches(&modules(&root().join("server/domain/src")));
    assert!(found.is_empty(), "`impl Toolshed` outside lib.rs, or a public field: {found:?}");
}

#[test]
fn a_planted_method_on_toolshed_is_found() {
    let modules = crate_of(&[
        ("", "pub struct Toolshed {\n    core: Core,\n}\nimpl Toolshed {\n    pub fn tools(&self) {}\n}"),
        ("market", "pub struct Toolshed {\n    pub db: Db,\n}"),
        ("tools", "impl Tools<'_> { pub fn tool(self) {} }"),
        ("bundles", "// impl Toolshed {\nimpl Toolshed {\n    pub fn bundle(&self) {}\n}"),
    ]);
    assert_eq!(facade_breaches(&modules), ["market", "bundles"]);
}

/// The Rust files of the workspace's crates, outside what builds write.
fn workspace_rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && !matches!(name.to_str(), Some("target" | "node_modules" | ".git" | "data")) {
            workspace_rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// A folder written into a binary when it is built names the clone that
/// built it; CI's clones share a target directory, cargo reuses the binary,
/// and that clone may be gone (stop 38's CI failed so).
#[test]
fn no_code_bakes_the_clones_folder_in_at_build_time() {
    let baked = concat!("env!(\"CARGO_", "MANIFEST_DIR\")");
    let mut files = Vec::new();
    workspace_rust_files(&root(), &mut files);
    assert!(files.len() > 50, "the walk finds the workspace's sources: {}", files.len());
    let offenders: Vec<_> = files.iter().filter(|file| std::fs::read_to_string(file).unwrap().contains(baked)).collect();
    assert!(offenders.is_empty(), "read CARGO_MANIFEST_DIR when the test runs (support::repo_root), not with env!: {offenders:?}");
}
