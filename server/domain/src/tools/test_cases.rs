//! Test cases: named mock-parameter sets with a check on the result, run one
//! by one or all at once against the editor's code, and the gate that makes a
//! department's (or the whole instance's) publishes wait for them to pass.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use serde_json_path::JsonPath;
use sqlx::Row;

use super::Tools;
use super::{ListingKind, Live, RunReport, RunSource, Tool, ToolError, Via};
use crate::accounts::User;
use crate::ids::ToolId;
use crate::names::Invalid;
use crate::policy::Policies;
use crate::sandbox::{FetchExchange, ToolValue};
use crate::schema::CompiledSchema;
use crate::store::StoreError;
use crate::store::Tx;
use crate::{audit, now_ms};

/// The longest expected text, path or schema a check may hold.
const MAX_CHECK_CHARS: usize = 20_000;

/// What a test case asserts about its run's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Check {
    /// The run ends without an error.
    Succeeds,
    /// The result is this text; a JSON result equals it as JSON (key order and
    /// spacing aside) when it is JSON.
    Equals { expected: String },
    /// The result's text contains this.
    Contains { expected: String },
    /// The JSON result holds this value at `path` (RFC 9535 JSONPath; a path
    /// that selects several values compares them as a list).
    JsonPath { path: String, expected: Value },
    /// The result (a JSON value, or a string for a text result) matches this JSON Schema.
    Schema { schema: Value },
}

impl Check {
    /// A check from the editor's or a tool file's fields: `kind` is one of
    /// `succeeds`, `equals`, `contains`, `json_path`, `schema`; `expected` is
    /// the text, the JSON value (JSON, or else taken as a string) or the schema.
    pub fn parse(kind: &str, path: Option<&str>, expected: Option<&str>) -> Result<Self, Invalid> {
        let invalid = |reason: &str| Invalid { field: "Test case check", reason: reason.into() };
        let expected = expected.map(str::trim).filter(|e| !e.is_empty());
        if expected.is_some_and(|e| e.chars().count() > MAX_CHECK_CHARS) || path.is_some_and(|p| p.len() > MAX_CHECK_CHARS) {
            return Err(invalid("is too long"));
        }
        let needed = |what: &str| expected.map(str::to_owned).ok_or_else(|| invalid(&format!("needs {what}")));
        match kind {
            "succeeds" => Ok(Check::Succeeds),
            "equals" => Ok(Check::Equals { expected: needed("the expected result")? }),
            "contains" => Ok(Check::Contains { expected: needed("the text the result must contain")? }),
            "json_path" => {
                let path = path.map(str::trim).filter(|p| !p.is_empty()).ok_or_else(|| invalid("needs a JSONPath such as $.total"))?;
                JsonPath::parse(path).map_err(|e| invalid(&format!("the JSONPath {path} is not valid: {e}")))?;
                let text = needed("the value expected at the path")?;
                let expected = serde_json::from_str(&text).unwrap_or(Value::String(text));
                Ok(Check::JsonPath { path: path.to_owned(), expected })
            }
            "schema" => {
                let schema: Value =
                    serde_json::from_str(&needed("a JSON Schema")?).map_err(|e| invalid(&format!("the schema is not JSON: {e}")))?;
                if !schema.is_object() {
                    return Err(invalid("the schema must be a JSON object"));
                }
                CompiledSchema::new(&schema).map_err(|e| invalid(&format!("the schema is not valid: {e}")))?;
                Ok(Check::Schema { schema })
            }
            other => Err(invalid(&format!("“{other}” is not a kind of check (succeeds, equals, contains, json_path, schema)"))),
        }
    }

    /// The stored columns: kind, path, expected text.
    fn columns(&self) -> (&'static str, Option<&str>, Option<String>) {
        match self {
            Check::Succeeds => ("succeeds", None, None),
            Check::Equals { expected } => ("equals", None, Some(expected.clone())),
            Check::Contains { expected } => ("contains", None, Some(expected.clone())),
            Check::JsonPath { path, expected } => ("json_path", Some(path), Some(expected.to_string())),
            Check::Schema { schema } => ("schema", None, Some(schema.to_string())),
        }
    }

