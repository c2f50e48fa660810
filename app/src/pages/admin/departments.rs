//! Departments: create, retitle (the slug in URLs never changes), and
//! whether publishes wait for an admin's review.

use leptos::prelude::*;

use crate::api::{admin_departments, CreateDepartment, RenameDepartment, SetDepartmentReview, SetDepartmentTests};

#[component]
pub fn DepartmentsCard() -> impl IntoView {
    let create = ServerAction::<CreateDepartment>::new();
    let rename = ServerAction::<RenameDepartment>::new();
    let review = ServerAction::<SetDepartmentReview>::new();
    let tests = ServerAction::<SetDepartmentTests>::new();
    let list = Resource::new(
        move || (create.version().get(), rename.version().get(), review.version().get(), tests.version().get()),
        |_| admin_departments(),
    );
    let (new_name, new_title) = (RwSignal::new(String::new()), RwSignal::new(String::new()));
    let notice = RwSignal::new(None::<&'static str>);
    Effect::new(move |_| {
        if let Some(Ok(())) = create.value().get() {
            notice.set(Some("Department created: it is in the table above."));
            new_name.set(String::new());
            new_title.set(String::new());
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = rename.value().get() {
            notice.set(Some("Title saved."));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = review.value().get() {
            notice.set(Some("Review setting saved."));
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = tests.value().get() {
            notice.set(Some("Test setting saved."));
        }
    });
    let error = move || {
        super::first_error([
            create.value().get().and_then(Result::err),
            rename.value().get().and_then(Result::err),
            review.value().get().and_then(Result::err),
            tests.value().get().and_then(Result::err),
        ])
    };
    view! {
        <section class="card departments">
            <h2>"Departments"</h2>
            <p class="muted small">"A department's name is part of its listings' URLs and MCP endpoints, so it never changes; its title can."</p>
            {error}
            {move || notice.get().map(|text| view! { <p class="alert ok" role="status">{text}</p> })}
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let rows = list.await.unwrap_or_default();
                    view! {
                        <table class="admin-table stacked">
                            <thead><tr><th>"Name"</th><th>"Title"</th><th>"Members"</th><th>"Review before publish"</th><th>"Tests before publish"</th></tr></thead>
                            <tbody>
                                {rows.into_iter().map(|d| {
                                    let (for_rename, for_review, for_tests, title) = (d.name.clone(), d.name.clone(), d.name.clone(), d.title.clone());
                                    view! {
                                    <tr data-department=d.name.clone()>
                                        <td><code>{d.name.clone()}</code></td>
                                        <td data-label="Title">
                                            <ActionForm action=rename attr:class="inline-form">
                                                <input type="hidden" name="name" value=for_rename />
                                                <input name="title" value=title required maxlength="120" aria-label="Title" />
                                                <button type="submit" class="link-button">"Rename"</button>
                                            </ActionForm>
                                        </td>
                                        <td data-label="Members">{d.members}</td>
                                        <td data-label="Review before publish">
                                            <ActionForm action=review attr:class="inline-form">
                                                <input type="hidden" name="name" value=for_review />
                                                <select name="review" aria-label="Review before publish">
                                                    <option value="off" selected=!d.review_required>"off"</option>
                                                    <option value="required" selected=d.review_required>"required"</option>
                                                </select>
                                                <button type="submit" class="link-button">"Save"</button>
                                            </ActionForm>
                                        </td>
                                        <td data-label="Tests before publish">
                                            <ActionForm action=tests attr:class="inline-form">
                                                <input type="hidden" name="name" value=for_tests />
                                                <select name="tests" aria-label="Tests before publish">
                                                    <option value="off" selected=!d.tests_required>"off"</option>
                                                    <option value="required" selected=d.tests_required>"required"</option>
                                                </select>
                                                <button type="submit" class="link-button">"Save"</button>
                                            </ActionForm>
                                        </td>
                                    </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }
                })}
            </Transition>
            <ActionForm action=create attr:class="inline-form create-department">
                <input name="name" required maxlength="32" placeholder="name (e.g. finance-ops)" aria-label="Name"
                    prop:value=move || new_name.get() on:input=move |ev| new_name.set(event_target_value(&ev)) />
                <input name="title" required maxlength="120" placeholder="Title" aria-label="Title"
                    prop:value=move || new_title.get() on:input=move |ev| new_title.set(event_target_value(&ev)) />
                <button type="submit" class="button secondary small">"Create department"</button>
            </ActionForm>
        </section>
    }
}
