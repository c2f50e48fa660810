//! Tools that ask: `$input({key: {method, params}, …})` puts questions to the
//! person or client behind the call (MCP's elicitation, sampling and roots),
//! `$ask(message, schema)` is one elicitation.
//!
//! A run never waits for a person. When a question has no answer yet the run
//! stops at once ([`super::RunError::NeedsInput`]); the caller puts the
//! questions to the client and runs the tool again from the start with every
//! answer so far ([`Input`]). Code before a question so runs once per
//! round (ask first, act after), and no worker is held while someone thinks.
//! Whether the client can answer is the caller's to check: a question its
//! client did not declare it can answer is a protocol error there, and code
//! that wants another way reads `$context.client.capabilities` first.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The questions a client may be put, by the capability it must have declared.
pub const METHODS: [(&str, &str); 3] =
    [("elicitation/create", "elicitation"), ("sampling/createMessage", "sampling"), ("roots/list", "roots")];
/// Questions in one `$input`.
const MAX_REQUESTS: usize = 8;
/// Bytes of one question as JSON.
const MAX_REQUEST_BYTES: usize = 64 * 1024;
const MAX_KEY: usize = 64;

/// The answers a run has been given so far, by the key it asked under, each
/// with the question it answers: code that asks something else under a key
/// (its question built from an earlier answer, or a tool changed between
/// rounds) is asked again, never handed an answer to another question.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Input {
    answers: BTreeMap<String, Answer>,
}

/// One answer, and the [`fingerprint`] of the question it was given to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub question: String,
    pub answer: Value,
}

impl Answer {
    /// `answer`, given to `question` (as the run asked it).
    pub fn to(question: &Value, answer: Value) -> Self {
        Self { question: fingerprint(question), answer }
    }
}

/// What identifies a question (as the run asked it, in `NeedsInput`): a hash
/// of its JSON with keys sorted, so no serializer's key order changes it.
pub fn fingerprint(question: &Value) -> String {
    let digest = Sha256::digest(canonical_json(question));
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// `value` as JSON text with every object's keys sorted: the same value
/// gives the same text whatever order its keys arrived in.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                out.push('{');
                for (i, (key, value)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(value, out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

impl Input {
    /// Records `answer` as the answer to the question asked under `key`.
    pub fn give(&mut self, key: String, answer: Answer) {
        self.answers.insert(key, answer);
    }

    /// Every answer so far, by key.
    pub fn answers(&self) -> &BTreeMap<String, Answer> {
        &self.answers
    }

    /// The answers to `requests` if every one is given (answers that do not
    /// fit their question count as not given); else the unanswered questions.
    pub(super) fn answer(&self, requests: &Map<String, Value>) -> Result<Map<String, Value>, Map<String, Value>> {
        let mut missing = Map::new();
        let mut found = Map::new();
        for (key, request) in requests {
            let given = self.answers.get(key).filter(|a| a.question == fingerprint(request) && fits(request, &a.answer));
            match given {
                Some(given) => {
                    found.insert(key.clone(), given.answer.clone());
                }
                None => {
                    missing.insert(key.clone(), request.clone());
                }
            }
        }
        if missing.is_empty() {
            Ok(found)
        } else {
            Err(missing)
        }
    }

    /// `$input`'s argument as questions, or why it is none.
    pub(super) fn requests(&self, requests: Value) -> Result<Map<String, Value>, String> {
        let Value::Object(requests) = requests else {
            return Err("$input takes an object of questions: {key: {method, params}}".into());
        };
        if requests.is_empty() || requests.len() > MAX_REQUESTS {
            return Err(format!("$input takes 1 to {MAX_REQUESTS} questions, not {}", requests.len()));
        }
        requests
            .into_iter()
            .map(|(key, request)| {
                if key.is_empty() || key.len() > MAX_KEY || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)) {
                    return Err(format!("$input: “{key}” is not a question key (1 to {MAX_KEY} letters, digits, _ - .)"));
                }
                let request = self.request(&key, request)?;
                Ok((key, request))
            })
            .collect()
    }

    fn request(&self, key: &str, request: Value) -> Result<Value, String> {
        let Value::Object(mut request) = request else { return Err(format!("$input: question “{key}” must be {{method, params}}")) };
        let method = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
        if !METHODS.iter().any(|(m, _)| *m == method) {
            let methods: Vec<&str> = METHODS.iter().map(|(m, _)| *m).collect();
            return Err(format!("$input: question “{key}” has method “{method}”; the methods are {}", methods.join(", ")));
        }
        let params = match request.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params,
            Some(_) => return Err(format!("$input: the params of question “{key}” must be an object")),
        };
        let params = match method.as_str() {
            "elicitation/create" => elicitation(key, params)?,
            "sampling/createMessage" => sampling(key, params)?,
            _ => Map::new(),
        };
        let request = serde_json::json!({ "method": method, "params": params });
        let size = request.to_string().len();
        if size > MAX_REQUEST_BYTES {
            return Err(format!("$input: question “{key}” is {size} bytes as JSON (limit {MAX_REQUEST_BYTES})"));
        }
        Ok(request)
    }
}

