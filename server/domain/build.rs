//! Embeds `migrations/` (at the repository's root, outside this package) as
//! Rust source in `OUT_DIR`.
//!
//! `sqlx::migrate!` would embed them too, but cargo records a file outside the
//! package by its absolute path, so every clone at a new path (as CI makes)
//! recompiled the domain and all that depends on it. A file in `OUT_DIR` is
//! recorded relative to the target directory, and `rerun-if-changed` relative
//! to this package.
use std::{env, fmt::Write, fs, path::Path};

fn main() {
    let out = Path::new(&env::var("OUT_DIR").unwrap()).join("migrations.rs");
    let mut code = String::new();
    for backend in ["sqlite", "postgres"] {
        let dir = Path::new("../../migrations").join(backend);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
            .collect();
        files.sort();
        writeln!(code, "const {}: &[(&str, &str)] = &[", backend.to_uppercase()).unwrap();
        for path in files {
            let name = path.file_name().unwrap().to_str().unwrap();
            let sql = fs::read_to_string(&path).unwrap();
            writeln!(code, "    ({name:?}, {sql:?}),").unwrap();
        }
        writeln!(code, "];").unwrap();
    }
    fs::write(out, code).unwrap();
}
