//! The moderation queue (open reports grouped by listing, versions waiting
//! for review, publishes held for hidden instructions) and the form of an
//! admin's action on a listing.

use leptos::prelude::*;

use crate::api::{moderation_queue, AcceptFindings, HeldView, Moderate, QueueItemView, ReviewVersion};
use crate::components::Findings;
use crate::pages::tools::{ago, now_ms, DiffText};

/// hide / disable / restore / delete / feature / unfeature / dismiss, with a required note.
#[component]
pub(crate) fn ModerateForm(action: ServerAction<Moderate>, tool: i64, status: String) -> impl IntoView {
    let actions: Vec<(&str, &str)> = [
        ("hide", "Hide", status != "hidden"),
        ("disable", "Disable", status != "disabled"),
        ("restore", "Restore", status != "active"),
        ("delete", "Delete", status != "deleted"),
        ("dismiss", "Dismiss the reports", true),
        ("feature", "Feature", true),
        ("unfeature", "Stop featuring", true),
    ]
    .into_iter()
    .filter(|(_, _, offered)| *offered)
    .map(|(value, label, _)| (value, label))
    .collect();
    view! {
        <ActionForm action attr:class="stack moderate-form">
            <input type="hidden" name="tool" value=tool />
            <div class="row">
                <label>"Action"
                    <select name="action">
                        {actions.into_iter().map(|(v, l)| view! { <option value=v>{l}</option> }).collect_view()}
                    </select>
                </label>
            </div>
            <label>"Note for the author (required)"
                <textarea name="note" rows="2" required maxlength="1000"></textarea>
            </label>
            <button type="submit" class="button secondary">"Apply"</button>
        </ActionForm>
        {move || action.value().get().map(|r| match r {
            Ok(()) => view! { <p class="alert ok" role="status">"Done: the listing's status is updated and the author can read your note."</p> }.into_any(),
            Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
        })}
    }
}

/// What waits for review, shown as what models would read differently (and the
/// code), then Approve or Reject with a note.
#[component]
fn ReviewForm(action: ServerAction<ReviewVersion>, tool: i64, what: String, diff: Option<(String, String)>) -> impl IntoView {
    view! {
        {diff.map(|(texts, code)| view! {
            <div class="diff review-diff">
                <h4>"What models read"</h4>
                <DiffText text=texts />
                <h4>"Code"</h4>
                <DiffText text=code />
            </div>
        })}
        <ActionForm action attr:class="stack review-form">
            <input type="hidden" name="tool" value=tool />
            <label>{format!("Waiting for review: {what}. Note for the author (required)")}
                <textarea name="note" rows="2" required maxlength="1000"></textarea>
            </label>
            <div class="row">
                <select name="decision" aria-label="Decision">
                    <option value="approve">"Approve and publish"</option>
                    <option value="reject">"Reject"</option>
                </select>
                <button type="submit" class="button">"Decide"</button>
            </div>
        </ActionForm>
    }
}

/// What the scan found, exactly as models would read it, and Accept.
#[component]
fn HeldForm(action: ServerAction<AcceptFindings>, tool: i64, held: HeldView) -> impl IntoView {
    let now = now_ms();
    view! {
        <div class="held-publish">
            <p>{format!("A publish of v{} by @{} is held, {}: what models read has", held.version, held.requested_by, ago(held.at_ms, now.max(held.at_ms)))}</p>
            <Findings findings=held.findings />
            <ActionForm action attr:class="stack accept-findings-form">
                <input type="hidden" name="tool" value=tool />
                <label>"Why this is fine (required; the author reads it)"
                    <textarea name="note" rows="2" required maxlength="1000"></textarea>
                </label>
                <button type="submit" class="button secondary">"Accept, so the author may publish"</button>
            </ActionForm>
        </div>
    }
}

/// What of a listing waits for review, in words; `None` when nothing does.
fn review_subject(item: &QueueItemView) -> Option<String> {
    match (item.pending_version, item.text_waiting) {
        (Some(v), true) => Some(format!("v{v} with a new title and description")),
        (Some(v), false) => Some(format!("v{v}")),
        (None, true) => Some("a new title and description".to_owned()),
        (None, false) => None,
    }
}

#[component]
fn Item(
    item: QueueItemView,
    act: ServerAction<Moderate>,
    review: ServerAction<ReviewVersion>,
    accept: ServerAction<AcceptFindings>,
) -> impl IntoView {
    let now = now_ms();
    let href = format!("/tools/{}/{}", item.department, item.name);
    view! {
        <li class="queue-item" data-listing=format!("{}/{}", item.department, item.name)>
            <div class="queue-head">
                <a href=href><strong>{item.title.clone()}</strong></a>
                <code class="small">{format!(" {}/{}", item.department, item.name)}</code>
                <span class="muted">" by " {item.owner.clone()}</span>
                <span class="badge" class:warn=item.status != "active">{item.status.clone()}</span>
            </div>
            {(!item.reports.is_empty()).then(|| view! {
                <ul class="reports">
                    {item.reports.iter().map(|r| view! {
                        <li class="report">
                            <span class="reason">{r.reason.clone()}</span>
                            <span class="muted small">{format!(" — @{}, {}", r.reporter, ago(r.at_ms, now.max(r.at_ms)))}</span>
                        </li>
                    }).collect_view()}
                </ul>
            })}
            {item.held.clone().map(|held| view! { <HeldForm action=accept tool=item.tool held /> })}
            {review_subject(&item).map(|what| view! { <ReviewForm action=review tool=item.tool what diff=item.review.clone() /> })}
            {(!item.reports.is_empty()).then(|| view! { <ModerateForm action=act tool=item.tool status=item.status.clone() /> })}
        </li>
    }
}

/// Listings that need an admin, oldest report first.
#[component]
pub fn Queue() -> impl IntoView {
    let act = ServerAction::<Moderate>::new();
    let review = ServerAction::<ReviewVersion>::new();
    let accept = ServerAction::<AcceptFindings>::new();
    let queue = Resource::new(move || (act.version().get(), review.version().get(), accept.version().get()), |_| moderation_queue());
    view! {
        <section class="card moderation-queue">
            <h2>"Moderation queue"</h2>
            {move || review.value().get().and_then(Result::err).map(|e| view! { <p class="alert error">{e.to_string()}</p> })}
            {move || accept.value().get().map(|r| match r {
                Ok(()) => view! { <p class="alert ok" role="status">"Accepted: the author may publish these texts now."</p> }.into_any(),
                Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
            })}
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match queue.await {
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                        Ok(items) if items.is_empty() => view! { <p class="muted queue-empty">"Nothing to moderate: no open reports, no versions waiting for review, no publishes held."</p> }.into_any(),
                        Ok(items) => view! {
                            <ul class="queue">
                                {items.into_iter().map(|item| view! { <Item item act review accept /> }).collect_view()}
                            </ul>
                        }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}
