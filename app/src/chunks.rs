//! The wasm chunks of the lazy pages (server side): `scripts/site.mjs` lists
//! each group of pages' files in `pkg/__wasm_split_chunks.HASH.json`; a page opened
//! directly names its own in its head, so the browser fetches them beside the
//! main wasm instead of after it. (Leptos can do this from its own manifest,
//! but registers them while the page renders, and lost them one load in two.)

use std::collections::HashMap;
use std::path::Path;

use leptos::prelude::*;
use leptos_meta::Link;

/// Each group of lazy pages' chunk files (stems under `/pkg`, shared chunks
/// first), by the group's name (`catalog_pages`), and the chunks' loader.
#[derive(Clone, Debug, Default)]
pub struct PageChunks {
    loader: String,
    groups: HashMap<String, Vec<String>>,
}

impl PageChunks {
    /// Reads the list the build wrote in `pkg`; none (a site built without
    /// splitting, or none at all) means no hints, not an error.
    pub fn load(pkg: &Path) -> Self {
        let read = || -> Option<Self> {
            let hashes = std::fs::read_to_string(pkg.join("hash.txt")).ok()?;
            let hash = hashes.lines().find_map(|l| l.strip_prefix("split:")).map(str::trim)?;
            let list = std::fs::read_to_string(pkg.join(format!("__wasm_split_chunks.{hash}.json"))).ok()?;
            let splits: HashMap<String, Vec<String>> = serde_json::from_str(&list).ok()?;
            Some(Self::from_splits(format!("__wasm_split.{hash}.js"), splits))
        };
        read().unwrap_or_default()
    }

    /// Keys the build's list by group once, so a page render only looks its
    /// own up: Leptos' `#[lazy]` names the split of `fn catalog_pages`
    /// `catalog_pages_HASH`.
    fn from_splits(loader: String, splits: HashMap<String, Vec<String>>) -> Self {
        let groups = splits
            .into_iter()
            .filter_map(|(split, files)| {
                let (name, _hash) = split.rsplit_once('_')?;
                Some((name.to_owned(), files))
            })
            .collect();
        Self { loader, groups }
    }

    /// The files of the group of pages named `group` (`catalog_pages`).
    fn of(&self, group: &str) -> Option<&[String]> {
        self.groups.get(group).map(Vec::as_slice)
    }
}

/// Puts `<link rel=preload>` for the chunks of the page's `group` in the head
/// of the page being rendered (leptos_meta collects what `to_html` registers).
pub fn name_in_head(group: &str) {
    let Some(chunks) = use_context::<PageChunks>() else { return };
    let Some(files) = chunks.of(group) else { return };
    for file in files {
        let _ =
            view! { <Link rel="preload" href=format!("/pkg/{file}.wasm") as_="fetch" type_="application/wasm" crossorigin="anonymous" /> }
                .to_html();
    }
    let _ = view! { <Link rel="modulepreload" href=format!("/pkg/{}", chunks.loader) crossorigin="anonymous" /> }.to_html();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_of_pages_finds_its_files_by_its_name() {
        let chunks = PageChunks::from_splits(
            "__wasm_split.0123456789abcdef.js".into(),
            HashMap::from([
                ("catalog_pages_42".into(), vec!["chunk_1.h".into(), "split_catalog_pages_42.h".into()]),
                ("authoring_pages_42".into(), vec!["chunk_2.h".into()]),
            ]),
        );
        assert_eq!(chunks.of("catalog_pages"), Some(&["chunk_1.h".to_owned(), "split_catalog_pages_42.h".to_owned()][..]));
        assert_eq!(chunks.of("authoring_pages"), Some(&["chunk_2.h".to_owned()][..]));
        assert_eq!(chunks.of("catalog"), None);
    }

    #[test]
    fn a_site_without_a_chunk_list_names_nothing() {
        let chunks = PageChunks::load(Path::new("/nonexistent"));
        assert_eq!(chunks.of("catalog_pages"), None);
    }
}
