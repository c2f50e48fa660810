use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::CreateTool;
use crate::components::{FormError, RequireUser};

#[component]
pub fn NewTool() -> impl IntoView {
    view! { <NewListing bundle=false /> }
}

#[component]
pub fn NewBundle() -> impl IntoView {
    view! { <NewListing bundle=true /> }
}

/// The form that creates a tool or a bundle in the user's department.
#[component]
fn NewListing(bundle: bool) -> impl IntoView {
    let create = ServerAction::<CreateTool>::new();
    let error = Signal::derive(move || create.value().get().and_then(Result::err));
    let (heading, intro, placeholder) = if bundle {
        ("New bundle", "It belongs to your department. You pick its tools next.", "e.g. finance_kit")
    } else {
        ("New tool", "It belongs to your department. You write the code and arguments next.", "e.g. fx_rate")
    };
    view! {
        <Title text=heading />
        <RequireUser>
            <section class="narrow-wide card form-card">
                <h1>{heading}</h1>
                <p class="muted">{intro}</p>
                <FormError error />
                <ActionForm action=create attr:class="stack">
                    <input type="hidden" name="kind" value=if bundle { "bundle" } else { "tool" } />
                    <label>
                        "Name"
                        <input name="name" required maxlength="64" pattern="[A-Za-z0-9_\\-]+" placeholder=placeholder
                            title="Letters, digits, _ and - (an MCP tool name)" />
                        <small class="muted">{if bundle { "Its address. Letters, digits, _ and -." } else { "What models call it. Letters, digits, _ and -." }}</small>
                    </label>
                    <label>
                        "Title"
                        <input name="title" required maxlength="120" placeholder="e.g. Currency exchange rate" />
                    </label>
                    <label>
                        "Description (Markdown)"
                        <textarea name="description" rows="5" maxlength="20000"
                            placeholder="What it does and when a model should use it. Models read this."></textarea>
                    </label>
                    <div class="row">
                        <label>
                            "Tags"
                            <input name="tags" placeholder="finance, fx" maxlength="400" />
                        </label>
                        <label>
                            "Visible to"
                            <select name="visibility">
                                <option value="everyone">"Everyone"</option>
                                <option value="department">"My department"</option>
                                <option value="private">"Only me"</option>
                            </select>
                        </label>
                    </div>
                    <button type="submit" class="button" disabled=move || create.pending().get()>"Create and open the editor"</button>
                </ActionForm>
            </section>
        </RequireUser>
    }
}
