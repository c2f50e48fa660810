//! The browser half: hydrates the server-rendered page. Nothing else lives here;
//! this crate must never pull in SQL, the sandbox or rmcp.

#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
