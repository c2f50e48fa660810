//! The globals a tool sees, bound directly as Rust functions (measured faster
//! than evaluating a JS prelude in every fresh context), and only those the
//! code names.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

use rquickjs::function::Opt;
use rquickjs::{Coerced, Ctx, Exception, FromJs, Function, IntoJs, Object, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::calls::json_to_js;
use super::calls::HostCalls;
use super::fetch::parse_request;
use super::markdown::{markdown_table, Row};
use super::{human_bytes, ConsoleLine, LogLevel, RunEvent, RunRequest};

/// Counted per console line on top of its text, so floods of empty lines hit the cap too.
const LINE_OVERHEAD: usize = 32;

/// Host-side state the globals report to.
pub(super) struct Host {
    started: Instant,
    events: Option<UnboundedSender<RunEvent>>,
    console_limit: usize,
    console_used: Cell<usize>,
    truncated: Cell<bool>,
    console: RefCell<Vec<ConsoleLine>>,
    progress_sent: Cell<u32>,
}

/// Progress reports forwarded per run, and the longest message of one.
const MAX_PROGRESS: u32 = 1000;
const MAX_PROGRESS_MESSAGE: usize = 1024;

impl Host {
    pub(super) fn new(started: Instant, events: Option<UnboundedSender<RunEvent>>, console_limit: usize) -> Self {
        Self {
            started,
            events,
            console_limit,
            console_used: Cell::new(0),
            truncated: Cell::new(false),
            console: RefCell::new(Vec::new()),
            progress_sent: Cell::new(0),
        }
    }

    pub(super) fn take_console(&self) -> Vec<ConsoleLine> {
        self.console.take()
    }

    fn log<'js>(&self, ctx: &Ctx<'js>, level: LogLevel, args: &[Value<'js>]) -> rquickjs::Result<()> {
        if self.truncated.get() {
            return Ok(());
        }
        // Argument by argument, stopping once over budget: `console.log(...hugeArray)`
        // must not copy the whole of it out of the sandbox first.
        let room = self.console_limit.saturating_sub(self.console_used.get());
        let mut message = String::new();
        for (i, arg) in args.iter().enumerate() {
            if message.len() > room {
                break;
            }
            if i > 0 {
                message.push(' ');
            }
            message.push_str(&display(ctx, arg)?);
        }
        let used = self.console_used.get() + message.len() + LINE_OVERHEAD;
        if used > self.console_limit {
            self.truncated.set(true);
            let marker = format!("[console output truncated: over {} logged]", human_bytes(self.console_limit));
            self.push(LogLevel::Warn, marker);
        } else {
            self.console_used.set(used);
            self.push(level, message);
        }
        Ok(())
    }

    fn push(&self, level: LogLevel, message: String) {
        let line = ConsoleLine { level, message, elapsed_ms: self.started.elapsed().as_millis() as u64 };
        if let Some(events) = &self.events {
            // A closed receiver only means nobody is listening live any more.
            let _ = events.send(RunEvent::Console(line.clone()));
        }
        self.console.borrow_mut().push(line);
    }

    /// Forwards at most [`MAX_PROGRESS`] reports a run, each message cut to
    /// [`MAX_PROGRESS_MESSAGE`] bytes: a client that never reads must not make
    /// the server queue what a loop can produce.
    fn progress(&self, done: f64, total: Option<f64>, message: Option<String>) {
        let Some(events) = &self.events else { return };
        let sent = self.progress_sent.get();
        if sent >= MAX_PROGRESS {
            return;
        }
        self.progress_sent.set(sent + 1);
        let message = message.map(|mut m| {
            if m.len() > MAX_PROGRESS_MESSAGE {
                let mut end = MAX_PROGRESS_MESSAGE;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
                m.push('…');
            }
            m
        });
        let _ = events.send(RunEvent::Progress { done, total, message });
    }
}

/// How console arguments print: strings raw, errors as `Name: message`,
/// objects as JSON, everything else through `String(value)`.
pub(super) fn display<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> rquickjs::Result<String> {
    if let Some(text) = value.as_string() {
        return text.to_string();
    }
    if let Some(error) = value.as_object().filter(|_| value.is_error()) {
        let name = error.get::<_, Option<Coerced<String>>>("name")?.map_or_else(|| "Error".to_string(), |n| n.0);
        let message = error.get::<_, Option<Coerced<String>>>("message")?.map(|m| m.0).unwrap_or_default();
        return Ok(if message.is_empty() { name } else { format!("{name}: {message}") });
    }
    if value.is_object() && !value.is_function() {
        match ctx.json_stringify(value.clone()) {
            // A Date (or any toJSON returning a string) prints as that string, unquoted.
            Ok(Some(json)) => {
                let json = json.to_string()?;
                return Ok(match json.starts_with('"') {
                    true => serde_json::from_str(&json).unwrap_or(json),
                    false => json,
                });
            }
            Ok(None) => {}
            Err(rquickjs::Error::Exception) => swallow_type_error(ctx)?,
            Err(e) => return Err(e),
        }
    }
    match Coerced::<String>::from_js(ctx, value.clone()) {
        Ok(text) => Ok(text.0),
        Err(rquickjs::Error::Exception) => {
            swallow_type_error(ctx)?;
            Ok(format!("[{}]", value.type_name()))
        }
        Err(e) => Err(e),
    }
}

/// Clears a pending TypeError (cycle, BigInt, Symbol); rethrows anything
/// else, so an interrupt or out-of-memory keeps unwinding.
fn swallow_type_error(ctx: &Ctx<'_>) -> rquickjs::Result<()> {
    let error = ctx.catch();
    let is_type_error = error
        .as_object()
        .filter(|_| error.is_error())
        .and_then(|e| e.get::<_, String>("name").ok())
        .is_some_and(|name| name == "TypeError");
    if is_type_error {
        Ok(())
    } else {
        Err(ctx.throw(error))
    }
}

/// What the code can reach by name. Built-ins and host globals it never
/// names are left out of its context: each one costs creation time on every
/// call, and code cannot reach a global without spelling its name (short of
/// assembling the name at run time, which tools have no reason to do).
pub(super) struct Needs<'a> {
    code: &'a str,
    pub(super) date: bool,
    pub(super) regexp: bool,
    pub(super) map_set: bool,
    /// Code mode, and the code names `tools`.
    pub(super) tools: bool,
}

