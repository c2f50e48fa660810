//! The Run panel: a form generated from the arguments (or raw JSON), prefilled
//! with mock values; one click runs the tool and shows result, console,
//! duration, memory and errors.

use leptos::prelude::*;
use serde_json::{Map, Value};

use crate::api::{ConsoleView, FetchView, MockArguments, QuestionField, QuestionView, RunTarget, RunTool, RunView};
use crate::args::{ArgDef, ArgType};
use crate::components::WithConnectLink;

fn parse_object(text: &str) -> Map<String, Value> {
    serde_json::from_str::<Value>(text).ok().and_then(|v| v.as_object().cloned()).unwrap_or_default()
}

fn set_field(json: RwSignal<String>, name: &str, value: Option<Value>) {
    json.update(|text| {
        let mut obj = parse_object(text);
        match value {
            Some(v) => obj.insert(name.to_owned(), v),
            None => obj.remove(name),
        };
        *text = serde_json::to_string_pretty(&Value::Object(obj)).unwrap_or_default();
    });
}

/// One input per top-level argument; structured ones are edited as JSON.
#[component]
fn ArgField(def: ArgDef, json: RwSignal<String>) -> impl IntoView {
    let name = def.name.clone();
    let current = {
        let name = name.clone();
        move || parse_object(&json.get()).get(&name).cloned()
    };
    let label = format!("{}{}", def.name, if def.required { " *" } else { "" });
    let input = match def.ty.clone() {
        ArgType::Boolean => {
            let n = name.clone();
            view! {
                <input type="checkbox" prop:checked=move || current().and_then(|v| v.as_bool()).unwrap_or(false)
                    on:change=move |ev| set_field(json, &n, Some(Value::Bool(event_target_checked(&ev)))) />
            }
            .into_any()
        }
        ArgType::Enum => {
            let n = name.clone();
            let options = def.enum_values.clone();
            view! {
                <select prop:value=move || current().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
                    on:change=move |ev| set_field(json, &n, Some(Value::String(event_target_value(&ev))))>
                    {options.into_iter().map(|o| view! { <option value=o.clone()>{o.clone()}</option> }).collect_view()}
                </select>
            }
            .into_any()
        }
        ArgType::Number | ArgType::Integer => {
            let n = name.clone();
            let integer = matches!(def.ty, ArgType::Integer);
            view! {
                <input type="number" step=if integer { "1" } else { "any" }
                    prop:value=move || current().map(|v| v.to_string()).unwrap_or_default()
                    on:input=move |ev| {
                        let raw = event_target_value(&ev);
                        set_field(json, &n, serde_json::from_str::<Value>(&raw).ok());
                    } />
            }
            .into_any()
        }
        ArgType::String => {
            let n = name.clone();
            view! {
                <input prop:value=move || current().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
                    on:input=move |ev| set_field(json, &n, Some(Value::String(event_target_value(&ev)))) />
            }
            .into_any()
        }
        ArgType::Array { .. } | ArgType::Object { .. } => {
            let n = name.clone();
            view! {
                <textarea class="mono" rows="4"
                    prop:value=move || current().map(|v| serde_json::to_string_pretty(&v).unwrap_or_default()).unwrap_or_default()
                    on:change=move |ev| {
                        if let Ok(v) = serde_json::from_str::<Value>(&event_target_value(&ev)) {
                            set_field(json, &n, Some(v));
                        }
                    }></textarea>
            }
            .into_any()
        }
    };
    view! {
        <label class="arg-field">
            <span>{label} <small class="muted">{def.description.clone()}</small></span>
            {input}
        </label>
    }
}