fn elicitation(key: &str, mut params: Map<String, Value>) -> Result<Map<String, Value>, String> {
    match params.get("message") {
        Some(Value::String(m)) if !m.trim().is_empty() => {}
        _ => return Err(format!("$input: question “{key}” (elicitation/create) needs a message")),
    }
    match params.get("requestedSchema") {
        None | Some(Value::Null) => {
            params.insert("requestedSchema".into(), serde_json::json!({"type": "object", "properties": {}}));
        }
        Some(schema) if schema["type"] == "object" && schema.get("properties").is_none_or(Value::is_object) => {}
        Some(_) => return Err(format!("$input: the requestedSchema of question “{key}” must be {{type: \"object\", properties}}")),
    }
    Ok(params)
}

fn sampling(key: &str, params: Map<String, Value>) -> Result<Map<String, Value>, String> {
    let messages = params.get("messages").and_then(Value::as_array).is_some_and(|m| !m.is_empty());
    let max_tokens = params.get("maxTokens").and_then(Value::as_u64).is_some_and(|n| n > 0);
    if !messages || !max_tokens {
        return Err(format!("$input: question “{key}” (sampling/createMessage) needs messages and maxTokens"));
    }
    Ok(params)
}

/// Whether `answer` is an answer to `request`: the result its method returns,
/// and for an accepted elicitation content of the types the schema asked for.
fn fits(request: &Value, answer: &Value) -> bool {
    let Some(answer) = answer.as_object() else { return false };
    match request["method"].as_str() {
        Some("elicitation/create") => match answer.get("action").and_then(Value::as_str) {
            Some("decline" | "cancel") => true,
            Some("accept") => match answer.get("content") {
                None | Some(Value::Null) => content_fits(&request["params"]["requestedSchema"], &Map::new()),
                Some(Value::Object(content)) => content_fits(&request["params"]["requestedSchema"], content),
                Some(_) => false,
            },
            _ => false,
        },
        Some("sampling/createMessage") => answer.get("role").is_some_and(Value::is_string) && answer.contains_key("content"),
        Some("roots/list") => answer.get("roots").and_then(Value::as_array).is_some_and(|roots| roots.iter().all(|r| r["uri"].is_string())),
        _ => false,
    }
}

/// Elicitation schemas are flat: every required property present, every
/// property given of its declared type, and among its choices if it has
/// them (`enum`, `oneOf`, or for a multi-select its items' `enum`/`anyOf`).
fn content_fits(schema: &Value, content: &Map<String, Value>) -> bool {
    let required = schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str);
    if required.into_iter().any(|name| !content.contains_key(name)) {
        return false;
    }
    let Some(properties) = schema["properties"].as_object() else { return true };
    content.iter().all(|(name, value)| {
        let Some(property) = properties.get(name) else { return true };
        let typed = match property["type"].as_str() {
            Some("string") => value.is_string(),
            Some("number") => value.is_number(),
            // 3.0 is an integer: clients whose numbers are floats send it so.
            Some("integer") => value.as_f64().is_some_and(|n| n.fract() == 0.0),
            Some("boolean") => value.is_boolean(),
            Some("array") => {
                value.as_array().is_some_and(|items| items.iter().all(|item| item.is_string() && chosen(&property["items"], item)))
            }
            _ => true,
        };
        typed && chosen(property, value)
    })
}

