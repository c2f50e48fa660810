//! Publishing from CI: a tool file (code, arguments, metadata, test cases)
//! becomes a tool in the caller's department. The tool is created or updated,
//! a version saved (unless code, arguments and output schema are those of the
//! latest version already), the test cases run against that version, and the
//! version published only if every one passes. The REST API (`/api/v1`) and
//! `toolshed push` are its callers; README "Publishing from CI" has the format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Check, ListingKind, NewTool, RunSource, Source, TestCaseResult, Tool, ToolError, ToolSettings, Visibility};
use crate::accounts::User;
use crate::names::{Description, Invalid, Tags, Title};
use crate::schema::ArgDef;
use crate::Toolshed;

/// A tool as a file in a repository. Unknown fields are refused, so a typo
/// does not silently drop a setting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFile {
    /// The tool's name in the caller's department.
    pub name: String,
    /// Default on creation: the name. Left as it is on update when absent.
    #[serde(default)]
    pub title: Option<String>,
    /// Markdown. Left as it is on update when absent.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// `everyone`, `department` (default on creation) or `private`.
    #[serde(default)]
    pub visibility: Option<String>,
    /// The body of the async function.
    pub code: String,
    /// Argument rows (as the editor saves them), or a JSON Schema object.
    #[serde(default)]
    pub arguments: Option<Value>,
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Created or replaced by name; the tool's other test cases run too.
    #[serde(default)]
    pub test_cases: Vec<FileTestCase>,
    #[serde(default)]
    pub changelog: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileTestCase {
    pub name: String,
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The result text expected (a JSON result equals it as JSON).
    #[serde(default)]
    pub expected: Option<String>,
    /// Text the result must contain.
    #[serde(default)]
    pub contains: Option<String>,
    /// A JSONPath into the JSON result; `equals` is the value expected there.
    #[serde(default)]
    pub json_path: Option<String>,
    #[serde(default)]
    pub equals: Option<Value>,
    /// A JSON Schema the result must match.
    #[serde(default)]
    pub schema: Option<Value>,
}

impl FileTestCase {
    /// The one check the case names (none of them: the run must succeed).
    pub fn check(&self) -> Result<Check, Invalid> {
        // A blank `expected` has always meant "any success".
        let expected = self.expected.as_deref().filter(|e| !e.trim().is_empty());
        let given = [expected.is_some(), self.contains.is_some(), self.json_path.is_some(), self.schema.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(Invalid {
                field: "test_cases",
                reason: format!(
                    "“{}” names more than one check: give one of expected, contains, json_path (with equals) or schema",
                    self.name
                ),
            });
        }
        if self.equals.is_some() != self.json_path.is_some() {
            return Err(Invalid { field: "test_cases", reason: format!("“{}”: json_path and equals go together", self.name) });
        }
        match (expected, &self.contains, &self.json_path, &self.schema) {
            (Some(text), ..) => Check::parse("equals", None, Some(text)),
            (_, Some(text), ..) => Check::parse("contains", None, Some(text)),
            (_, _, Some(path), _) => Check::parse("json_path", Some(path), self.equals.as_ref().map(Value::to_string).as_deref()),
            (_, _, _, Some(schema)) => Check::parse("schema", None, Some(&schema.to_string())),
            _ => Ok(Check::Succeeds),
        }
    }
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// What became of a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PushOutcome {
    /// The version is what the endpoint serves now.
    Published,
    /// The department requires review: the version waits for an admin.
    PendingReview,
    /// A test case failed: the version was saved, not published.
    TestsFailed,
    /// The department requires test cases before a publish, and the tool has
    /// none: the version was saved, not published.
    TestsMissing,
    /// The version may break calls made to the published one, and the push did
    /// not confirm that: saved and tested, not published (`breaking` says why).
    Breaking,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushReport {
    /// `department/name`.
    pub tool: String,
    pub created: bool,
    pub version: i64,
    /// False when the file matched the latest version, which was used again.
    pub new_version: bool,
    pub outcome: PushOutcome,
    pub test_results: Vec<TestCaseResult>,
    /// With [`PushOutcome::Breaking`]: the changes that may break calls, `path: what`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaking: Vec<String>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ToolError {
    Invalid { field, reason: reason.into() }.into()
}

/// Rows as the editor saves them, or a JSON Schema loaded back into rows.
fn parse_arguments(raw: Option<Value>) -> Result<Vec<ArgDef>, ToolError> {
    match raw {
        None => Ok(Vec::new()),
        Some(rows @ Value::Array(_)) => serde_json::from_value(rows).map_err(|e| invalid("arguments", e.to_string())),
        Some(schema @ Value::Object(_)) => crate::schema::from_json_schema(&schema).map_err(|e| invalid("arguments", e.to_string())),
        Some(_) => Err(invalid("arguments", "must be a list of argument rows or a JSON Schema object")),
    }
}

impl Toolshed {
    /// Creates or updates the tool `file` describes in `user`'s department,
    /// saves its version, runs its test cases and publishes it if they all pass
    /// and it breaks no call made to the published version (or `breaking_confirmed`).
    pub async fn push_tool(&self, user: &User, file: ToolFile, breaking_confirmed: bool) -> Result<PushReport, ToolError> {
        let source = Source::parse(&file.code, parse_arguments(file.arguments.clone())?, file.output_schema.clone())?;
        let checks = file.test_cases.iter().map(FileTestCase::check).collect::<Result<Vec<_>, _>>()?;
        let tags = file.tags.as_ref().map(|t| Tags::parse(&t.join(" "))).transpose()?;
        let (tool, created) = match self.listing_by_slug(user, ListingKind::Tool, &user.department.name, &file.name).await {
            Ok(tool) => (self.update_from_file(user, tool, &file, tags).await?, false),
            Err(ToolError::NotFound) => {
                let new = NewTool::parse(
                    &file.name,
                    file.title.as_deref().unwrap_or(&file.name),
                    file.description.as_deref().unwrap_or(""),
                    &tags.map(|t| t.joined()).unwrap_or_default(),
                    file.visibility.as_deref().unwrap_or(Visibility::Department.as_str()),
                )?;
                (self.create_tool(user, new).await?, true)
            }
            Err(e) => return Err(e),
        };
        let latest = match tool.latest_version {
            Some(n) => Some(self.version_row(tool.id, n).await?),
            None => None,
        };
        let unchanged =
            latest.filter(|v| v.code == source.code.as_str() && v.args == source.args && v.output_schema == source.output_schema);
        let (version, new_version) = match unchanged {
            Some(v) => (v.version, false),
            None => (self.save_version(user, tool.id, source, &file.changelog).await?, true),
        };
        for (case, check) in file.test_cases.into_iter().zip(checks) {
            self.save_test_case(user, tool.id, &case.name, case.args, check).await?;
        }
        let test_results = self.run_test_cases(user, tool.id, RunSource::Version(version)).await?;
        let mut breaking = Vec::new();
        let outcome = if !test_results.iter().all(|r| r.passed) {
            PushOutcome::TestsFailed
        } else if tool.published_version == Some(version) {
            PushOutcome::Published
        } else {
            match self.publish_compatible(user, tool.id, version, breaking_confirmed, Some(test_results.clone())).await {
                Ok(t) if t.published_version == Some(version) => PushOutcome::Published,
                Ok(_) => PushOutcome::PendingReview,
                Err(ToolError::Breaking(changes)) => {
                    breaking = changes;
                    PushOutcome::Breaking
                }
                Err(ToolError::TestsMissing) => PushOutcome::TestsMissing,
                Err(e) => return Err(e),
            }
        };
        Ok(PushReport { tool: tool.slug(), created, version, new_version, outcome, test_results, breaking })
    }

