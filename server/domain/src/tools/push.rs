//! Publishing from CI: a tool file (code, arguments, metadata, test cases)
//! becomes a tool in the caller's department. Everything that can refuse a
//! push is decided before anything is written: the test cases (the tool's,
//! the file's replacing those of the same name) run against the file's code,
//! then the gates every publish passes. A push that passes creates or updates
//! the tool, saves its version (unless code, arguments and output schema are
//! those of the latest version already) and the file's test cases, and
//! publishes it, in one transaction; a refused push changes nothing. The REST
//! API (`/api/v1`) and `toolshed push` are its callers; README "Publishing
//! from CI" has the format.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::compat::{self, schema_changes};
use super::gates::Held;
use super::test_cases::{checked_case, insert_test_case, Case};
use super::versions::{parse_changelog, write_publish, write_version, Gate};
use super::Tools;
use super::{
    rolled_back, write_new_listing, write_settings, Check, ListingKind, NewTool, RunSource, Source, Status, TestCase, TestCaseResult, Tool,
    ToolError, ToolSettings, Visibility,
};
use crate::accounts::User;
use crate::ids::ToolId;
use crate::membership::may_author;
use crate::names::CodeMode;
use crate::names::TaskSupport;
use crate::names::{Description, Invalid, Tags, Title};
use crate::schema::ArgDef;
use crate::serves::Serves;
use crate::{audit, now_ms};

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
    /// A test case failed: nothing was saved or changed.
    TestsFailed,
    /// The department requires test cases before a publish, and the tool has
    /// none: nothing was saved or changed.
    TestsMissing,
    /// The version may break calls made to the published one, and the push did
    /// not confirm that: tested, nothing saved or changed (`breaking` says why).
    Breaking,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushReport {
    /// `department/name`.
    pub tool: String,
    /// This push created the tool.
    pub created: bool,
    /// The version the file's code is, saved by this push or before it;
    /// `None` when a refused push's code is no saved version.
    pub version: Option<i64>,
    /// This push saved the version.
    pub new_version: bool,
    pub outcome: PushOutcome,
    /// The file's new title and description wait for an admin's review (a
    /// department that requires it): models read the approved ones until then.
    #[serde(default)]
    pub text_waiting_for_review: bool,
    pub test_results: Vec<TestCaseResult>,
    /// With [`PushOutcome::Breaking`]: the changes that may break calls, `path: what`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breaking: Vec<String>,
}