/// The result of a run, as people read it.
#[component]
pub fn RunResult(run: RunView) -> impl IntoView {
    let raw = RwSignal::new(false);
    let memory = format!("{:.1} MiB peak", run.peak_memory_bytes as f64 / (1024.0 * 1024.0));
    let duration = format!("{:.1} ms", run.duration_ms);
    let version = run.version.map(|v| format!("v{v}")).unwrap_or_else(|| "draft".into());
    let body = match (&run.error, run.kind.as_str()) {
        // The message is one sentence that already names the error and its line.
        (Some(e), _) => view! { <div class="alert error run-error" data-kind=e.kind.clone()>{e.message.clone()}</div> }.into_any(),
        (None, "json") => view! { <pre class="result json" tabindex="0">{run.result.clone()}</pre> }.into_any(),
        (None, _) => {
            let html = run.result_html.clone().unwrap_or_default();
            let text = run.result.clone();
            view! {
                <div class="result-head">
                    <button type="button" class="link-button" on:click=move |_| raw.update(|r| *r = !*r)>
                        {move || if raw.get() { "Show rendered" } else { "Show raw text" }}
                    </button>
                </div>
                {move || if raw.get() {
                    view! { <pre class="result text" tabindex="0">{text.clone()}</pre> }.into_any()
                } else {
                    view! { <div class="result markdown" inner_html=html.clone()></div> }.into_any()
                }}
            }
            .into_any()
        }
    };
    let console = run.console.clone();
    let fetches = (!run.fetches.is_empty()).then(|| {
        let fetches = run.fetches.clone();
        view! { <h4>"$fetch"</h4> <FetchList fetches /> }
    });
    view! {
        <div class="run-result">
            <div class="run-meta">
                <span class=if run.error.is_some() { "pill bad" } else { "pill good" }>{if run.error.is_some() { "failed" } else { "ok" }}</span>
                <span>{version}</span>
                <span>{duration}</span>
                <span>{memory}</span>
            </div>
            {body}
            {fetches}
            <h4>"Console"</h4>
            <ConsoleLines console />
        </div>
    }
}

/// A run's `$fetch` requests and what answered them; bodies unfold.
#[component]
pub fn FetchList(fetches: Vec<FetchView>) -> impl IntoView {
    view! {
        <ol class="fetches">
            {fetches.into_iter().map(|f| {
                let answer = match (f.status, &f.error) {
                    (Some(status), _) => view! { <span class=if (200..300).contains(&status) { "pill good" } else { "pill bad" }>{status}</span> }.into_any(),
                    (None, error) => view! { <span class="pill bad" title=error.clone()>"no response"</span> }.into_any(),
                };
                view! {
                    <li class="fetch">
                        <details>
                            <summary><span class="mono">{format!("{} {}", f.method, f.url)}</span> " " {answer}</summary>
                            {f.request_body.map(|b| view! { <p class="small muted">"Request body"</p> <pre class="mono small">{b}</pre> })}
                            {f.error.map(|e| view! { <p class="alert error small">{e}</p> })}
                            {f.response_body.map(|b| view! { <p class="small muted">"Response body"</p> <pre class="mono small">{b}</pre> })}
                            {f.truncated.then(|| view! { <p class="muted small">"Cut to keep the recording small."</p> })}
                        </details>
                    </li>
                }
            }).collect_view()}
        </ol>
    }
}

/// A call's console output, as a terminal shows it.
#[component]
pub fn ConsoleLines(console: Vec<ConsoleView>) -> impl IntoView {
    if console.is_empty() {
        view! { <p class="muted small">"No console output."</p> }.into_any()
    } else {
        view! {
            <ol class="console">
                {console.into_iter().map(|c| view! {
                    <li class=format!("console-line {}", c.level)>
                        <span class="console-time">{format!("{:>5} ms", c.elapsed_ms)}</span>
                        <span class="console-level">{c.level.clone()}</span>
                        <span class="console-message">{c.message.clone()}</span>
                    </li>
                }).collect_view()}
            </ol>
        }
        .into_any()
    }
}

