//! Bundle pages: the listing page (members, usage, versions, forks, Connect
//! panel) and the editor (search and add tools, pin or follow, order, rename,
//! save a version, publish or roll back).

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;

use crate::api::{
    bundle_candidates, bundle_detail, BundleExternalCandidates, BundleInfo, ExternalInput, ExternalView, ListingApiView, MemberInput,
    MemberView, Publish, SaveBundleVersion, SetCodeMode, ToolInfo, UsageView,
};
use crate::args::{ArgDef, ArgType};
use crate::components::RequireUser;
use crate::pages::market::UsageChart;
use crate::pages::tools::{
    ApiCard, ConnectPanel, Lineage, ListingActions, ListingHead, ListingPage, ModerationNotice, SettingsCard, VersionList, VersionsPanel,
};

/// The code-mode choices: value, label in the editor, what the endpoint serves.
const CODE_MODES: [(&str, &str, &str); 3] = [
    ("off", "Off: one MCP tool per member", "one MCP tool per member"),
    ("instead", "run_code instead of the tools", "run_code only (code mode), instead of the tools"),
    ("beside", "run_code beside the tools", "run_code (code mode) and every tool"),
];

fn code_mode_served(mode: &str) -> &'static str {
    CODE_MODES.iter().find(|(value, ..)| *value == mode).map_or(CODE_MODES[0].2, |(.., served)| served)
}

/// What the endpoint lists, for the Connect panel's debugger: the members,
/// and in code mode `run_code` (whose one argument is the code).
fn served_tools(info: &BundleInfo) -> Vec<(String, Vec<ArgDef>)> {
    let members = info.members.iter().filter(|m| m.unavailable.is_none()).map(|m| (m.exposed_name.clone(), m.args.clone()));
    let code = ArgDef {
        name: "code".into(),
        ty: ArgType::String,
        description: "The body of an async function: await tools.name(input), console.log the answer.".into(),
        required: true,
        default: None,
        enum_values: Vec::new(),
        example: None,
        sensitive: false,
    };
    let run_code = ("run_code".to_owned(), vec![code]);
    match info.listing.code_mode.as_str() {
        "instead" => vec![run_code],
        "beside" => members.chain([run_code]).collect(),
        _ => members.collect(),
    }
}

/// "v3 (pinned)" or "follows published: v4".
fn version_label(m: &MemberView) -> String {
    match (m.pinned_version, m.serves) {
        (Some(p), _) => format!("v{p} (pinned)"),
        (None, Some(s)) => format!("follows published: v{s}"),
        (None, None) => "follows published: none yet".into(),
    }
}