impl<'a> Needs<'a> {
    pub(super) fn of(code: &'a str, code_mode: bool) -> Self {
        Self {
            code,
            tools: code_mode && code.contains("tools"),
            date: code.contains("Date"),
            // A `/` may start a regex literal; match and search build a RegExp from a string.
            regexp: ["/", "RegExp", "match", "search"].iter().any(|w| code.contains(w)),
            // Also covers WeakMap and WeakSet.
            map_set: code.contains("Map") || code.contains("Set"),
        }
    }

    fn names(&self, global: &str) -> bool {
        self.code.contains(global)
    }
}

/// Installs the globals the code names. Host globals are set after the
/// `$name` arguments so an argument called e.g. `env` cannot shadow `$env`
/// (it stays reachable as `args.env`).
pub(super) fn install<'js>(
    ctx: &Ctx<'js>,
    req: &RunRequest,
    needs: &Needs,
    host: Rc<Host>,
    calls: Rc<RefCell<HostCalls<'js>>>,
) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    // Strings the tool passes to eval are its own code; removing it is one property.
    globals.remove("eval")?;

    let args: Option<Object> = match needs.names("args") {
        true => Some(json_to_js(ctx, &req.args)?.get()?),
        false => None,
    };
    for (name, value) in &req.args {
        let global = format!("${name}");
        if !is_identifier(name) || !needs.names(&global) {
            continue;
        }
        let value = match &args {
            Some(args) => args.get(name.as_str())?,
            None => value_to_js(ctx, value)?,
        };
        globals.set(global, value)?;
    }
    for name in &req.absent {
        let global = format!("${name}");
        if is_identifier(name) && needs.names(&global) {
            globals.set(global, rquickjs::Undefined)?;
        }
    }
    if let Some(args) = args {
        globals.set("args", args)?;
    }
    // Code-mode code reaches the network and configuration only through its tools.
    let code_mode = req.tools.is_some();
    if needs.names("$env") && !code_mode {
        let env = json_to_js(ctx, &req.env)?;
        globals.set("$env", freeze(ctx, env)?)?;
    }
    if needs.names("$context") {
        let context = json_to_js(ctx, &req.context)?;
        globals.set("$context", freeze(ctx, context)?)?;
    }

    if needs.names("console") {
        let console = Object::new(ctx.clone())?;
        for (name, level) in [
            ("log", LogLevel::Log),
            ("info", LogLevel::Info),
            ("warn", LogLevel::Warn),
            ("error", LogLevel::Error),
            ("debug", LogLevel::Debug),
        ] {
            let host = host.clone();
            let log = Function::new(ctx.clone(), move |ctx: Ctx<'js>, args: rquickjs::function::Rest<Value<'js>>| {
                host.log(&ctx, level, &args.0)
            })?
            .with_name(name)?;
            console.set(name, log)?;
        }
        globals.set("console", console)?;
    }
    if needs.names("$progress") {
        let progress = Function::new(ctx.clone(), move |done: f64, total: Opt<Option<f64>>, message: Opt<Option<Coerced<String>>>| {
            host.progress(done, total.0.flatten(), message.0.flatten().map(|m| m.0));
        })?
        .with_name("$progress")?;
        globals.set("$progress", progress)?;
    }
    if needs.names("$json2MarkdownTable") {
        // The rows are copied out of the sandbox and the table built outside it:
        // together they may take at most the run's own memory limit.
        let budget = req.limits.memory_bytes / 2;
        let table = Function::new(ctx.clone(), move |ctx: Ctx<'js>, rows: Value<'js>, columns: Opt<Option<Vec<String>>>| {
            Ok::<_, rquickjs::Error>(markdown_table(&table_rows(&ctx, rows, budget)?, columns.0.flatten()))
        })?
        .with_name("$json2MarkdownTable")?;
        globals.set("$json2MarkdownTable", table)?;
    }
    if needs.names("$content") {
        let limit = req.limits.result_bytes;
        let calls = calls.clone();
        let content = Function::new(ctx.clone(), move |ctx: Ctx<'js>, blocks: Value<'js>| {
            let checked = js_to_json(&ctx, blocks).and_then(|blocks| super::content::blocks(blocks, limit));
            let blocks = match checked {
                Ok(blocks) => blocks,
                Err(_) if ctx.has_exception() => return Err(rquickjs::Error::Exception),
                Err(message) => return Err(Exception::throw_type(&ctx, &message)),
            };
            let marker = Object::new(ctx.clone())?;
            marker.set("content", blocks.len())?;
            let marker = freeze(&ctx, marker.into_value())?;
            calls.borrow_mut().made_content(marker.clone(), blocks);
            Ok::<Value<'js>, rquickjs::Error>(marker)
        })?
        .with_name("$content")?;
        globals.set("$content", content)?;
    }
    if needs.names("$input") || needs.names("$ask") {
        let (input, ask) = input_functions(ctx, calls.clone())?;
        globals.set("$input", input)?;
        globals.set("$ask", ask)?;
    }
    if needs.names("$sleep") {
        globals.set("$sleep", sleep_function(ctx, calls.clone())?)?;
    }
    if needs.tools {
        let names: Vec<String> = req.tools.iter().flat_map(|t| t.names.iter().cloned()).collect();
        globals.set("tools", tools_object(ctx, names, calls)?)?;
    } else if needs.names("$fetch") && !code_mode {
        globals.set("$fetch", fetch_function(ctx, calls)?)?;
    }
    Ok(())
}

