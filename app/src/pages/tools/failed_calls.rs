//! Failed calls of a tool (the last 14 days), for its editors: the error, the
//! arguments, what the code printed and fetched; Replay runs the draft with
//! those arguments while `$fetch` answers from the recording (no network),
//! and a replay that now succeeds is saved as a test case in one click.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::run_panel::{ConsoleLines, FetchList, RunResult};
use super::{ago, now_ms};
use crate::api::{FailedCall, FailedCallView, FailedCalls, ReplayFailedCall, RunTarget, SaveTestCase};

#[component]
pub fn FailedCallsCard(
    tool: i64,
    /// The editor's draft, read when Replay is clicked.
    #[prop(into)]
    target: Callback<(), RunTarget>,
    /// A replay was saved as a test case.
    #[prop(into)]
    on_test_saved: Callback<()>,
) -> impl IntoView {
    let list = ServerAction::<FailedCalls>::new();
    let open = ServerAction::<FailedCall>::new();
    let replay = ServerAction::<ReplayFailedCall>::new();
    let save = ServerAction::<SaveTestCase>::new();
    let input = RwSignal::new(String::new());
    let query = use_query_map();
    Effect::new(move |_| {
        list.dispatch(FailedCalls { tool });
        // `?replay=ID` (a link to a failed call) opens it straight away.
        if let Some(call) = query.read_untracked().get("replay").and_then(|c| c.parse().ok()) {
            open.dispatch(FailedCall { tool, call });
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(call)) = open.value().get() {
            input.set(call.args.clone());
            replay.value().set(None);
            save.value().set(None);
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(())) = save.value().get() {
            on_test_saved.run(());
        }
    });

    let calls = move || {
        list.value().get().map(|r| match r {
            Ok(calls) if calls.is_empty() => view! { <p class="muted small">"No failed calls in the last 14 days."</p> }.into_any(),
            Ok(calls) => view! {
                <ul class="failed-calls">
                    {calls.into_iter().map(|c| {
                        let call = c.id;
                        view! {
                            <li data-call=call>
                                <span class="failed-error">{c.error.clone()}</span>
                                <span class="muted small">{format!("{} · {} · v{} · {}", c.caller, c.transport, c.version, ago(c.at_ms, now_ms().max(c.at_ms)))}</span>
                                <button type="button" class="button secondary small" on:click=move |_| { open.dispatch(FailedCall { tool, call }); }>"Replay"</button>
                            </li>
                        }
                    }).collect_view()}
                </ul>
            }
            .into_any(),
            Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
        })
    };
    let detail = move || {
        open.value().get().map(|r| match r {
            Ok(call) => view! { <Replay tool call input target replay save /> }.into_any(),
            Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
        })
    };
    view! {
        <section class="card">
            <h2>"Failed calls"</h2>
            <p class="muted small">
                "Calls whose code failed in the last 14 days, with their arguments, console and " <code>"$fetch"</code>
                " answers (secrets and sensitive arguments redacted). Replay runs the draft against the recorded answers, never the network."
            </p>
            {move || if list.pending().get() { Some(view! { <p class="muted small">"Loading failed calls…"</p> }) } else { None }}
            {calls}
            {detail}
        </section>
    }
}

/// One failed call, and its replays against the draft.
#[component]
fn Replay(
    tool: i64,
    call: FailedCallView,
    input: RwSignal<String>,
    target: Callback<(), RunTarget>,
    replay: ServerAction<ReplayFailedCall>,
    save: ServerAction<SaveTestCase>,
) -> impl IntoView {
    let id = call.id;
    let fetched = call.fetches.len();
    let any_fetched = fetched > 0;
    view! {
        <div class="replay" data-call=id>
            <h3>{format!("Call #{id}: v{} for {} over {}", call.version, call.caller, call.transport)}</h3>
            <p class="alert error">{call.error.clone()}</p>
            <details open=any_fetched>
                <summary>{format!("$fetch: {fetched} recorded")}</summary>
                <FetchList fetches=call.fetches.clone() />
            </details>
            <details>
                <summary>"Console"</summary>
                <ConsoleLines console=call.console.clone() />
            </details>
            <label class="small">"Arguments (JSON; put back a redacted value if the code needs it)"
                <textarea class="mono" rows="4" aria-label="Replay arguments" prop:value=move || input.get()
                    on:input=move |ev| input.set(event_target_value(&ev))></textarea>
            </label>
            <button type="button" class="button run-button" disabled=move || replay.pending().get()
                on:click=move |_| { replay.dispatch(ReplayFailedCall { tool, call: id, target: target.run(()), input: input.get_untracked() }); }>
                {move || if replay.pending().get() { "Replaying…" } else { "▶ Replay with the draft" }}
            </button>
            {move || replay.value().get().map(|r| match r {
                Ok(run) => {
                    let fixed = run.error.is_none();
                    let expected = run.result.clone();
                    view! {
                        <RunResult run />
                        <Show when=move || fixed>
                            {
                                let expected = expected.clone();
                                view! {
                                    <button type="button" class="button secondary small save-replay" disabled=move || save.pending().get()
                                        on:click=move |_| {
                                            save.dispatch(SaveTestCase {
                                                tool,
                                                name: format!("Failed call #{id}, fixed"),
                                                args: input.get_untracked(),
                                                check: "equals".into(),
                                                path: None,
                                                expected: Some(expected.clone()),
                                                from_call: Some(id),
                                            });
                                        }>"Save as a test case"</button>
                                }
                            }
                        </Show>
                    }
                    .into_any()
                }
                Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
            })}
            {move || save.value().get().map(|r| match r {
                Ok(()) => view! {
                    <p class="alert ok" role="status">{format!("Saved as the test case “Failed call #{id}, fixed”: it runs against this call's recorded $fetch answers.")}</p>
                }.into_any(),
                Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
            })}
        </div>
    }
}
