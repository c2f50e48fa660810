//! The editor's draft autosave: edits are saved after a short pause, a failed
//! save is retried, leaving the page saves what is pending, and the browser
//! asks before a tab with unsaved text closes.

use leptos::prelude::*;

use super::{ago, now_ms};
use crate::api::SaveDraft;
use crate::args::ArgDef;

#[derive(Clone, Copy, PartialEq)]
pub enum SaveState {
    Saved(Option<i64>),
    Dirty,
    Saving,
    Failed,
}

/// Watches `code` and `defs` and saves them as tool `id`'s draft; the state
/// starts as saved at `autosaved_at`.
pub fn autosave(id: i64, code: RwSignal<String>, defs: Memo<Vec<ArgDef>>, autosaved_at: Option<i64>) -> RwSignal<SaveState> {
    let save_state = RwSignal::new(SaveState::Saved(autosaved_at));
    let save_draft = ServerAction::<SaveDraft>::new();
    let pending_timer = StoredValue::new(None::<TimeoutHandle>);
    let schedule_save = move || {
        save_state.set(SaveState::Dirty);
        if let Some(h) = pending_timer.get_value() {
            h.clear();
        }
        let handle = set_timeout_with_handle(
            move || {
                save_state.set(SaveState::Saving);
                save_draft.dispatch(SaveDraft { tool: id, code: code.get_untracked(), args: defs.get_untracked() });
            },
            std::time::Duration::from_millis(700),
        )
        .ok();
        pending_timer.set_value(handle);
    };
    // Leaving the page (client-side) within the debounce: save now, not never,
    // and not from a timer that would find this page's signals gone.
    on_cleanup(move || {
        if let Some(h) = pending_timer.try_get_value().flatten() {
            h.clear();
            if let (Some(SaveState::Dirty), Some(code), Some(args)) =
                (save_state.try_get_untracked(), code.try_get_untracked(), defs.try_get_untracked())
            {
                leptos::task::spawn_local(async move {
                    let _ = crate::api::save_draft(id, code, args).await;
                });
            }
        }
    });
    Effect::new(move |first: Option<()>| {
        code.track();
        defs.track();
        if first.is_some() {
            schedule_save();
        }
    });
    Effect::new(move |_| match save_draft.value().get() {
        Some(Ok(at)) if save_state.get_untracked() == SaveState::Saving => save_state.set(SaveState::Saved(Some(at))),
        Some(Err(_)) => {
            save_state.set(SaveState::Failed);
            // A network blip: try again shortly; the text stays in the editor meanwhile.
            set_timeout(
                move || {
                    if save_state.try_get_untracked() == Some(SaveState::Failed) {
                        schedule_save()
                    }
                },
                std::time::Duration::from_secs(3),
            );
        }
        _ => {}
    });
    // Warn before leaving with unsaved text.
    // The listener lives on the window, past this page: remove it with the page, or
    // the next `beforeunload` (a search form on Browse fires one) reads a disposed signal.
    #[cfg(feature = "hydrate")]
    {
        let unload = window_event_listener(leptos::ev::beforeunload, move |ev| {
            if matches!(save_state.try_get_untracked(), Some(SaveState::Dirty | SaveState::Saving | SaveState::Failed)) {
                ev.prevent_default();
            }
        });
        on_cleanup(move || unload.remove());
    }
    save_state
}

/// "Draft autosaved 2 min ago", "Saving draft…", …
#[component]
pub fn SaveStateBadge(state: RwSignal<SaveState>) -> impl IntoView {
    view! {
        <span class="save-state" data-state=move || match state.get() {
            SaveState::Saved(_) => "saved", SaveState::Dirty => "dirty", SaveState::Saving => "saving", SaveState::Failed => "failed" }>
            {move || match state.get() {
                SaveState::Saved(Some(at)) => format!("Draft autosaved {}", ago(at, now_ms().max(at))),
                SaveState::Saved(None) => "All changes saved".to_owned(),
                SaveState::Dirty => "Unsaved changes…".to_owned(),
                SaveState::Saving => "Saving draft…".to_owned(),
                SaveState::Failed => "Could not save the draft; retrying…".to_owned(),
            }}
        </span>
    }
}
