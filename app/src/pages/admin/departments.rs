//! Departments: create, retitle (the slug in URLs never changes), whether
//! publishes wait for an admin's review or passing tests, and whether its
//! maintainers register its apps for connected accounts.

use leptos::prelude::*;

use crate::api::{admin_departments, CreateDepartment, RenameDepartment, SetAppRegistration, SetDepartmentReview, SetDepartmentTests};

/// A yes/no setting's cell: a plain form with a select of its two values and
/// Save (a macro: each setting is a server function of its own type).
macro_rules! setting_cell {
    ($action:expr, $key:literal, $department:expr, $field:literal, $label:literal, ($off:literal, $off_label:literal), ($on:literal, $on_label:literal), $value:expr) => {
        view! {
            <td data-label=$label>
                <ActionForm action=$action attr:class="inline-form">
                    <input type="hidden" name=$key value=$department />
                    <select name=$field aria-label=$label>
                        <option value=$off selected=!$value>{$off_label}</option>
                        <option value=$on selected=$value>{$on_label}</option>
                    </select>
                    <button type="submit" class="link-button">"Save"</button>
                </ActionForm>
            </td>
        }
    };
}

#[component]
pub fn DepartmentsCard() -> impl IntoView {
    let create = ServerAction::<CreateDepartment>::new();
    let rename = ServerAction::<RenameDepartment>::new();
    let review = ServerAction::<SetDepartmentReview>::new();
    let tests = ServerAction::<SetDepartmentTests>::new();
    let apps = ServerAction::<SetAppRegistration>::new();
    let list = Resource::new(
        move || (create.version().get(), rename.version().get(), review.version().get(), tests.version().get(), apps.version().get()),
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
    Effect::new(move |_| {
        if let Some(Ok(())) = apps.value().get() {
            notice.set(Some("App registration setting saved."));
        }
    });
    let error = move || {
        super::first_error([
            create.value().get().and_then(Result::err),
            rename.value().get().and_then(Result::err),
            review.value().get().and_then(Result::err),
            tests.value().get().and_then(Result::err),
            apps.value().get().and_then(Result::err),
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
                            <thead><tr><th>"Name"</th><th>"Title"</th><th>"Members"</th><th>"Review before publish"</th><th>"Tests before publish"</th><th>"Maintainers register apps"</th></tr></thead>
                            <tbody>
                                {rows.into_iter().map(|d| {
                                    let (for_rename, for_review, for_tests, for_apps, title) = (d.name.clone(), d.name.clone(), d.name.clone(), d.name.clone(), d.title.clone());
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
                                        {setting_cell!(review, "name", for_review, "review", "Review before publish", ("off", "off"), ("required", "required"), d.review_required)}
                                        {setting_cell!(tests, "name", for_tests, "tests", "Tests before publish", ("off", "off"), ("required", "required"), d.tests_required)}
                                        {setting_cell!(apps, "department", for_apps, "allowed", "Maintainers register apps", ("no", "no"), ("yes", "allowed"), d.maintainers_register_apps)}
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