    /// Applies the file's title, description, tags and visibility where given
    /// and different; the rest of the settings stay as they are.
    async fn update_from_file(&self, user: &User, tool: Tool, file: &ToolFile, tags: Option<Tags>) -> Result<Tool, ToolError> {
        let tool = self.code_tool_for_edit(user, tool.id).await?;
        let title = file.title.clone().unwrap_or_else(|| tool.title.clone());
        let description = file.description.clone().unwrap_or_else(|| tool.description.clone());
        let visibility = file.visibility.as_deref().map(Visibility::parse).transpose()?.unwrap_or(tool.visibility);
        let tags = tags.unwrap_or(Tags::parse(&tool.tags.join(" "))?);
        if title == tool.title
            && description == tool.description
            && visibility == tool.visibility
            && tags.as_slice() == tool.tags.as_slice()
        {
            return Ok(tool);
        }
        let settings = ToolSettings {
            title: Title::parse(&title)?,
            description: Description::parse(&description)?,
            tags,
            visibility,
            read_only_hint: tool.read_only_hint,
            destructive_hint: tool.destructive_hint,
            fetch_allow: tool.fetch_allow.clone(),
            timeout_ms: tool.timeout_ms,
            memory_mib: tool.memory_mib,
        };
        self.update_tool_settings(user, tool.id, settings).await
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tool_file_refuses_unknown_fields() {
        let e = serde_json::from_value::<ToolFile>(json!({"name": "x", "code": "return 1;", "colour": "blue"})).unwrap_err();
        assert!(e.to_string().contains("unknown field `colour`"), "{e}");
    }

    #[test]
    fn arguments_are_rows_or_a_json_schema() {
        let rows = parse_arguments(Some(json!([{"name": "text", "type": {"kind": "string"}, "required": true}]))).unwrap();
        let schema =
            parse_arguments(Some(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))).unwrap();
        assert_eq!(rows, schema);
        assert!(parse_arguments(Some(json!("text"))).is_err());
        assert_eq!(parse_arguments(None).unwrap(), vec![]);
    }
}
