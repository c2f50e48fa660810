//! The visual argument editor: rows of name, type, description, required, sensitive,
//! default, enum values and example; nested rows for objects. Rows can be
//! added, removed and moved. Keyed rendering keeps focus while typing.

use leptos::prelude::*;

use crate::args::{find_mut, parent_list_mut, Row, ITEM_TYPES, TYPES};

fn edit(rows: RwSignal<Vec<Row>>, key: u64, f: impl FnOnce(&mut Row)) {
    rows.update(|all| {
        if let Some(r) = find_mut(all, key) {
            f(r)
        }
    });
}

fn read<T>(rows: RwSignal<Vec<Row>>, key: u64, f: impl Fn(&Row) -> T) -> Option<T> {
    fn find(rows: &[Row], key: u64) -> Option<&Row> {
        rows.iter().find(|r| r.key == key).or_else(|| rows.iter().find_map(|r| find(&r.children, key)))
    }
    rows.with(|all| find(all, key).map(f))
}

fn move_row(rows: RwSignal<Vec<Row>>, key: u64, delta: isize) {
    rows.update(|all| {
        if let Some(list) = parent_list_mut(all, key) {
            if let Some(i) = list.iter().position(|r| r.key == key) {
                let j = i as isize + delta;
                if j >= 0 && (j as usize) < list.len() {
                    list.swap(i, j as usize);
                }
            }
        }
    });
}

fn remove_row(rows: RwSignal<Vec<Row>>, key: u64) {
    rows.update(|all| {
        if let Some(list) = parent_list_mut(all, key) {
            list.retain(|r| r.key != key);
        }
    });
}

/// A fresh name that does not clash with its siblings: arg1, arg2, …
fn fresh_name(siblings: &[Row]) -> String {
    (1..).map(|i| format!("arg{i}")).find(|n| !siblings.iter().any(|r| &r.name == n)).unwrap_or_default()
}

/// The default or the example of a row: both hold a value of the row's type.
#[derive(Clone, Copy)]
enum Value {
    Default,
    Example,
}

impl Value {
    fn of(self, row: &Row) -> &String {
        match self {
            Value::Default => &row.default,
            Value::Example => &row.example,
        }
    }

    fn of_mut(self, row: &mut Row) -> &mut String {
        match self {
            Value::Default => &mut row.default,
            Value::Example => &mut row.example,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Value::Default => "Default",
            Value::Example => "Example",
        }
    }
}

/// A row's default or example: a true/false choice for booleans, typed text otherwise.
/// Its label names the argument, so it still says what it is once the field is filled.
#[component]
fn ValueInput(rows: RwSignal<Vec<Row>>, key: u64, which: Value, boolean: Memo<bool>, label: Signal<String>) -> impl IntoView {
    let word = which.label().to_lowercase();
    let class = format!("arg-{word} mono");
    let aria = move || format!("{} of {}", which.label(), label.get());
    // The text as it is now: the field is created again when the type changes.
    let current = move || untrack(|| read(rows, key, |r| which.of(r).clone()).unwrap_or_default());
    let set = move |ev: leptos::ev::Event| edit(rows, key, |r| *which.of_mut(r) = event_target_value(&ev));
    move || {
        if boolean.get() {
            let now = current();
            view! {
                <select class=class.clone() aria-label=aria on:change=set>
                    <option value="" selected=now.is_empty()>{format!("no {word}")}</option>
                    <option value="true" selected=now == "true">"true"</option>
                    <option value="false" selected=now == "false">"false"</option>
                </select>
            }
            .into_any()
        } else {
            view! { <input class=class.clone() placeholder=word.clone() aria-label=aria value=current() on:input=set /> }.into_any()
        }
    }
}

