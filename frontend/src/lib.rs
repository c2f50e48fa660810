//! The browser half: hydrates the server-rendered page. Nothing else lives here;
//! this crate must never pull in SQL, the sandbox or rmcp.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    // No panic hook: the wasm is built to abort at once on a panic (scripts/build.sh),
    // so a hook would never run.
    // Lazy: a page's route may wait for its wasm chunk before it hydrates.
    leptos::mount::hydrate_lazy(app::App);
}