    fn from_columns(kind: &str, path: Option<&str>, expected: Option<&str>) -> Self {
        // Stored checks were parsed when saved; one that no longer parses (a bug,
        // not input) fails its runs instead of vanishing.
        Check::parse(kind, path, expected).unwrap_or_else(|e| {
            tracing::error!(error = %e, kind, "a stored test case check does not parse");
            Check::Equals { expected: format!("(unreadable check: {e})") }
        })
    }

    /// What the check expects, as a person reads it; `None` for "no error".
    pub fn describe(&self) -> Option<String> {
        match self {
            Check::Succeeds => None,
            Check::Equals { expected } => Some(expected.clone()),
            Check::Contains { expected } => Some(format!("contains “{expected}”")),
            Check::JsonPath { path, expected } => Some(format!("{path} = {expected}")),
            Check::Schema { .. } => Some("matches the schema".to_owned()),
        }
    }

    /// Why `result` fails the check, or `None` when it passes.
    pub fn failure(&self, result: &ToolValue) -> Option<String> {
        let text = result_text(result);
        match self {
            Check::Succeeds => None,
            Check::Equals { expected } => {
                let same_json = match (result, serde_json::from_str::<Value>(expected)) {
                    (ToolValue::Json(v), Ok(e)) => *v == e,
                    _ => false,
                };
                (!same_json && text.trim() != expected.trim()).then(|| "the result is not the one expected".to_owned())
            }
            Check::Contains { expected } => {
                (!text.contains(expected.as_str())).then(|| format!("the result does not contain “{expected}”"))
            }
            Check::JsonPath { path, expected } => {
                let ToolValue::Json(value) = result else {
                    return Some(format!("the result is text, not JSON, so {path} selects nothing"));
                };
                let path_parsed = JsonPath::parse(path).ok()?;
                let found: Vec<Value> = path_parsed.query(value).all().into_iter().cloned().collect();
                let actual = match found.len() {
                    0 => return Some(format!("{path} selects nothing in the result")),
                    1 => found.into_iter().next().expect("one value"),
                    _ => Value::Array(found),
                };
                (actual != *expected).then(|| format!("{path} is {}, expected {expected}", clip(&actual.to_string())))
            }
            Check::Schema { schema } => {
                let value = result.to_json();
                let compiled = CompiledSchema::new(schema).ok()?;
                compiled.validate(&value).err().map(|violations| {
                    let first = &violations[0];
                    let at = if first.path.is_empty() { String::new() } else { format!(" at {}", first.path) };
                    let more = match violations.len() {
                        1 => String::new(),
                        n => format!(" (and {} more)", n - 1),
                    };
                    format!("the result does not match the schema{at}: {}{more}", first.message)
                })
            }
        }
    }
}

/// A long value cut for a one-line reason.
fn clip(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestCase {
    pub id: i64,
    pub name: String,
    pub args: serde_json::Value,
    pub check: Check,
    /// Made from a failed call: `$fetch` answers from that call's recording
    /// (so the case runs without the network, the same every time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<Vec<FetchExchange>>,
}

/// A test case as a run needs it: stored, or a tool file's before it is.
#[derive(Clone, Copy)]
pub(crate) struct Case<'a> {
    pub name: &'a str,
    pub args: &'a Value,
    pub check: &'a Check,
    pub recording: Option<&'a [FetchExchange]>,
}

impl TestCase {
    pub(crate) fn case(&self) -> Case<'_> {
        Case { name: &self.name, args: &self.args, check: &self.check, recording: self.recording.as_deref() }
    }
}

/// A case's name and arguments as they may be stored: the name trimmed.
pub(crate) fn checked_case<'a>(name: &'a str, args: &Value) -> Result<&'a str, ToolError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 80 {
        return Err(Invalid { field: "Test case name", reason: "must be 1 to 80 characters".into() }.into());
    }
    if !args.is_object() {
        return Err(Invalid { field: "Test case arguments", reason: "must be a JSON object".into() }.into());
    }
    Ok(name)
}