/// Builds `tools`: a function per name, and for any other name a function
/// that rejects with the list of names (a Proxy, so a typo is explained
/// rather than "not a function"). `then` stays undefined so `tools` is not a
/// thenable. The Error a failed call throws is made when the call is, so its
/// stack (and the reported line) is the model's line that made the call.
const TOOLS_JS: &str = "(call, names) => {
    const bind = (name) => async (input) => {
        const site = new Error();
        try { return await call(name, input); } catch (e) { site.message = e.message; throw site; }
    };
    const known = {};
    for (const name of names) known[name] = bind(name);
    Object.freeze(known);
    return new Proxy(known, {
        get: (target, name) => typeof name !== 'string' || name === 'then' || name === 'toJSON'
            ? undefined
            : Object.prototype.hasOwnProperty.call(target, name) ? target[name] : bind(name),
    });
}";

fn tools_object<'js>(ctx: &Ctx<'js>, names: Vec<String>, calls: Rc<RefCell<HostCalls<'js>>>) -> rquickjs::Result<Value<'js>> {
    let call = Function::new(ctx.clone(), move |ctx: Ctx<'js>, name: String, input: Opt<Value<'js>>| {
        let (promise, resolve, reject) = ctx.promise()?;
        let input = match input.0.filter(|v| !v.type_of().is_void()) {
            None => Ok(serde_json::Value::Object(Default::default())),
            Some(value) => js_to_json(&ctx, value),
        };
        let started = input.and_then(|input| calls.borrow_mut().start_tool(name, input, (resolve, reject.clone())));
        if let Err(message) = started {
            if ctx.has_exception() {
                return Err(rquickjs::Error::Exception);
            }
            reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
        }
        Ok::<rquickjs::Promise<'js>, rquickjs::Error>(promise)
    })?;
    let make: Function = ctx.eval(TOOLS_JS)?;
    make.call((call, names))
}