#[component]
fn MemberTable(members: Vec<MemberView>) -> impl IntoView {
    if members.is_empty() {
        return view! { <p class="muted">"No tools yet."</p> }.into_any();
    }
    view! {
        <table class="member-table">
            <thead><tr><th>"Name in the bundle"</th><th>"Tool"</th><th>"Version"</th><th></th></tr></thead>
            <tbody>
                {members.into_iter().map(|m| {
                    let label = version_label(&m);
                    let href = format!("/tools/{}", m.slug);
                    let visible = m.unavailable.as_deref() != Some("you may not see this tool");
                    view! {
                        <tr class:unavailable=m.unavailable.is_some()>
                            <td><code>{m.exposed_name.clone()}</code></td>
                            <td>{if visible { view! { <a href=href>{m.slug.clone()}</a> }.into_any() } else { view! { <span class="muted">{m.slug.clone()}</span> }.into_any() }}
                                <span class="muted">{format!(" {}", m.title)}</span></td>
                            <td>{label}</td>
                            <td>{m.unavailable.clone().map(|u| view! { <span class="badge warn">{format!("not served: {u}")}</span> })}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// A bundle's external tools; `remove` makes each row removable (the editor).
#[component]
fn ExternalTable(tools: Vec<ExternalView>, #[prop(optional)] remove: Option<Callback<usize>>) -> impl IntoView {
    if tools.is_empty() {
        return ().into_any();
    }
    view! {
        <h3>"External tools"</h3>
        <table class="member-table external-tools">
            <thead><tr><th>"Name in the bundle"</th><th>"External server"</th><th>"Description"</th><th></th></tr></thead>
            <tbody>
                {tools.into_iter().enumerate().map(|(i, t)| view! {
                    <tr data-external=t.exposed_name.clone() class:unavailable=t.unavailable.is_some()>
                        <td><code>{t.exposed_name.clone()}</code></td>
                        <td><span class="badge kind">{t.server.clone()}</span></td>
                        <td class="small">{t.description.clone()}</td>
                        <td>
                            {t.unavailable.clone().map(|u| view! { <span class="badge warn">{format!("not served: {u}")}</span> })}
                            {remove.map(|remove| view! {
                                <button type="button" class="link-button remove" title="Remove" aria-label=format!("Remove {}", t.exposed_name)
                                    on:click=move |_| remove.run(i)>"✕"</button>
                            })}
                        </td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

/// A search result's Add button: "Added", and disabled, while it is in the bundle.
#[component]
fn AddButton(class: &'static str, added: Signal<bool>, on_add: impl Fn() + Send + Sync + 'static) -> impl IntoView {
    view! {
        <button type="button" class=format!("button small {class}") disabled=added on:click=move |_| on_add()>
            {move || if added.get() { "Added" } else { "Add" }}
        </button>
    }
}

#[component]
fn BundlePage(info: BundleInfo, usage: UsageView, api: Option<ListingApiView>) -> impl IntoView {
    let tool = info.listing.clone();
    let served = served_tools(&info);
    view! {
        <ListingHead tool=tool.clone() />
        <div class="two-col">
            <div>
                <section class="card">
                    <div class="markdown" inner_html=tool.description_html.clone()></div>
                </section>
                <section class="card">
                    <h2>{if tool.published_version.is_some() { "Tools" } else { "Tools (not published yet)" }}</h2>
                    <MemberTable members=info.members.clone() />
                    <ExternalTable tools=info.external.clone() />
                </section>
                {api.map(|api| view! { <ApiCard api /> })}
                <section class="card">
                    <h2>"Usage through this bundle, last 30 days"</h2>
                    <UsageChart usage />
                </section>
                <VersionList tool=tool.clone() />
                <Lineage tool=tool.clone() />
            </div>
            <aside>
                <section class="card code-mode-status" data-code-mode=tool.code_mode.clone()>
                    <h2>"Code mode"</h2>
                    <p>"This endpoint serves " <strong>{code_mode_served(&tool.code_mode)}</strong> "."</p>
                    {(tool.code_mode != "off").then(|| view! {
                        <p class="muted small">
                            <code>"run_code"</code> " runs the model's JavaScript, which calls the tools as "
                            <code>"await tools.name(input)"</code> " (described by the TypeScript API below), within "
                            {format!("{} ms and {} MiB", tool.timeout_ms, tool.memory_mib)} ", with no network except through the tools."
                        </p>
                    })}
                </section>
                {if tool.published_version.is_some() {
                    view! { <ConnectPanel endpoint=tool.endpoint.clone() clients=tool.connect.clone() pinned=tool.published_version.map(|n| (n, tool.connect_pinned.clone())) tools=served /> }.into_any()
                } else {
                    view! { <section class="card"><p class="muted">"Publish a version to get an MCP endpoint."</p></section> }.into_any()
                }}
                <ListingActions tool=tool.clone() />
            </aside>
        </div>
    }
}

/// The editor's code-mode setting: a plain form, so it works before wasm loads.
#[component]
fn CodeModeCard(tool: RwSignal<ToolInfo>) -> impl IntoView {
    let set = ServerAction::<SetCodeMode>::new();
    Effect::new(move |_| {
        if let Some(Ok(fresh)) = set.value().get() {
            tool.set(fresh);
        }
    });
    let t = tool.get_untracked();
    view! {
        <section class="card code-mode">
            <h2>"Code mode"</h2>
            <p class="muted small">
                "Serve one tool, " <code>"run_code"</code> ", that runs the model's JavaScript against this bundle's tools ("
                <code>"await tools.name(input)"</code> "): several calls in one step, within the time and memory limits in the settings, with no network except through the tools. Connected clients are told the tool list changed."
            </p>
            <ActionForm action=set attr:class="stack">
                <input type="hidden" name="bundle" value=t.id />
                {CODE_MODES.iter().map(|(value, label, _)| view! {
                    <label class="inline"><input type="radio" name="mode" value=*value checked=t.code_mode == *value /> {*label}</label>
                }).collect_view()}
                <button type="submit" class="button secondary save-code-mode">"Save code mode"</button>
                {move || set.value().get().map(|r| match r {
                    Ok(t) => view! { <p class="alert ok">{format!("Code mode saved: the endpoint serves {}.", code_mode_served(&t.code_mode))}</p> }.into_any(),
                    Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
                })}
            </ActionForm>
        </section>
    }
}

#[component]
pub fn BundleListing() -> impl IntoView {
    view! {
        <ListingPage load=bundle_detail listing=|b: &BundleInfo| &b.listing render=|info, usage, api| view! { <BundlePage info usage api /> }.into_any() />
    }
}

#[component]
pub fn BundleEditor() -> impl IntoView {
    let params = use_params_map();
    let bundle = Resource::new(
        move || (params.read().get("department").unwrap_or_default(), params.read().get("name").unwrap_or_default()),
        |(d, n)| bundle_detail(d, n),
    );
    view! {
        <Title text="Bundle editor" />
        <RequireUser>
            <Suspense fallback=|| view! { <p class="muted">"Loading the editor…"</p> }>
                {move || Suspend::new(async move {
                    match bundle.await {
                        Ok(info) if info.listing.can_edit => view! { <Editor info /> }.into_any(),
                        Ok(_) => view! { <p class="alert error">"You may not change this bundle."</p> }.into_any(),
                        Err(_) => view! { <crate::pages::NotFound /> }.into_any(),
                    }
                })}
            </Suspense>
        </RequireUser>
    }
}

#[component]
fn Editor(info: BundleInfo) -> impl IntoView {
    let tool: RwSignal<ToolInfo> = RwSignal::new(info.listing.clone());
    let id = info.listing.id;
    let members = RwSignal::new(info.latest_members.clone());
    let external = RwSignal::new(info.latest_external.clone());
    let external_candidates = ServerAction::<BundleExternalCandidates>::new();
    let changelog = RwSignal::new(String::new());
    let save = ServerAction::<SaveBundleVersion>::new();
    let publish = ServerAction::<Publish>::new();
    let query = RwSignal::new(String::new());
    // Search results answer the newest question only: an older search that
    // answers late (the first, empty one starts on load) must never replace
    // the list the author is clicking in.
    let found = RwSignal::new(None::<Result<Vec<MemberView>, crate::error::AppError>>);
    let searching = RwSignal::new(false);
    let asked = StoredValue::new(0u64);
    let search = move |q: String| {
        let n = asked.get_value() + 1;
        asked.set_value(n);
        searching.set(true);
        leptos::task::spawn_local(async move {
            let answer = bundle_candidates(q).await;
            if asked.get_value() == n {
                found.set(Some(answer));
                searching.set(false);
            }
        });
    };
    Effect::new(move |_| {
        if let Some(Ok(fresh)) = publish.value().get() {
            tool.set(fresh);
        }
    });
    // A saved version shows up in the versions list: reload the listing.
    Effect::new(move |_| {
        if let Some(Ok(_)) = save.value().get() {
            let (d, n) = tool.with_untracked(|t| (t.department.clone(), t.name.clone()));
            leptos::task::spawn_local(async move {
                if let Ok(fresh) = bundle_detail(d, n).await {
                    tool.set(fresh.listing);
                }
            });
        }
    });
    // Effects run in the browser only: dispatching while rendering on the server
    // would race the render, and the page could hydrate against other HTML.
    Effect::new(move |_| {
        search(String::new());
        external_candidates.dispatch(BundleExternalCandidates { bundle: id });
    });
    let external_inputs = move || external.get_untracked().into_iter().map(|e| ExternalInput { server: e.server, tool: e.tool }).collect();
    let inputs = move || {
        members
            .get_untracked()
            .into_iter()
            .map(|m| MemberInput { tool: m.tool, pinned_version: m.pinned_version, exposed_name: m.exposed_name })
            .collect()
    };
    let move_member = move |i: usize, delta: isize| {
        members.update(|list| {
            let j = i as isize + delta;
            if j >= 0 && (j as usize) < list.len() {
                list.swap(i, j as usize);
            }
        })
    };
    let view_href = info.listing.href();
    view! {
        <div class="page-head">
            <div>
                <h1>{info.listing.title.clone()} <span class="badge kind">"bundle"</span></h1>
                <p class="muted"><code>{info.listing.slug()}</code></p>
            </div>
            <a class="button secondary" href=view_href>"View listing"</a>
        </div>
        {move || tool.with(|t| view! { <ModerationNotice tool=t.clone() /> })}
        <div class="two-col">
            <div>
                <section class="card bundle-members">
                    <h2>"Tools in this bundle"</h2>
                    <p class="muted small">"Each tool follows its published version or is pinned to one. The name is what models see; it must be unique in the bundle."</p>
                    {move || {
                        let list = members.get();
                        if list.is_empty() {
                            return view! { <p class="muted empty-members">"No tools yet: add some from the search."</p> }.into_any();
                        }
                        view! {
                            <table class="member-table editing">
                                <thead><tr><th>"Name in the bundle"</th><th>"Tool"</th><th>"Version"</th><th></th></tr></thead>
                                <tbody>
                                {list.into_iter().enumerate().map(|(i, m)| {
                                    let follows = m.serves.map(|v| format!("Follow published (v{v})")).unwrap_or_else(|| "Follow published".into());
                                    view! {
                                        <tr data-tool=m.slug.clone()>
                                            <td><input class="mono exposed-name" maxlength="64" prop:value=m.exposed_name.clone() aria-label=format!("Name in the bundle of {}", m.slug)
                                                on:change=move |ev| members.update(|l| l[i].exposed_name = event_target_value(&ev)) /></td>
                                            <td>{m.slug.clone()}</td>
                                            <td>
                                                <select class="member-version" aria-label=format!("Version of {}", m.slug) on:change=move |ev| {
                                                    let v = event_target_value(&ev).parse::<i64>().ok();
                                                    members.update(|l| l[i].pinned_version = v);
                                                }>
                                                    <option value="" selected=m.pinned_version.is_none()>{follows}</option>
                                                    {m.versions.iter().map(|v| view! {
                                                        <option value=*v selected=m.pinned_version == Some(*v)>{format!("Pin v{v}")}</option>
                                                    }).collect_view()}
                                                </select>
                                            </td>
                                            <td class="actions">
                                                <button type="button" class="link-button" title="Move up" aria-label=format!("Move {} up", m.slug) on:click=move |_| move_member(i, -1)>"↑"</button>
                                                <button type="button" class="link-button" title="Move down" aria-label=format!("Move {} down", m.slug) on:click=move |_| move_member(i, 1)>"↓"</button>
                                                <button type="button" class="link-button remove" title="Remove" aria-label=format!("Remove {}", m.slug) on:click=move |_| members.update(|l| { l.remove(i); })>"✕"</button>
                                            </td>
                                        </tr>
                                    }
                                }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any()
                    }}
                    {move || view! { <ExternalTable tools=external.get() remove=Callback::new(move |i: usize| external.update(|l| { l.remove(i); })) /> }}
                    <div class="inline-form">
                        <input placeholder="What changed (changelog line)" aria-label="What changed (changelog line)" maxlength="500" prop:value=move || changelog.get()
                            on:input=move |ev| changelog.set(event_target_value(&ev)) />
                        <button type="button" class="button save-version" disabled=move || save.pending().get()
                            on:click=move |_| { save.dispatch(SaveBundleVersion { bundle: id, members: inputs(), external: external_inputs(), changelog: changelog.get_untracked() }); }>
                            "Save version"
                        </button>
                    </div>
                    {move || save.value().get().map(|r| match r {
                        Ok(n) => view! { <p class="alert ok">{format!("Saved version {n}.")}</p> }.into_any(),
                        Err(e) => view! { <p class="alert error" role="alert">{e.to_string()}</p> }.into_any(),
                    })}
                    {move || publish.value().get().and_then(Result::err).map(|e| view! { <p class="alert error">{e.to_string()}</p> })}
                    <VersionsPanel tool publish load=Callback::new(move |n| {
                        let (d, name) = tool.with_untracked(|t| (t.department.clone(), t.name.clone()));
                        leptos::task::spawn_local(async move {
                            if let Ok(v) = crate::api::bundle_version_members(d, name, n).await {
                                members.set(v);
                            }
                        });
                    }) />
                </section>
                <CodeModeCard tool />
                <SettingsCard tool />
            </div>
            <aside>
                <section class="card bundle-search">
                    <h2>"Add tools"</h2>
                    <form class="inline-form" on:submit=move |ev| {
                        ev.prevent_default();
                        search(query.get_untracked());
                    }>
                        <input type="search" class="candidate-search" placeholder="Search tools you can see…" aria-label="Search tools" maxlength="1000"
                            prop:value=move || query.get() on:input=move |ev| query.set(event_target_value(&ev)) />
                        <button type="submit" class="button secondary">"Search"</button>
                    </form>
                    {move || searching.get().then(|| view! { <p class="muted small">"Searching…"</p> })}
                    {move || found.get().map(|r| match r {
                        Ok(found) if found.is_empty() => view! { <p class="muted small">"No published tool you can see matches."</p> }.into_any(),
                        Ok(found) => view! {
                            <ul class="candidates">
                                {found.into_iter().map(|c| {
                                    let tool = c.tool;
                                    let added = Signal::derive(move || members.with(|l| l.iter().any(|m| m.tool == tool)));
                                    let add = c.clone();
                                    view! {
                                        <li data-tool=c.slug.clone()>
                                            <div><strong>{c.title.clone()}</strong><br /><code class="small">{c.slug.clone()}</code></div>
                                            <AddButton class="add-tool" added on_add=move || members.update(|l| l.push(add.clone())) />
                                        </li>
                                    }
                                }).collect_view()}
                            </ul>
                        }.into_any(),
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                    })}
                </section>
                <section class="card bundle-external-search">
                    <h2>"Add external tools"</h2>
                    <p class="muted small">"Tools of the external MCP servers registered for this department, exposed as server__tool."</p>
                    {move || external_candidates.value().get().map(|r| match r {
                        Ok(found) if found.is_empty() => view! { <p class="muted small">"No external server of this department lists tools."</p> }.into_any(),
                        Ok(found) => view! {
                            <ul class="candidates">
                                {found.into_iter().map(|c| {
                                    let name = c.exposed_name.clone();
                                    let added = Signal::derive(move || external.with(|l| l.iter().any(|e| e.exposed_name == name)));
                                    let add = c.clone();
                                    view! {
                                        <li data-external=c.exposed_name.clone()>
                                            <div><code>{c.exposed_name.clone()}</code><br /><span class="muted small">{c.description.clone()}</span></div>
                                            <AddButton class="add-external" added on_add=move || external.update(|l| l.push(add.clone())) />
                                        </li>
                                    }
                                }).collect_view()}
                            </ul>
                        }.into_any(),
                        Err(e) => view! { <p class="alert error">{e.to_string()}</p> }.into_any(),
                    })}
                </section>
            </aside>
        </div>
    }
}