#[component]
fn RowEditor(rows: RwSignal<Vec<Row>>, key: u64, depth: usize) -> impl IntoView {
    let initial = read(rows, key, Clone::clone).unwrap_or_else(|| Row::new(""));
    let ty = Memo::new(move |_| read(rows, key, |r| r.ty.clone()).unwrap_or_default());
    let boolean = Memo::new(move |_| ty.get() == "boolean");
    // What screen readers call the row's fields and buttons: its name as typed.
    let label = Signal::derive(move || {
        read(rows, key, |r| r.name.trim().to_owned()).filter(|n| !n.is_empty()).unwrap_or_else(|| "the unnamed argument".into())
    });
    let has_children = move || read(rows, key, Row::has_children).unwrap_or(false);
    let children = move || read(rows, key, |r| r.children.iter().map(|c| c.key).collect::<Vec<_>>()).unwrap_or_default();
    let set_type = move |ev: leptos::ev::Event| {
        edit(rows, key, |r| {
            r.ty = event_target_value(&ev);
            // A boolean's value is chosen from true and false: drop text that is neither.
            if r.ty == "boolean" {
                for which in [Value::Default, Value::Example] {
                    let value = which.of_mut(r);
                    if !matches!(value.trim(), "true" | "false") {
                        value.clear();
                    }
                }
            }
        })
    };
    view! {
        <div class="arg-row" style=format!("margin-left: {}rem", depth as f32 * 1.5) data-row=key>
            <div class="arg-row-main">
                <input class="arg-name mono" placeholder="name" value=initial.name.clone() aria-label="Argument name"
                    on:input=move |ev| edit(rows, key, |r| r.name = event_target_value(&ev)) />
                <select class="arg-type" aria-label=move || format!("Type of {}", label.get()) on:change=set_type>
                    {TYPES.iter().map(|t| view! { <option value=*t selected=initial.ty == *t>{*t}</option> }).collect_view()}
                </select>
                <Show when=move || ty.get() == "array">
                    <select class="arg-item-type" aria-label=move || format!("Item type of {}", label.get())
                        on:change=move |ev| edit(rows, key, |r| r.item_ty = event_target_value(&ev))>
                        {ITEM_TYPES.iter().map(|t| view! { <option value=*t selected=initial.item_ty == *t>{format!("of {t}")}</option> }).collect_view()}
                    </select>
                </Show>
                <label class="inline">
                    <input type="checkbox" checked=initial.required on:change=move |ev| edit(rows, key, |r| r.required = event_target_checked(&ev)) />
                    "required"
                </label>
                <label class="inline" title="Redacted wherever a call is kept (failed calls); writeOnly in the JSON Schema">
                    <input type="checkbox" checked=initial.sensitive aria-label=move || format!("{} is sensitive", label.get())
                        on:change=move |ev| edit(rows, key, |r| r.sensitive = event_target_checked(&ev)) />
                    "sensitive"
                </label>
                <span class="row-actions">
                    <button type="button" title="Move up" aria-label=move || format!("Move {} up", label.get()) on:click=move |_| move_row(rows, key, -1)>"↑"</button>
                    <button type="button" title="Move down" aria-label=move || format!("Move {} down", label.get()) on:click=move |_| move_row(rows, key, 1)>"↓"</button>
                    <button type="button" title="Remove" aria-label=move || format!("Remove {}", label.get()) class="danger" on:click=move |_| remove_row(rows, key)>"✕"</button>
                </span>
            </div>
            <div class="arg-row-details">
                <input class="arg-description" placeholder="description (models read it)" value=initial.description.clone()
                    aria-label=move || format!("Description of {}", label.get())
                    on:input=move |ev| edit(rows, key, |r| r.description = event_target_value(&ev)) />
                <Show when=move || ty.get() == "enum">
                    <input class="arg-enum" placeholder="values: a, b, c" aria-label=move || format!("Values of {} (comma-separated)", label.get())
                        value=untrack(|| read(rows, key, |r| r.enum_values.clone())).unwrap_or_default()
                        on:input=move |ev| edit(rows, key, |r| r.enum_values = event_target_value(&ev)) />
                </Show>
                <Show when=move || ty.get() != "object">
                    <ValueInput rows key which=Value::Default boolean label />
                    <ValueInput rows key which=Value::Example boolean label />
                </Show>
            </div>
            <Show when=has_children>
                <For each=children key=|k| *k let:child>
                    <RowEditorBoxed rows key=child depth=depth + 1 />
                </For>
                <button type="button" class="link-button add-field" style=format!("margin-left: {}rem", (depth + 1) as f32 * 1.5)
                    on:click=move |_| edit(rows, key, |r| { let name = fresh_name(&r.children); r.children.push(Row::new(&name)) })>
                    "+ Add field"
                </button>
            </Show>
        </div>
    }
}

/// Recursion through a boxed view keeps the component's type finite.
#[component]
fn RowEditorBoxed(rows: RwSignal<Vec<Row>>, key: u64, depth: usize) -> impl IntoView {
    view! { <RowEditor rows key depth /> }.into_any()
}

#[component]
pub fn ArgsEditor(rows: RwSignal<Vec<Row>>) -> impl IntoView {
    let top = move || rows.with(|r| r.iter().map(|r| r.key).collect::<Vec<_>>());
    view! {
        <div class="args-editor">
            <Show when=move || rows.with(Vec::is_empty)>
                <p class="muted small">"No arguments. Add one, or paste a JSON Schema below."</p>
            </Show>
            <For each=top key=|k| *k let:key>
                <RowEditorBoxed rows key depth=0 />
            </For>
            <button type="button" class="button secondary small add-arg"
                on:click=move |_| rows.update(|r| { let name = fresh_name(r); r.push(Row::new(&name)) })>
                "+ Add argument"
            </button>
        </div>
    }
}