/// `$ask(message, requestedSchema)`: one elicitation under the key `ask1`,
/// `ask2`, … in the order the code asks (the same in every round, since each
/// round runs the code again from the start); it resolves with the person's
/// `{action, content}`.
const ASK_JS: &str = "(input) => {
    let asked = 0;
    return async function $ask(message, requestedSchema) {
        const key = 'ask' + (++asked);
        const params = { message: String(message) };
        if (requestedSchema !== undefined) params.requestedSchema = requestedSchema;
        const answers = await input({ [key]: { method: 'elicitation/create', params } });
        return answers[key];
    };
}";

/// `$input(questions)`, and `$ask` built on it. A question without an answer
/// leaves the promise pending forever: the run stops at the next turn.
fn input_functions<'js>(ctx: &Ctx<'js>, calls: Rc<RefCell<HostCalls<'js>>>) -> rquickjs::Result<(Function<'js>, Function<'js>)> {
    let input = Function::new(ctx.clone(), move |ctx: Ctx<'js>, questions: Value<'js>| {
        let (promise, resolve, reject) = ctx.promise()?;
        let questions = match questions.type_of().is_void() {
            true => Ok(serde_json::Value::Null),
            false => js_to_json(&ctx, questions),
        };
        let asked = questions.and_then(|questions| calls.borrow_mut().ask(questions));
        match asked {
            Ok(Some(answers)) => resolve.call::<_, ()>((json_to_js(&ctx, &answers)?,))?,
            Ok(None) => {}
            Err(_) if ctx.has_exception() => return Err(rquickjs::Error::Exception),
            Err(message) => reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?,
        }
        Ok::<rquickjs::Promise<'js>, rquickjs::Error>(promise)
    })?
    .with_name("$input")?;
    let make: Function = ctx.eval(ASK_JS)?;
    let ask = make.call((input.clone(),))?;
    Ok((input, ask))
}

/// A tool's input, through JSON as a direct call's arguments would travel.
fn js_to_json<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> Result<serde_json::Value, String> {
    let json = match ctx.json_stringify(value) {
        Ok(Some(json)) => json.to_string().map_err(|e| e.to_string())?,
        Ok(None) => return Err("the input of a tool call must be an object".into()),
        // A cycle or BigInt: the TypeError's message explains it (an interrupt is left pending).
        Err(rquickjs::Error::Exception) => {
            let error = ctx.catch();
            if error.is_null() || error.is_undefined() {
                return Err("the input cannot be sent as JSON".into());
            }
            let message = display(ctx, &error).unwrap_or_default();
            return Err(format!("the input cannot be sent as JSON: {message}"));
        }
        Err(e) => return Err(e.to_string()),
    };
    serde_json::from_str(&json).map_err(|e| format!("the input cannot be sent as JSON: {e}"))
}

