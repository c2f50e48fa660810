//! What a publish changes for the tool's callers: the difference between the
//! served version's arguments and the new one's, each change classified.
//! Compatible changes keep every call that worked working (an optional
//! argument added, a required one made optional, more enum values, integer
//! widened to number); breaking ones may make such a call fail (an argument
//! removed, retyped or newly required, enum values taken away). The editor
//! shows them before Publish, with who is affected, and a breaking publish
//! needs a confirmation.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::Tools;
use super::{ListingKind, TestCaseResult, Tool, ToolError};
use crate::accounts::User;
use crate::ids::ToolId;
use crate::now_ms;
use crate::schema::{ArgDef, ArgType};

/// One difference in the arguments, at `path` (`options.limit`, `tags[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaChange {
    pub path: String,
    pub breaking: bool,
    /// What happened, for people: "added, optional", "type changed from string to integer".
    pub what: String,
}

/// What publishing a version would change, and for whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishImpact {
    /// The version served now, if any.
    pub from: Option<i64>,
    pub to: i64,
    pub changes: Vec<SchemaChange>,
    /// Published bundles (`department/name`) that follow the tool's latest version.
    pub following_bundles: Vec<String>,
    /// People who called the tool in the last 30 days.
    pub recent_callers: i64,
}

impl PublishImpact {
    pub fn breaking(&self) -> bool {
        self.changes.iter().any(|c| c.breaking)
    }

    /// The breaking changes as people read them: `path: what`.
    pub fn breaking_changes(&self) -> Vec<String> {
        breaking(&self.changes)
    }
}

/// The changes that may break calls, as people read them: `path: what`.
pub(crate) fn breaking(changes: &[SchemaChange]) -> Vec<String> {
    changes.iter().filter(|c| c.breaking).map(|c| format!("{}: {}", c.path, c.what)).collect()
}

/// The changes from `before` to `after`, in argument order.
pub fn schema_changes(before: &[ArgDef], after: &[ArgDef]) -> Vec<SchemaChange> {
    let mut out = Vec::new();
    compare_fields(before, after, "", &mut out);
    out
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}.{name}")
    }
}

fn push(out: &mut Vec<SchemaChange>, path: &str, breaking: bool, what: String) {
    out.push(SchemaChange { path: path.to_owned(), breaking, what });
}

fn compare_fields(before: &[ArgDef], after: &[ArgDef], path: &str, out: &mut Vec<SchemaChange>) {
    for old in before {
        let at = join(path, &old.name);
        match after.iter().find(|a| a.name == old.name) {
            Some(new) => compare_arg(old, new, &at, out),
            // Callers that send it are refused once it is gone (arguments are checked).
            None => push(out, &at, true, "removed".into()),
        }
    }
    for new in after.iter().filter(|a| !before.iter().any(|b| b.name == a.name)) {
        let at = join(path, &new.name);
        if new.required {
            push(out, &at, true, "added, required: calls without it fail".into());
        } else {
            push(out, &at, false, "added, optional".into());
        }
    }
}

fn compare_arg(old: &ArgDef, new: &ArgDef, at: &str, out: &mut Vec<SchemaChange>) {
    compare_type(&old.ty, &new.ty, at, out);
    if old.ty == ArgType::Enum && new.ty == ArgType::Enum {
        let removed: Vec<&str> = old.enum_values.iter().filter(|v| !new.enum_values.contains(v)).map(String::as_str).collect();
        let added: Vec<&str> = new.enum_values.iter().filter(|v| !old.enum_values.contains(v)).map(String::as_str).collect();
        if !removed.is_empty() {
            push(out, at, true, format!("no longer accepts {}", removed.join(", ")));
        }
        if !added.is_empty() {
            push(out, at, false, format!("also accepts {}", added.join(", ")));
        }
    }
    match (old.required, new.required) {
        (false, true) => push(out, at, true, "now required: calls without it fail".into()),
        (true, false) => push(out, at, false, "now optional".into()),
        _ => {}
    }
    if old.default != new.default {
        let shown = |d: &Option<serde_json::Value>| d.as_ref().map_or_else(|| "none".to_owned(), ToString::to_string);
        push(out, at, false, format!("default changed from {} to {}", shown(&old.default), shown(&new.default)));
    }
    if old.description != new.description {
        push(out, at, false, "description changed".into());
    }
}