/// What the tool asked, as forms: one per question, answered (accept with the
/// fields, or decline) into `answers` under its key, with the question it
/// answers; `answered` then runs the tool again with every answer so far.
#[component]
fn Questions(questions: Vec<QuestionView>, answers: RwSignal<Map<String, Value>>, answered: Callback<()>) -> impl IntoView {
    let count = questions.len();
    let given = RwSignal::new(0usize);
    let reply = move |(key, question): (String, String), answer: Value| {
        answers.update(|a| {
            a.insert(key, serde_json::json!({"question": question, "answer": answer}));
        });
        given.update(|n| *n += 1);
        if given.get_untracked() >= count {
            answered.run(());
        }
    };
    view! {
        <div class="questions" role="group" aria-label="The tool asks">
            {questions.into_iter().map(|q| {
                let values = RwSignal::new(Map::<String, Value>::new());
                for f in &q.fields {
                    // An unticked box is an answer too: `false`.
                    let start = f.default.clone().or_else(|| (f.kind == "boolean").then_some(Value::Bool(false)));
                    if let Some(start) = start {
                        values.update(|v| { v.insert(f.name.clone(), start); });
                    }
                }
                let done = RwSignal::new(false);
                let accept_key = (q.key.clone(), q.question.clone());
                let decline_key = accept_key.clone();
                view! {
                    <form class="question card" data-key=q.key.clone()
                        on:submit=move |ev| {
                            ev.prevent_default();
                            done.set(true);
                            reply(accept_key.clone(), serde_json::json!({"action": "accept", "content": values.get_untracked()}));
                        }>
                        <p class="question-message"><strong>{q.message.clone()}</strong></p>
                        {q.fields.into_iter().map(|f| view! { <QuestionInput field=f values /> }).collect_view()}
                        <div class="question-actions">
                            <button type="submit" class="button" disabled=move || done.get()>"Answer"</button>
                            <button type="button" class="button secondary" disabled=move || done.get()
                                on:click=move |_| {
                                    done.set(true);
                                    reply(decline_key.clone(), serde_json::json!({"action": "decline"}));
                                }>"Decline"</button>
                        </div>
                    </form>
                }
            }).collect_view()}
        </div>
    }
}

#[component]
fn QuestionInput(field: QuestionField, values: RwSignal<Map<String, Value>>) -> impl IntoView {
    let name = field.name.clone();
    let set = move |value: Option<Value>| {
        values.update(|v| {
            match value {
                Some(value) => v.insert(name.clone(), value),
                None => v.remove(&name),
            };
        })
    };
    let current = {
        let name = field.name.clone();
        move || values.get().get(&name).cloned()
    };
    let input = match field.kind.as_str() {
        "boolean" => view! {
            <input type="checkbox" prop:checked=move || current().and_then(|v| v.as_bool()).unwrap_or(false)
                on:change=move |ev| set(Some(Value::Bool(event_target_checked(&ev)))) />
        }
        .into_any(),
        // Options go by position: their values may be numbers, not only text.
        "choice" => {
            let options = field.options.clone();
            let position = {
                let options = options.clone();
                move || current().and_then(|v| options.iter().position(|(o, _)| *o == v)).map(|i| i.to_string()).unwrap_or_default()
            };
            view! {
                <select required=field.required prop:value=position
                    on:change=move |ev| set(event_target_value(&ev).parse::<usize>().ok().and_then(|i| options.get(i)).map(|(v, _)| v.clone()))>
                    <option value="">"Choose…"</option>
                    {field.options.iter().enumerate().map(|(i, (_, label))| view! { <option value=i.to_string()>{label.clone()}</option> }).collect_view()}
                </select>
            }
            .into_any()
        }
        "choices" => view! {
            <span class="choices">
                {field.options.iter().map(|(value, label)| {
                    let (value, toggled) = (value.clone(), value.clone());
                    let (current, set) = (current.clone(), set.clone());
                    let picked = move || current().and_then(|v| v.as_array().cloned()).unwrap_or_default();
                    let now = picked.clone();
                    view! {
                        <label class="choice inline">
                            <input type="checkbox" prop:checked=move || picked().contains(&value)
                                on:change=move |ev| {
                                    let mut items: Vec<Value> = now().into_iter().filter(|v| *v != toggled).collect();
                                    if event_target_checked(&ev) {
                                        items.push(toggled.clone());
                                    }
                                    set(Some(Value::Array(items)));
                                } />
                            " " {label.clone()}
                        </label>
                    }
                }).collect_view()}
            </span>
        }
        .into_any(),
        kind @ ("number" | "integer") => {
            let step = if kind == "integer" { "1" } else { "any" };
            view! {
                <input type="number" step=step required=field.required
                    prop:value=move || current().map(|v| v.to_string()).unwrap_or_default()
                    on:input=move |ev| set(serde_json::from_str::<Value>(&event_target_value(&ev)).ok()) />
            }
            .into_any()
        }
        _ => view! {
            <input required=field.required prop:value=move || current().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
                on:input=move |ev| set(Some(Value::String(event_target_value(&ev)))) />
        }
        .into_any(),
    };
    let caption = view! {
        <span>{format!("{}{}", field.label, if field.required { " *" } else { "" })} " " <small class="muted">{field.description.clone()}</small></span>
    };
    // A multi-select is a group of labelled boxes; a label may not hold labels.
    if field.kind == "choices" {
        view! { <fieldset class="arg-field"><legend>{caption}</legend>{input}</fieldset> }.into_any()
    } else {
        view! { <label class="arg-field">{caption}{input}</label> }.into_any()
    }
}