/// What a push does to the listing.
enum Listing {
    /// Creates it.
    New(NewTool),
    /// Changes `before`'s settings to the file's, where they differ.
    Existing { before: Box<Tool>, settings: Option<ToolSettings> },
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

impl Tools<'_> {
    /// Creates or updates the tool `file` describes in `user`'s department
    /// and publishes its version, if every test case passes against the
    /// file's code and it breaks no call made to the published version (or
    /// `breaking_confirmed`). Everything that can refuse it is decided first;
    /// then the tool, its settings, version, test cases and publish (or
    /// review request) are written in one transaction. A refused push changes
    /// nothing (a hold for hidden instructions is recorded for an admin).
    pub async fn push_tool(self, user: &User, file: ToolFile, breaking_confirmed: bool) -> Result<PushReport, ToolError> {
        // MCP's output schemas describe an object (the SDKs refuse a tool list with another).
        if file.output_schema.as_ref().is_some_and(|schema| schema["type"] != "object") {
            return Err(super::Invalid {
                field: "Output schema",
                reason: "an MCP output schema describes an object: give it \"type\": \"object\"".into(),
            }
            .into());
        }
        let source = Source::parse(&file.code, parse_arguments(file.arguments.clone())?, file.output_schema.clone())?;
        let changelog = parse_changelog(&file.changelog)?;
        let checks = file.test_cases.iter().map(FileTestCase::check).collect::<Result<Vec<_>, _>>()?;
        let mut file_cases = Vec::with_capacity(checks.len());
        for (case, check) in file.test_cases.iter().zip(&checks) {
            let name = checked_case(&case.name, &case.args)?;
            if file_cases.iter().any(|c: &Case<'_>| c.name == name) {
                return Err(invalid("test_cases", format!("“{name}” names two test cases")));
            }
            file_cases.push(Case { name, args: &case.args, check, recording: None });
        }
        let tags = file.tags.as_ref().map(|t| Tags::parse(&t.join(" "))).transpose()?;
        let listing = match self.listing_by_slug(user, ListingKind::Tool, &user.department.name, &file.name).await {
            Ok(found) => {
                let before = self.code_tool_for_edit(user, found.id).await?;
                let settings = settings_from_file(&before, &file, tags)?;
                if let Some(s) = &settings {
                    self.check_settings(s).await?;
                }
                Listing::Existing { before: Box::new(before), settings }
            }
            Err(ToolError::NotFound) if may_author(user, user.department.id.0) => Listing::New(NewTool::parse(
                &file.name,
                file.title.as_deref().unwrap_or(&file.name),
                file.description.as_deref().unwrap_or(""),
                &tags.map(|t| t.joined()).unwrap_or_default(),
                file.visibility.as_deref().unwrap_or(Visibility::Department.as_str()),
            )?),
            Err(ToolError::NotFound) => return Err(ToolError::NotAnAuthor),
            Err(e) => return Err(e),
        };
        // The listing as the push leaves it: what its test cases run as and the scan reads.
        let (after, before) = match &listing {
            Listing::New(new) => (unsaved_tool(user, new), None),
            Listing::Existing { before, settings } => {
                (settings.as_ref().map_or_else(|| (**before).clone(), |s| s.applied_to(before)), Some(&**before))
            }
        };
        let latest = match before.and_then(|t| t.latest_version) {
            Some(n) => Some(self.version_row(after.id, n).await?),
            None => None,
        };
        let reused = latest
            .as_ref()
            .filter(|v| v.code == source.code.as_str() && v.args == source.args && v.output_schema == source.output_schema)
            .map(|v| v.version);
        // The version's number: the one it has, or the one it would be saved as.
        let number = reused.unwrap_or(latest.as_ref().map_or(1, |v| v.version + 1));
        let publishes = reused.is_none() || reused != after.published_version;

        // The tool's test cases, the file's replacing those of the same name, against the file's code.
        let stored = match before {
            Some(t) => self.test_cases(user, t.id).await?,
            None => Vec::new(),
        };
        let mut cases: Vec<Case<'_>> = stored
            .iter()
            .map(TestCase::case)
            .filter(|c| !file_cases.iter().any(|f| f.name == c.name))
            .chain(file_cases.iter().copied())
            .collect();
        cases.sort_by(|a, b| a.name.cmp(b.name));
        let draft = RunSource::Draft {
            code: source.code.as_str().to_owned(),
            args: source.args.clone(),
            output_schema: source.output_schema.clone(),
        };
        let mut test_results = Vec::with_capacity(cases.len());
        for case in cases {
            test_results.push(self.run_case(user, &after, &draft, case).await);
        }
        let refused = |outcome, breaking| PushReport {
            tool: after.slug(),
            created: false,
            version: reused,
            new_version: false,
            outcome,
            text_waiting_for_review: false,
            test_results: test_results.clone(),
            breaking,
        };
        if !test_results.iter().all(|r| r.passed) {
            return Ok(refused(PushOutcome::TestsFailed, Vec::new()));
        }
        let texts_change = matches!(&listing, Listing::Existing { before, settings: Some(s) } if s.texts_differ(before));
        let review = if publishes {
            if let (false, Some(p), Some(before)) = (breaking_confirmed, after.published_version, before) {
                let served = self.version_row(before.id, p).await?;
                let breaking = compat::breaking(&schema_changes(&served.args, &source.args));
                if !breaking.is_empty() {
                    return Ok(refused(PushOutcome::Breaking, breaking));
                }
            }
            match self.publish_gates(user, &after, (&source).into(), number, Some(test_results.clone())).await {
                Ok(Gate::Open { review }) => review,
                Ok(Gate::Held(held)) => return Err(self.hold_push(user, &listing, &after, number, held).await),
                Err(ToolError::TestsMissing) => return Ok(refused(PushOutcome::TestsMissing, Vec::new())),
                Err(e) => return Err(e),
            }
        } else {
            // The served version stays; new text for it is scanned all the same.
            let held = match texts_change {
                true => self.unaccepted_findings(&after, (&source).into()).await?,
                false => None,
            };
            if let Some(held) = held {
                return Err(self.hold_push(user, &listing, &after, number, held).await);
            }
            false
        };
        let text_held = match &listing {
            Listing::Existing { before, settings: Some(s) } => self.texts_waiting(user, before, s).await?,
            _ => None,
        };

        let mut tx = self.core.begin().await?;
        let written = async {
            let tool = match &listing {
                Listing::New(new) => Tool { id: write_new_listing(&mut tx, user, ListingKind::Tool, new).await?, ..after.clone() },
                Listing::Existing { before, settings } => {
                    if let Some(s) = settings {
                        write_settings(&mut tx, user, before, s, text_held.as_ref()).await?;
                    }
                    after.clone()
                }
            };
            let version = match reused {
                Some(n) => n,
                None => write_version(&mut tx, user, &tool, &source, &changelog).await?,
            };
            for case in &file_cases {
                insert_test_case(&mut tx, tool.id, *case).await?;
            }
            if publishes {
                write_publish(&mut tx, user, &tool, version, review).await?;
            }
            // The push itself, also when it changed nothing: scripts and CI act as this person.
            let detail =
                json!({"version": version, "new_version": reused.is_none(), "published": publishes, "test_cases": file_cases.len()});
            audit::record(&mut tx, Some(user.id), "tool.pushed", &tool.audit_target(), None, Some(detail)).await?;
            Ok::<_, ToolError>(version)
        }
        .await;
        let version = match written {
            Ok(v) => v,
            Err(e) => return Err(rolled_back(tx, e).await),
        };
        tx.commit().await?;
        Ok(PushReport {
            tool: after.slug(),
            created: matches!(listing, Listing::New(_)),
            version: Some(version),
            new_version: reused.is_none(),
            outcome: if publishes && review { PushOutcome::PendingReview } else { PushOutcome::Published },
            text_waiting_for_review: text_held.is_some(),
            test_results,
            breaking: Vec::new(),
        })
    }

