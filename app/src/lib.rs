//! Toolshed's UI: Leptos components, pages and server functions. Compiled twice:
//! with `ssr` into the server (rendering, server-function bodies) and with
//! `hydrate` into the wasm bundle (interactivity). Only `ssr` sees the domain.

pub mod api;
mod components;
pub mod error;
mod pages;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::path;

use crate::api::{ChangePassword, Login, Logout, Register};
use crate::components::Header;
use crate::pages::{Account, Home, LoginPage, NotFound, RegisterPage};

/// The HTML document around the app, rendered on the server only.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8" />
                <meta name="viewport" content="width=device-width, initial-scale=1" />
                <link rel="icon" href="/favicon.svg" type="image/svg+xml" />
                <HydrationScripts options />
                <MetaTags />
            </head>
            <body>
                <App />
            </body>
        </html>
    }
}

/// Sign-in state shared by the header and the pages: the actions that change it,
/// and the current user, refetched whenever one of them completes.
#[derive(Clone, Copy)]
pub struct Auth {
    pub login: ServerAction<Login>,
    pub logout: ServerAction<Logout>,
    pub register: ServerAction<Register>,
    pub change_password: ServerAction<ChangePassword>,
    pub me: Resource<Result<Option<api::Me>, error::AppError>>,
}

impl Auth {
    fn new() -> Self {
        let login = ServerAction::<Login>::new();
        let logout = ServerAction::<Logout>::new();
        let register = ServerAction::<Register>::new();
        let change_password = ServerAction::<ChangePassword>::new();
        let me = Resource::new(
            move || (login.version().get(), logout.version().get(), register.version().get()),
            |_| api::current_user(),
        );
        Self { login, logout, register, change_password, me }
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    provide_context(Auth::new());

    view! {
        <Stylesheet id="toolshed" href="/pkg/toolshed.css" />
        <Title formatter=|page: String| if page.is_empty() { "Toolshed".to_owned() } else { format!("{page} · Toolshed") } />
        <Router>
            <Header />
            <main class="page">
                <Routes fallback=NotFound>
                    <Route path=path!("/") view=Home />
                    <Route path=path!("/login") view=LoginPage />
                    <Route path=path!("/register") view=RegisterPage />
                    <Route path=path!("/account") view=Account />
                </Routes>
            </main>
            <footer class="footer">"Toolshed · write one function, every agent gains a tool"</footer>
        </Router>
    }
}