/// Creates or replaces `tool`'s test case of this name (checked with [`checked_case`]).
pub(crate) async fn insert_test_case(conn: &mut Tx, tool: ToolId, case: Case<'_>) -> Result<(), ToolError> {
    let name = checked_case(case.name, case.args)?;
    let (kind, path, expected) = case.check.columns();
    sqlx::query(
        "INSERT INTO test_cases (tool_id, name, args_json, expected, check_kind, check_path, created_at, fetches_json) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (tool_id, name) DO UPDATE SET args_json = excluded.args_json, expected = excluded.expected, \
         check_kind = excluded.check_kind, check_path = excluded.check_path, fetches_json = excluded.fetches_json",
    )
    .bind(tool.0)
    .bind(name)
    .bind(case.args.to_string())
    .bind(expected)
    .bind(kind)
    .bind(path)
    .bind(now_ms())
    .bind(case.recording.map(|r| serde_json::to_string(r).unwrap_or_default()))
    .execute(&mut **conn)
    .await
    .map_err(StoreError::from)?;
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestCaseResult {
    pub name: String,
    pub passed: bool,
    /// The result text, or the error message.
    pub actual: String,
    /// What the check expects ([`Check::describe`]); absent: a run without an error.
    pub expected: Option<String>,
    /// Why it failed, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub duration_ms: f64,
}

/// The text a result compares as: strings as they are, JSON compact, content
/// blocks as a model reads them.
pub fn result_text(value: &ToolValue) -> String {
    value.to_text()
}

impl Tools<'_> {
    pub async fn test_cases(self, user: &User, id: ToolId) -> Result<Vec<TestCase>, ToolError> {
        self.tool(user, id).await?;
        let rows = sqlx::query(
            "SELECT id, name, args_json, expected, check_kind, check_path, fetches_json FROM test_cases WHERE tool_id = $1 ORDER BY name",
        )
        .bind(id.0)
        .fetch_all(self.core.db().pool())
        .await?;
        rows.iter()
            .map(|r| {
                let (kind, path, expected): (String, Option<String>, Option<String>) =
                    (r.try_get("check_kind")?, r.try_get("check_path")?, r.try_get("expected")?);
                Ok(TestCase {
                    id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    args: serde_json::from_str(&r.try_get::<String, _>("args_json")?).unwrap_or_default(),
                    check: Check::from_columns(&kind, path.as_deref(), expected.as_deref()),
                    recording: r.try_get::<Option<String>, _>("fetches_json")?.and_then(|json| serde_json::from_str(&json).ok()),
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Creates or replaces the test case with this name.
    pub async fn save_test_case(self, user: &User, id: ToolId, name: &str, args: Value, check: Check) -> Result<(), ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        self.store_test_case(user, &tool, Case { name, args: &args, check: &check, recording: None }).await
    }

    /// Saves a test case whose `$fetch` answers from failed call `call`'s
    /// recording: the fix of a replayed failure, kept.
    pub async fn save_test_case_from_call(
        self,
        user: &User,
        id: ToolId,
        call: i64,
        name: &str,
        args: Value,
        check: Check,
    ) -> Result<(), ToolError> {
        let recorded = self.failed_call(user, id, call).await?;
        let tool = self.code_tool_for_edit(user, id).await?;
        self.store_test_case(user, &tool, Case { name, args: &args, check: &check, recording: Some(&recorded.call.fetches) }).await
    }

    /// Test cases gate publishing, so each change to them is audited.
    async fn store_test_case(self, user: &User, tool: &Tool, case: Case<'_>) -> Result<(), ToolError> {
        let mut tx = self.core.begin().await?;
        let detail = json!({"name": case.name.trim()});
        insert_test_case(&mut tx, tool.id, case).await?;
        audit::record(&mut tx, Some(user.id), "test_case.saved", &tool.audit_target(), None, Some(detail)).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn delete_test_case(self, user: &User, id: ToolId, case_id: i64) -> Result<(), ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        let mut tx = self.core.begin().await?;
        // The tool_id condition keeps a foreign case ID from touching another tool.
        let name: Option<String> = sqlx::query_scalar("DELETE FROM test_cases WHERE id = $1 AND tool_id = $2 RETURNING name")
            .bind(case_id)
            .bind(id.0)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(name) = name else { return Ok(()) };
        audit::record(&mut tx, Some(user.id), "test_case.deleted", &tool.audit_target(), Some(json!({"name": name})), None).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Runs every test case against `source`, one after another.
    /// Editors only: a case runs with the tool's configuration and reaches the
    /// network as a call would, without its callers' approval.
    pub async fn run_test_cases(self, user: &User, id: ToolId, source: RunSource) -> Result<Vec<TestCaseResult>, ToolError> {
        self.tool_for_edit(user, id).await?;
        let cases = self.test_cases(user, id).await?;
        // A tool that may not run so (disabled, a version never served) fails each case, saying why.
        let tool = self.tool_to_run(user, id, &source).await.map_err(|e| e.to_string());
        let mut results = Vec::with_capacity(cases.len());
        for case in &cases {
            results.push(match &tool {
                Ok(tool) => self.run_case(user, tool, &source, case.case()).await,
                Err(why) => case_result(case.case(), Err(why.clone())),
            });
        }
        Ok(results)
    }

    /// Runs one case against `source` of `tool`, which the caller looked up as
    /// `user` may run it; `$fetch` answers from the case's recording if it has one.
    pub(crate) async fn run_case(self, user: &User, tool: &Tool, source: &RunSource, case: Case<'_>) -> TestCaseResult {
        let (source, args) = (source.clone(), case.args.clone());
        let outcome = match case.recording {
            None => {
                self.run_loaded(user, tool, source, args, Via { transport: "test", token_id: None, bundle_id: None }, Live::default()).await
            }
            Some(recording) => {
                self.run_unrecorded(user, tool, source, args, "replay", Live::default(), Some(Arc::new(recording.to_vec()))).await
            }
        };
        case_result(case, outcome.map_err(|e| e.to_string()))
    }

    /// Whether publishing a tool of `department` needs passing test cases: the
    /// department's own setting, or the instance's.
    pub(crate) async fn tests_required(self, department: i64) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT tests_required FROM departments WHERE id = $1")
            .bind(department)
            .fetch_optional(self.core.db().pool())
            .await?;
        let own = match row {
            Some(r) => r.try_get::<i64, _>("tests_required")? != 0,
            None => false,
        };
        Ok(own || Policies::new(self.core).policy().await?.tests_required)
    }

    /// What the editor shows before a publish: where tests are required, the
    /// results of the tool's test cases against version `n`. Its editors only.
    pub async fn tests_before_publish(self, user: &User, id: ToolId, n: i64) -> Result<Option<Vec<TestCaseResult>>, ToolError> {
        let tool = self.code_tool_for_edit(user, id).await?;
        self.version_row(id, n).await?;
        self.test_gate(user, &tool, n, None).await
    }

    /// Where tests are required, the results of `tool`'s test cases against
    /// version `n` (`tested`, or run now); `None` where they are not.
    pub(crate) async fn test_gate(
        self,
        user: &User,
        tool: &Tool,
        n: i64,
        tested: Option<Vec<TestCaseResult>>,
    ) -> Result<Option<Vec<TestCaseResult>>, ToolError> {
        if tool.kind != ListingKind::Tool || !self.tests_required(tool.department_id).await? {
            return Ok(None);
        }
        match tested {
            Some(results) => Ok(Some(results)),
            None => self.run_test_cases(user, tool.id, RunSource::Version(n)).await.map(Some),
        }
    }
}

/// How `case` did, given its run (or why it could not run).
fn case_result(case: Case<'_>, outcome: Result<RunReport, String>) -> TestCaseResult {
    let (actual, duration_ms, reason) = match outcome {
        Ok(report) => {
            let ms = report.outcome.duration.as_secs_f64() * 1000.0;
            match report.outcome.result {
                Ok(v) => (result_text(&v), ms, case.check.failure(&v)),
                Err(e) => (e.to_string(), ms, Some("the run failed".to_owned())),
            }
        }
        Err(why) => (why, 0.0, Some("the run failed".to_owned())),
    };
    TestCaseResult { name: case.name.to_owned(), passed: reason.is_none(), actual, expected: case.check.describe(), reason, duration_ms }
}

/// Refuses a publish whose required test cases are missing or failed.
pub(crate) fn gate_passed(results: Option<Vec<TestCaseResult>>) -> Result<(), ToolError> {
    match results {
        None => Ok(()),
        Some(results) if results.is_empty() => Err(ToolError::TestsMissing),
        Some(results) if results.iter().all(|r| r.passed) => Ok(()),
        Some(results) => Err(ToolError::TestsFailed(results.into_iter().filter(|r| !r.passed).collect())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(kind: &str, path: Option<&str>, expected: &str) -> Check {
        Check::parse(kind, path, Some(expected)).unwrap()
    }

    #[test]
    fn equals_compares_json_results_as_json_and_text_as_trimmed_text() {
        let c = check("equals", None, r#"{ "b": 2, "a": 1 }"#);
        assert_eq!(c.failure(&ToolValue::Json(json!({"a": 1, "b": 2}))), None);
        assert!(c.failure(&ToolValue::Json(json!({"a": 1, "b": 3}))).is_some());
        assert_eq!(check("equals", None, "hello").failure(&ToolValue::Text("hello\n".into())), None);
    }

    #[test]
    fn contains_looks_for_the_text_in_the_result() {
        let c = check("contains", None, "1000 m");
        assert_eq!(c.failure(&ToolValue::Text("1 km = 1000 m".into())), None);
        assert_eq!(c.failure(&ToolValue::Text("1 km = 1 m".into())).unwrap(), "the result does not contain “1000 m”");
    }

    #[test]
    fn a_json_path_check_compares_the_selected_value_and_says_what_it_found() {
        let c = check("json_path", Some("$.top[0].word"), "a");
        let result = ToolValue::Json(json!({"words": 3, "top": [{"word": "a"}, {"word": "b"}]}));
        assert_eq!(c.failure(&result), None);
        assert_eq!(check("json_path", Some("$.words"), "3").failure(&result), None);
        assert_eq!(check("json_path", Some("$.words"), "4").failure(&result).unwrap(), "$.words is 3, expected 4");
        assert_eq!(check("json_path", Some("$.top[*].word"), r#"["a","b"]"#).failure(&result), None);
        assert_eq!(check("json_path", Some("$.nope"), "1").failure(&result).unwrap(), "$.nope selects nothing in the result");
        assert!(check("json_path", Some("$.words"), "3").failure(&ToolValue::Text("3".into())).unwrap().contains("not JSON"));
    }

    #[test]
    fn a_schema_check_names_the_first_violation() {
        let c = check("schema", None, r#"{"type":"object","required":["words"],"properties":{"words":{"type":"integer"}}}"#);
        assert_eq!(c.failure(&ToolValue::Json(json!({"words": 3}))), None);
        let why = c.failure(&ToolValue::Json(json!({"words": "three"}))).unwrap();
        assert!(why.starts_with("the result does not match the schema at /words"), "{why}");
    }

    #[test]
    fn checks_that_could_never_run_are_refused_when_saved() {
        for (kind, path, expected, says) in [
            ("json_path", Some("words"), Some("3"), "not valid"),
            ("json_path", None, Some("3"), "needs a JSONPath"),
            ("schema", None, Some("{nope"), "not JSON"),
            ("schema", None, Some(r#"{"type": 12}"#), "not valid"),
            ("schema", None, Some("[]"), "must be a JSON object"),
            ("contains", None, Some("  "), "needs the text"),
            ("sounds_right", None, Some("x"), "not a kind of check"),
        ] {
            let e = Check::parse(kind, path, expected).unwrap_err().to_string();
            assert!(e.contains(says), "{kind}: {e}");
        }
    }

    #[test]
    fn a_check_survives_its_columns() {
        for c in [
            Check::Succeeds,
            check("equals", None, "x"),
            check("contains", None, "y"),
            check("json_path", Some("$.a"), "[1,2]"),
            check("json_path", Some("$.a"), "plain words"),
            check("schema", None, r#"{"type":"string"}"#),
        ] {
            let (kind, path, expected) = c.columns();
            assert_eq!(Check::from_columns(kind, path, expected.as_deref()), c);
        }
    }

    #[test]
    fn the_gate_needs_one_case_and_every_case_passing() {
        let result =
            |passed| TestCaseResult { name: "c".into(), passed, actual: String::new(), expected: None, reason: None, duration_ms: 0.0 };
        assert!(gate_passed(None).is_ok());
        assert!(matches!(gate_passed(Some(vec![])), Err(ToolError::TestsMissing)));
        assert!(gate_passed(Some(vec![result(true)])).is_ok());
        assert!(matches!(gate_passed(Some(vec![result(true), result(false)])), Err(ToolError::TestsFailed(f)) if f.len() == 1));
    }
}