/// Whether `value` is among `schema`'s choices, if it lists any.
fn chosen(schema: &Value, value: &Value) -> bool {
    // 3 and 3.0 are one number.
    let same = |option: &Value| match (option.as_f64(), value.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => option == value,
    };
    if let Some(options) = schema["enum"].as_array() {
        return options.iter().any(same);
    }
    match schema["oneOf"].as_array().or_else(|| schema["anyOf"].as_array()) {
        Some(options) => options.iter().any(|option| same(&option["const"])),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn name_question() -> Value {
        json!({"who": {"method": "elicitation/create", "params": {"message": "Your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}})
    }

    #[test]
    fn malformed_questions_say_what_is_wrong() {
        let all = Input::default();
        for (questions, expected) in [
            (json!([]), "takes an object"),
            (json!({}), "1 to 8 questions"),
            (json!({"a b": {"method": "roots/list"}}), "not a question key"),
            (json!({"k": {"method": "ping"}}), "the methods are"),
            (json!({"k": {"method": "elicitation/create", "params": {}}}), "needs a message"),
            (json!({"k": {"method": "sampling/createMessage", "params": {"messages": []}}}), "needs messages and maxTokens"),
            (
                json!({"k": {"method": "elicitation/create", "params": {"message": "x", "requestedSchema": {"type": "string"}}}}),
                "requestedSchema",
            ),
            (json!({"k": {"method": "elicitation/create", "params": {"message": "x".repeat(70_000)}}}), "limit"),
        ] {
            let err = all.requests(questions.clone()).unwrap_err();
            assert!(err.contains(expected), "{questions}: {err}");
        }
        let defaulted = all.requests(json!({"ok": {"method": "elicitation/create", "params": {"message": "Go?"}}})).unwrap();
        assert_eq!(defaulted["ok"]["params"]["requestedSchema"], json!({"type": "object", "properties": {}}));
    }

    #[test]
    fn only_answers_that_fit_their_question_count() {
        let mut input = Input::default();
        let questions = input.requests(name_question()).unwrap();
        assert_eq!(input.answer(&questions).unwrap_err().len(), 1, "no answer yet");
        for wrong in [
            json!(12345),
            json!({"action": "accept", "content": {"name": 7}}),
            json!({"action": "accept", "content": {}}),
            json!({"action": "maybe"}),
        ] {
            input.give("who".into(), Answer::to(&questions["who"], wrong.clone()));
            assert!(input.answer(&questions).is_err(), "{wrong} taken as an answer");
        }
        for right in [json!({"action": "accept", "content": {"name": "Ada"}}), json!({"action": "decline"})] {
            input.give("who".into(), Answer::to(&questions["who"], right.clone()));
            assert_eq!(input.answer(&questions).unwrap()["who"], right);
        }
    }

    #[test]
    fn an_answer_counts_only_for_the_question_it_was_given_to() {
        let mut input = Input::default();
        let asked = input.requests(name_question()).unwrap();
        input.give("who".into(), Answer::to(&asked["who"], json!({"action": "accept", "content": {"name": "Ada"}})));
        assert!(input.answer(&asked).is_ok());
        // The same key, another question (say, built from an earlier answer): asked anew.
        let mut changed = name_question();
        changed["who"]["params"]["message"] = json!("Who approves the payment of 10,000 EUR?");
        let changed = input.requests(changed).unwrap();
        assert_eq!(input.answer(&changed).unwrap_err().len(), 1);
    }

    #[test]
    fn a_question_is_the_same_whatever_order_its_keys_come_in() {
        let a =
            json!({"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}});
        let b: Value = serde_json::from_str(
            r#"{"params": {"requestedSchema": {"properties": {}, "type": "object"}, "message": "m"}, "method": "elicitation/create"}"#,
        )
        .unwrap();
        assert_ne!(a.to_string(), b.to_string(), "key order is kept (preserve_order)");
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(canonical_json(&json!({"b": [1, {"d": 2, "c": "x\"y"}], "a": null})), r#"{"a":null,"b":[1,{"c":"x\"y","d":2}]}"#);
    }

    #[test]
    fn enums_and_multi_select_answers_are_checked() {
        let schema = json!({"type": "object", "properties": {
            "size": {"type": "string", "enum": ["S", "M"]},
            "tags": {"type": "array", "items": {"type": "string"}}}});
        assert!(content_fits(&schema, json!({"size": "M", "tags": ["a"]}).as_object().unwrap()));
        assert!(!content_fits(&schema, json!({"size": "XL"}).as_object().unwrap()));
        assert!(!content_fits(&schema, json!({"tags": [1]}).as_object().unwrap()));

        let titled = json!({"type": "object", "properties": {
            "plan": {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
            "days": {"type": "array", "items": {"anyOf": [{"const": "mon", "title": "Monday"}, {"const": "tue", "title": "Tuesday"}]}},
            "picked": {"type": "array", "items": {"type": "string", "enum": ["x", "y"]}},
            "count": {"type": "integer"}}});
        let fits = |content: Value| content_fits(&titled, content.as_object().unwrap());
        assert!(fits(json!({"plan": "pro", "days": ["mon", "tue"], "picked": ["y"], "count": 3.0})));
        let sizes = json!({"type": "object", "properties": {"size": {"type": "integer", "enum": [1, 2, 3]}}});
        assert!(content_fits(&sizes, json!({"size": 3.0}).as_object().unwrap()), "3.0 is the enum's 3");
        assert!(!fits(json!({"plan": "enterprise"})), "not one of oneOf");
        assert!(!fits(json!({"days": ["sun"]})), "not one of the items' anyOf");
        assert!(!fits(json!({"picked": ["z"]})), "not in the items' enum");
        assert!(!fits(json!({"count": 3.5})), "not an integer");
    }
}
