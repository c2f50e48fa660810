//! The editor's test cases: save the Run panel's arguments with a check, list
//! and delete them, run them all against the draft; and the failed calls a
//! case can be made from.

use leptos::prelude::*;

use super::failed_calls::FailedCallsCard;
use super::versions::TestResultItem;
use crate::api::{DeleteTestCase, RunTarget, RunTestCases, SaveTestCase, TestCaseView, TestCases};

/// What each check compares, as the form's labels say it.
const CHECKS: [(&str, &str); 5] = [
    ("succeeds", "runs without an error"),
    ("equals", "result equals"),
    ("contains", "result contains"),
    ("json_path", "value at a JSON path equals"),
    ("schema", "result matches a JSON Schema"),
];

/// The Test cases card and the Failed calls card under it. `run_input` is the
/// Run panel's arguments; `draft` is what the cases run against.
#[component]
pub fn TestCasesCards(tool: i64, cases: Vec<TestCaseView>, run_input: RwSignal<String>, draft: Callback<(), RunTarget>) -> impl IntoView {
    let id = tool;
    let cases = RwSignal::new(cases);
    let case_name = RwSignal::new(String::new());
    let case_expected = RwSignal::new(String::new());
    let case_check = RwSignal::new("succeeds".to_owned());
    let case_path = RwSignal::new(String::new());
    let save_case = ServerAction::<SaveTestCase>::new();
    let delete_case = ServerAction::<DeleteTestCase>::new();
    let list_cases = ServerAction::<TestCases>::new();
    let run_cases = ServerAction::<RunTestCases>::new();
    Effect::new(move |_| {
        if save_case.version().get() + delete_case.version().get() > 0 {
            list_cases.dispatch(TestCases { tool: id });
        }
    });
    // A saved case is in the list: the form is ready for the next one.
    Effect::new(move |_| {
        if let Some(Ok(())) = save_case.value().get() {
            case_name.set(String::new());
            case_expected.set(String::new());
            case_path.set(String::new());
        }
    });
    Effect::new(move |_| {
        if let Some(Ok(list)) = list_cases.value().get() {
            cases.set(list);
        }
    });
    let save = move |_| {
        let check = case_check.get_untracked();
        let expected = Some(case_expected.get_untracked()).filter(|e| !e.is_empty() && check != "succeeds");
        let path = Some(case_path.get_untracked()).filter(|p| !p.is_empty() && check == "json_path");
        save_case.dispatch(SaveTestCase {
            tool: id,
            name: case_name.get_untracked(),
            args: run_input.get_untracked(),
            check,
            path,
            expected,
            from_call: None,
        });
    };
    view! {
        <section class="card">
            <h2>"Test cases"</h2>
            <div class="stack tight">
                <input placeholder="Name these arguments" aria-label="Test case name" maxlength="80" prop:value=move || case_name.get()
                    on:input=move |ev| case_name.set(event_target_value(&ev)) />
                <label class="small">"Check"
                    <select aria-label="Check" prop:value=move || case_check.get() on:change=move |ev| case_check.set(event_target_value(&ev))>
                        {CHECKS.into_iter().map(|(value, label)| view! { <option value=value>{label}</option> }).collect_view()}
                    </select>
                </label>
                <Show when=move || case_check.get() == "json_path">
                    <input class="mono" placeholder="$.total" aria-label="JSON path" prop:value=move || case_path.get()
                        on:input=move |ev| case_path.set(event_target_value(&ev)) />
                </Show>
                <Show when=move || case_check.get() != "succeeds">
                    <ExpectedInput check=case_check expected=case_expected />
                </Show>
                <button type="button" class="button secondary small" on:click=save>"Save the Run arguments as a test case"</button>
                {move || save_case.value().get().and_then(Result::err).map(|e| view! { <p class="alert error">{e.to_string()}</p> })}
            </div>
            <ul class="test-cases">
                {move || cases.get().into_iter().map(|c| {
                    let case_id = c.id;
                    view! {
                        <li>
                            <strong>{c.name.clone()}</strong>
                            <code class="small">{c.args.replace('\n', " ")}</code>
                            {c.expected.clone().map(|e| view! { <span class="muted small">" → " {e}</span> })}
                            {c.recorded.then(|| view! { <span class="pill" title="$fetch answers from the failed call it was made from: no network">"recorded $fetch"</span> })}
                            <button type="button" class="link-button danger" on:click=move |_| { delete_case.dispatch(DeleteTestCase { tool: id, case: case_id }); }>"delete"</button>
                        </li>
                    }
                }).collect_view()}
            </ul>
            <button type="button" class="button small" disabled=move || cases.with(Vec::is_empty) || run_cases.pending().get()
                on:click=move |_| { run_cases.dispatch(RunTestCases { tool: id, target: draft.run(()) }); }>
                {move || if run_cases.pending().get() { "Running…" } else { "Run all test cases" }}
            </button>
            {move || run_cases.value().get().map(|r| match r {
                Ok(results) => {
                    let passed = results.iter().filter(|r| r.passed).count();
                    let total = results.len();
                    view! {
                        <p class=if passed == total { "alert ok" } else { "alert error" }>{format!("{passed} of {total} passed")}</p>
                        <ul class="test-results">
                            {results.into_iter().map(|r| view! { <TestResultItem result=r /> }).collect_view()}
                        </ul>
                    }.into_any()
                }
                Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
            })}
        </section>
        <FailedCallsCard tool=id target=draft on_test_saved=move |_| { list_cases.dispatch(TestCases { tool: id }); } />
    }
}

/// What the result is compared with, labelled for the chosen check.
#[component]
fn ExpectedInput(check: RwSignal<String>, expected: RwSignal<String>) -> impl IntoView {
    view! {
        <textarea class="mono" rows="2" aria-label=move || match check.get().as_str() {
                "contains" => "Text the result contains",
                "json_path" => "Value expected at the path (JSON)",
                "schema" => "JSON Schema the result matches",
                _ => "Expected result",
            }
            placeholder=move || match check.get().as_str() {
                "contains" => "text the result contains",
                "json_path" => "3, \"text\" or [1, 2]",
                "schema" => "{\"type\": \"object\", \"required\": [\"total\"]}",
                _ => "the whole result",
            }
            prop:value=move || expected.get() on:input=move |ev| expected.set(event_target_value(&ev))></textarea>
    }
}