/// `target` is read when Run is clicked (the editor passes its current draft).
#[component]
pub fn RunPanel(
    tool: i64,
    #[prop(into)] args: Signal<Vec<ArgDef>>,
    #[prop(into)] target: Callback<(), RunTarget>,
    #[prop(into, optional)] on_result: Option<Callback<RunView>>,
    /// Where the JSON arguments live, so a parent can save them as a test case.
    #[prop(optional)]
    input: Option<RwSignal<String>>,
) -> impl IntoView {
    let json = input.unwrap_or_else(|| RwSignal::new("{}".to_owned()));
    let as_json = RwSignal::new(false);
    let mock = ServerAction::<MockArguments>::new();
    let run = ServerAction::<RunTool>::new();
    // The person's answers to what this run of the tool asked so far.
    let answers = RwSignal::new(Map::<String, Value>::new());
    let dispatch = move || {
        // A round with answers goes on under the approval the run that asked was admitted with.
        let approval = match answers.with_untracked(Map::is_empty) {
            true => None,
            false => run.value().get_untracked().and_then(Result::ok).and_then(|asked| asked.approval),
        };
        let answers = serde_json::to_string(&answers.get_untracked()).unwrap_or_default();
        let (input, approval) = (json.get_untracked(), approval.unwrap_or_default());
        run.dispatch(RunTool { tool, target: target.run(()), input, answers, approval });
    };

    // Prefill with mock values whenever the argument definitions change.
    Effect::new(move |_| {
        mock.dispatch(MockArguments { args: args.get() });
    });
    Effect::new(move |_| {
        if let Some(Ok(text)) = mock.value().get() {
            json.set(text);
        }
    });
    Effect::new(move |_| {
        if let (Some(Ok(view)), Some(cb)) = (run.value().get(), on_result) {
            cb.run(view);
        }
    });

    view! {
        <div class="run-panel">
            <div class="run-tabs">
                <button type="button" class:active=move || !as_json.get() on:click=move |_| as_json.set(false)>"Form"</button>
                <button type="button" class:active=move || as_json.get() on:click=move |_| as_json.set(true)>"JSON"</button>
                <button type="button" class="link-button" on:click=move |_| { mock.dispatch(MockArguments { args: args.get_untracked() }); }>
                    "Reset to mock values"
                </button>
            </div>
            {move || if as_json.get() {
                view! {
                    <textarea class="mono run-json" rows="8" prop:value=move || json.get()
                        on:input=move |ev| json.set(event_target_value(&ev))></textarea>
                }.into_any()
            } else {
                view! {
                    <div class="arg-fields">
                        {move || {
                            let defs = args.get();
                            if defs.is_empty() {
                                view! { <p class="muted small">"This tool takes no arguments."</p> }.into_any()
                            } else {
                                defs.into_iter().map(|d| view! { <ArgField def=d json /> }).collect_view().into_any()
                            }
                        }}
                    </div>
                }.into_any()
            }}
            <button type="button" class="button run-button" disabled=move || run.pending().get()
                on:click=move |_| {
                    answers.set(Map::new());
                    dispatch();
                }>
                {move || if run.pending().get() { "Running…" } else { "▶ Run" }}
            </button>
            <noscript><p class="muted small">"Running a tool from this page needs JavaScript; its MCP endpoint works without."</p></noscript>
            {move || run.value().get().map(|r| match r {
                Ok(view) if !view.questions.is_empty() => {
                    view! { <Questions questions=view.questions answers answered=Callback::new(move |()| dispatch()) /> }.into_any()
                }
                Ok(view) => view! { <RunResult run=view /> }.into_any(),
                Err(e) => view! { <p class="alert error"><WithConnectLink text=e.to_string() /></p> }.into_any(),
            })}
        </div>
    }
}
