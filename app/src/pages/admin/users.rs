//! Accounts: roles, deactivation, departments. Each change is a small plain
//! form, so it works before the wasm has loaded.

use leptos::prelude::*;

use crate::api::{admin_departments, admin_users, MoveUser, SetUserRole, SetUserStatus, UserAdminView};
use crate::pages::tools::{ago, now_ms};

#[component]
fn UserRow(
    u: UserAdminView,
    departments: Vec<String>,
    role: ServerAction<SetUserRole>,
    status: ServerAction<SetUserStatus>,
    moved: ServerAction<MoveUser>,
) -> impl IntoView {
    let now = now_ms();
    let (next_role, role_label) = if u.is_admin { ("member", "Remove admin") } else { ("admin", "Make admin") };
    let (next_status, status_label) = if u.is_active { ("deactivated", "Deactivate") } else { ("active", "Reactivate") };
    let current = u.department.clone();
    let (for_move, for_role, for_status) = (u.username.clone(), u.username.clone(), u.username.clone());
    view! {
        <tr data-user=u.username.clone()>
            <td><strong>{u.display_name.clone()}</strong> <span class="muted">"@" {u.username.clone()}</span></td>
            <td data-label="Department">
                <ActionForm action=moved attr:class="inline-form">
                    <input type="hidden" name="username" value=for_move />
                    <select name="department" aria-label="Department">
                        {departments.into_iter().map(|d| view! { <option value=d.clone() selected=d == current>{d.clone()}</option> }).collect_view()}
                    </select>
                    <button type="submit" class="link-button">"Move"</button>
                </ActionForm>
            </td>
            <td data-label="Administrator">
                {if u.is_admin { "yes" } else { "no" }}
                <ActionForm action=role attr:class="inline-form">
                    <input type="hidden" name="username" value=for_role />
                    <input type="hidden" name="role" value=next_role />
                    <button type="submit" class="link-button">{role_label}</button>
                </ActionForm>
            </td>
            <td data-label="Status">
                {if u.awaiting_approval {
                    // Activating here would skip the department's decision.
                    view! { "awaiting approval " <a href="/people">"(People)"</a> }.into_any()
                } else {
                    view! {
                        {if u.is_active { "active" } else { "deactivated" }}
                        <ActionForm action=status attr:class="inline-form">
                            <input type="hidden" name="username" value=for_status />
                            <input type="hidden" name="status" value=next_status />
                            <button type="submit" class="link-button" class:danger=u.is_active>{status_label}</button>
                        </ActionForm>
                    }.into_any()
                }}
            </td>
            <td class="muted" data-label="Joined">{ago(u.created_at, now.max(u.created_at))}</td>
        </tr>
    }
}

#[component]
pub fn UsersCard() -> impl IntoView {
    let role = ServerAction::<SetUserRole>::new();
    let status = ServerAction::<SetUserStatus>::new();
    let moved = ServerAction::<MoveUser>::new();
    let users = Resource::new(
        move || (role.version().get(), status.version().get(), moved.version().get()),
        |_| async move { Ok::<_, crate::error::AppError>((admin_users().await?, admin_departments().await?)) },
    );
    let error = move || {
        super::first_error([
            role.value().get().and_then(Result::err),
            status.value().get().and_then(Result::err),
            moved.value().get().and_then(Result::err),
        ])
    };
    view! {
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match users.await {
                    Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                    Ok((list, departments)) => {
                        let names: Vec<String> = departments.into_iter().map(|d| d.name).collect();
                        view! {
                            <section class="card users">
                                <h2>{format!("Users ({})", list.len())}</h2>
                                {error}
                                <table class="admin-table stacked">
                                    <thead><tr><th>"User"</th><th>"Department"</th><th>"Administrator"</th><th>"Status"</th><th>"Joined"</th></tr></thead>
                                    <tbody>
                                        {list.into_iter().map(|u| view! { <UserRow u departments=names.clone() role status moved /> }).collect_view()}
                                    </tbody>
                                </table>
                            </section>
                        }.into_any()
                    }
                }
            })}
        </Transition>
    }
}