    /// Holds a push for `held`, naming version `n` (the number the file's
    /// code is or would be saved as). A new tool is created for the hold to
    /// name, unpublished and without a version: the admin accepts its texts,
    /// and the same file pushed again publishes.
    async fn hold_push(self, user: &User, listing: &Listing, after: &Tool, n: i64, held: Held) -> ToolError {
        let Listing::New(new) = listing else { return self.hold(user, after, n, held).await };
        let recorded = async {
            let mut tx = self.core.begin().await?;
            let id = write_new_listing(&mut tx, user, ListingKind::Tool, new).await?;
            held.record(&mut tx, user, &Tool { id, ..after.clone() }, n).await?;
            tx.commit().await?;
            Ok::<_, ToolError>(())
        };
        match recorded.await {
            Ok(()) => held.refusal(),
            Err(e) => e,
        }
    }
}

/// The settings `file` gives `tool`: its title, description, tags and
/// visibility where given, the rest as they are; `None` when nothing changes.
fn settings_from_file(tool: &Tool, file: &ToolFile, tags: Option<Tags>) -> Result<Option<ToolSettings>, ToolError> {
    let title = file.title.clone().unwrap_or_else(|| tool.title.clone());
    let description = file.description.clone().unwrap_or_else(|| tool.description.clone());
    let visibility = file.visibility.as_deref().map(Visibility::parse).transpose()?.unwrap_or(tool.visibility);
    let tags = tags.unwrap_or(Tags::parse(&tool.tags.join(" "))?);
    if title == tool.title && description == tool.description && visibility == tool.visibility && tags.as_slice() == tool.tags.as_slice() {
        return Ok(None);
    }
    Ok(Some(ToolSettings {
        title: Title::parse(&title)?,
        description: Description::parse(&description)?,
        tags,
        visibility,
        read_only_hint: tool.read_only_hint,
        destructive_hint: tool.destructive_hint,
        fetch_allow: tool.fetch_allow.clone(),
        timeout_ms: tool.timeout_ms,
        memory_mib: tool.memory_mib,
        task_support: tool.task_support,
        serves: tool.serves.clone(),
    }))
}

/// A new tool as the push will insert it, for its test cases to run as and
/// the scan to read before anything is written: the `tools` table's default
/// limits, no `$env` (no row has id 0, as no variable is set on a new tool).
fn unsaved_tool(user: &User, new: &NewTool) -> Tool {
    let now = now_ms();
    Tool {
        id: ToolId(0),
        kind: ListingKind::Tool,
        department: user.department.name.clone(),
        department_id: user.department.id.0,
        name: new.name.to_string(),
        title: new.title.as_str().to_owned(),
        description: new.description.as_str().to_owned(),
        tags: new.tags.as_slice().to_vec(),
        visibility: new.visibility,
        status: Status::Active,
        owner_id: user.id,
        owner_username: user.username.clone(),
        owner_display_name: user.display_name.clone(),
        published_version: None,
        pending_version: None,
        pending_text: None,
        review_note: None,
        moderation_note: None,
        latest_version: None,
        read_only_hint: false,
        destructive_hint: false,
        fetch_allow: Vec::new(),
        timeout_ms: 2_000,
        memory_mib: 32,
        task_support: TaskSupport::Forbidden,
        serves: Serves::Tool,
        approval_required: false,
        accounts: Vec::new(),
        code_mode: CodeMode::Off,
        forked_from: None,
        created_at: now,
        updated_at: now,
        pinned: false,
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