/// Scalars directly, structures through JSON.
fn value_to_js<'js>(ctx: &Ctx<'js>, value: &serde_json::Value) -> rquickjs::Result<Value<'js>> {
    use serde_json::Value as Json;
    match value {
        Json::Null => Ok(Value::new_null(ctx.clone())),
        Json::Bool(b) => Ok(Value::new_bool(ctx.clone(), *b)),
        Json::Number(n) => Ok(match n.as_i64().and_then(|i| i32::try_from(i).ok()) {
            Some(i) => Value::new_int(ctx.clone(), i),
            None => Value::new_number(ctx.clone(), n.as_f64().unwrap_or(f64::NAN)),
        }),
        Json::String(s) => s.as_str().into_js(ctx),
        Json::Array(_) | Json::Object(_) => json_to_js(ctx, value),
    }
}

fn freeze<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> rquickjs::Result<Value<'js>> {
    let freeze: Function = ctx.globals().get::<_, Object>("Object")?.get("freeze")?;
    freeze.call((value,))
}

/// Cells are rendered like console arguments, with null and undefined empty.
fn table_rows<'js>(ctx: &Ctx<'js>, rows: Value<'js>, budget: usize) -> rquickjs::Result<Vec<Row>> {
    let rows = rows.into_array().ok_or_else(|| Exception::throw_type(ctx, "$json2MarkdownTable: rows must be an array of objects"))?;
    let mut out = Vec::with_capacity(rows.len());
    let mut used = 0usize;
    for (i, row) in rows.iter::<Value>().enumerate() {
        let row = row?;
        let object = row
            .as_object()
            .filter(|_| !row.is_array() && !row.is_function())
            .ok_or_else(|| Exception::throw_type(ctx, &format!("$json2MarkdownTable: rows[{i}] is not an object")))?;
        let mut cells = Vec::new();
        for prop in object.props::<String, Value>() {
            let (key, value) = prop?;
            let text = if value.type_of().is_void() { String::new() } else { display(ctx, &value)? };
            used += key.len() + text.len();
            if used > budget {
                return Err(Exception::throw_range(
                    ctx,
                    &format!("$json2MarkdownTable: the table would be larger than {}", human_bytes(budget)),
                ));
            }
            cells.push((key, text));
        }
        out.push(cells);
    }
    Ok(out)
}

/// Argument names that can follow `$` as a plain identifier.
fn is_identifier(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

/// The JS `$fetch` function.
fn fetch_function<'js>(ctx: &Ctx<'js>, calls: std::rc::Rc<std::cell::RefCell<HostCalls<'js>>>) -> rquickjs::Result<Function<'js>> {
    Function::new(ctx.clone(), move |ctx: Ctx<'js>, url: Coerced<String>, init: Opt<Value<'js>>| {
        let (promise, resolve, reject) = ctx.promise()?;
        let started = parse_request(&url.0, init.0.as_ref()).and_then(|req| calls.borrow_mut().start_fetch(req, (resolve, reject.clone())));
        if let Err(message) = started {
            // A throwing getter on `init` left an exception: let it propagate.
            if ctx.has_exception() {
                return Err(rquickjs::Error::Exception);
            }
            reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
        }
        Ok::<rquickjs::Promise<'js>, rquickjs::Error>(promise)
    })?
    .with_name("$fetch")
}

/// The JS `$sleep(ms)` function: a promise that settles after `ms`.
fn sleep_function<'js>(ctx: &Ctx<'js>, calls: std::rc::Rc<std::cell::RefCell<HostCalls<'js>>>) -> rquickjs::Result<Function<'js>> {
    Function::new(ctx.clone(), move |ctx: Ctx<'js>, ms: Coerced<f64>| {
        let (promise, resolve, reject) = ctx.promise()?;
        if let Err(message) = calls.borrow_mut().start_sleep(ms.0, (resolve, reject.clone())) {
            reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
        }
        Ok::<rquickjs::Promise<'js>, rquickjs::Error>(promise)
    })?
    .with_name("$sleep")
}

#[cfg(test)]
mod tests {
    use super::is_identifier;

    #[test]
    fn only_identifier_like_names_become_dollar_globals() {
        assert!(is_identifier("city"));
        assert!(is_identifier("2fa"));
        assert!(!is_identifier("first-name"));
        assert!(!is_identifier("a b"));
        assert!(!is_identifier(""));
    }
}