fn type_name(t: &ArgType) -> String {
    match t {
        ArgType::String => "string".into(),
        ArgType::Number => "number".into(),
        ArgType::Integer => "integer".into(),
        ArgType::Boolean => "boolean".into(),
        ArgType::Enum => "one of a list".into(),
        ArgType::Array { items } => format!("list of {}", type_name(items)),
        ArgType::Object { .. } => "object".into(),
    }
}

fn compare_type(old: &ArgType, new: &ArgType, at: &str, out: &mut Vec<SchemaChange>) {
    match (old, new) {
        (ArgType::Array { items: a }, ArgType::Array { items: b }) => compare_type(a, b, &format!("{at}[]"), out),
        (ArgType::Object { fields: a }, ArgType::Object { fields: b }) => compare_fields(a, b, at, out),
        (a, b) if a == b => {}
        // Every integer is a number, every listed value a string: old calls still pass.
        (ArgType::Integer, ArgType::Number) | (ArgType::Enum, ArgType::String) => {
            push(out, at, false, format!("accepts any {} now (was {})", type_name(new), type_name(old)))
        }
        _ => push(out, at, true, format!("type changed from {} to {}", type_name(old), type_name(new))),
    }
}

impl Tools<'_> {
    /// What publishing version `n` of tool `id` would change for its callers,
    /// against the version served now. Its editors only.
    pub async fn publish_impact(self, user: &User, id: ToolId, n: i64) -> Result<PublishImpact, ToolError> {
        let tool: Tool = self.code_tool_for_edit(user, id).await?;
        let new = self.version_row(id, n).await?;
        let changes = match tool.published_version {
            Some(p) if p != n => schema_changes(&self.version_row(id, p).await?.args, &new.args),
            _ => Vec::new(),
        };
        let bundles = sqlx::query(
            "SELECT DISTINCT d.name AS dept, b.name FROM bundle_items i \
             JOIN tools b ON b.id = i.bundle_id AND i.version = b.published_version \
             JOIN departments d ON d.id = b.department_id \
             WHERE i.tool_id = $1 AND i.pinned_version IS NULL AND b.status = 'active' ORDER BY d.name, b.name",
        )
        .bind(id.0)
        .fetch_all(self.core.db().pool())
        .await?;
        let following_bundles = bundles
            .iter()
            .map(|r| Ok(format!("{}/{}", r.try_get::<String, _>("dept")?, r.try_get::<String, _>("name")?)))
            .collect::<Result<_, sqlx::Error>>()?;
        let since = now_ms() - 30 * 24 * 60 * 60 * 1000;
        let recent_callers: i64 = sqlx::query("SELECT COUNT(DISTINCT user_id) AS n FROM usage_records WHERE tool_id = $1 AND at_ms >= $2")
            .bind(id.0)
            .bind(since)
            .fetch_one(self.core.db().pool())
            .await?
            .try_get("n")?;
        Ok(PublishImpact { from: tool.published_version, to: n, changes, following_bundles, recent_callers })
    }

    /// Publishes (or rolls back to) version `n` of listing `id`, unless it is a
    /// tool's version that may break calls made to the published one and
    /// `breaking_confirmed` is false: then [`ToolError::Breaking`] says why.
    /// `tested`: the tool's test results against `n`, when the caller has them.
    pub async fn publish_compatible(
        self,
        user: &User,
        id: ToolId,
        n: i64,
        breaking_confirmed: bool,
        tested: Option<Vec<TestCaseResult>>,
    ) -> Result<Tool, ToolError> {
        if !breaking_confirmed && self.tool(user, id).await?.kind == ListingKind::Tool {
            let breaking = self.publish_impact(user, id, n).await?.breaking_changes();
            if !breaking.is_empty() {
                return Err(ToolError::Breaking(breaking));
            }
        }
        self.publish_tested(user, id, n, tested).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::schema::tests::arg;

    fn summary(changes: &[SchemaChange]) -> Vec<(String, bool)> {
        changes.iter().map(|c| (c.path.clone(), c.breaking)).collect()
    }

    #[test]
    fn an_added_optional_argument_is_compatible_and_a_new_required_one_breaks() {
        let before = [arg("text", ArgType::String, true)];
        let optional = [arg("text", ArgType::String, true), arg("loud", ArgType::Boolean, false)];
        let required = [arg("text", ArgType::String, true), arg("lang", ArgType::String, true)];
        assert_eq!(summary(&schema_changes(&before, &optional)), [("loud".into(), false)]);
        assert_eq!(summary(&schema_changes(&before, &required)), [("lang".into(), true)]);
        assert!(schema_changes(&before, &before).is_empty());
    }

    #[test]
    fn removing_retyping_or_requiring_an_argument_breaks() {
        let before = [arg("count", ArgType::Integer, false), arg("name", ArgType::String, false)];
        assert_eq!(summary(&schema_changes(&before, &before[..1])), [("name".into(), true)]);
        let retyped = [arg("count", ArgType::String, false), arg("name", ArgType::String, false)];
        let c = schema_changes(&before, &retyped);
        assert_eq!((c[0].breaking, c[0].what.as_str()), (true, "type changed from integer to string"));
        let required = [arg("count", ArgType::Integer, true), arg("name", ArgType::String, false)];
        assert_eq!(summary(&schema_changes(&before, &required)), [("count".into(), true)]);
        // The other way round is compatible: optional again, integer widened.
        assert_eq!(summary(&schema_changes(&required, &before)), [("count".into(), false)]);
        let widened = [arg("count", ArgType::Number, false), arg("name", ArgType::String, false)];
        assert_eq!(summary(&schema_changes(&before, &widened)), [("count".into(), false)]);
        assert_eq!(summary(&schema_changes(&widened, &before)), [("count".into(), true)]);
    }

    #[test]
    fn enum_values_taken_away_break_and_added_ones_do_not() {
        let with = |values: &[&str]| {
            let mut a = arg("unit", ArgType::Enum, true);
            a.enum_values = values.iter().map(|v| v.to_string()).collect();
            vec![a]
        };
        let c = schema_changes(&with(&["c", "f"]), &with(&["c", "f", "k"]));
        assert_eq!((c.len(), c[0].breaking, c[0].what.as_str()), (1, false, "also accepts k"));
        let c = schema_changes(&with(&["c", "f"]), &with(&["c"]));
        assert_eq!((c[0].breaking, c[0].what.as_str()), (true, "no longer accepts f"));
    }

    #[test]
    fn nested_fields_and_list_items_are_compared_by_path() {
        let object = |fields| vec![arg("options", ArgType::Object { fields }, false)];
        let before = object(vec![arg("limit", ArgType::Integer, false)]);
        let after = object(vec![arg("limit", ArgType::Integer, false), arg("depth", ArgType::Integer, true)]);
        assert_eq!(summary(&schema_changes(&before, &after)), [("options.depth".into(), true)]);
        let list = |items| vec![arg("tags", ArgType::Array { items: Box::new(items) }, false)];
        let c = schema_changes(&list(ArgType::String), &list(ArgType::Integer));
        assert_eq!((c[0].path.as_str(), c[0].breaking), ("tags[]", true));
    }

    #[test]
    fn descriptions_and_defaults_are_told_but_do_not_break() {
        let before = [arg("n", ArgType::Integer, false)];
        let mut after = before.clone();
        after[0].description = "How many".into();
        after[0].default = Some(serde_json::json!(3));
        let c = schema_changes(&before, &after);
        assert_eq!(
            c.iter().map(|c| (c.breaking, c.what.as_str())).collect::<Vec<_>>(),
            [(false, "default changed from none to 3"), (false, "description changed")]
        );
    }
}
