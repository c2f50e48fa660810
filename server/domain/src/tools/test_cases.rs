//! Test cases: named mock-parameter sets with an optional expected result,
//! run one by one or all at once against the editor's code.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{RunSource, ToolError};
use crate::accounts::User;
use crate::ids::ToolId;
use crate::names::Invalid;
use crate::sandbox::ToolValue;
use crate::store::StoreError;
use crate::{now_ms, Toolshed};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestCase {
    pub id: i64,
    pub name: String,
    pub args: serde_json::Value,
    /// The result text expected (JSON results compare as compact JSON).
    pub expected: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestCaseResult {
    pub name: String,
    pub passed: bool,
    /// The result text, or the error message.
    pub actual: String,
    pub expected: Option<String>,
    pub duration_ms: f64,
}

/// The text a result compares as: strings as they are, JSON compact.
pub fn result_text(value: &ToolValue) -> String {
    match value {
        ToolValue::Text(t) => t.clone(),
        ToolValue::Json(v) => v.to_string(),
    }
}

impl Toolshed {
    pub async fn test_cases(&self, user: &User, id: ToolId) -> Result<Vec<TestCase>, ToolError> {
        self.tool(user, id).await?;
        let rows = sqlx::query("SELECT id, name, args_json, expected FROM test_cases WHERE tool_id = $1 ORDER BY name")
            .bind(id.0)
            .fetch_all(self.db.pool())
            .await?;
        rows.iter()
            .map(|r| {
                Ok(TestCase {
                    id: r.try_get("id")?,
                    name: r.try_get("name")?,
                    args: serde_json::from_str(&r.try_get::<String, _>("args_json")?).unwrap_or_default(),
                    expected: r.try_get("expected")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(Into::into)
    }

    /// Creates or replaces the test case with this name.
    pub async fn save_test_case(
        &self,
        user: &User,
        id: ToolId,
        name: &str,
        args: serde_json::Value,
        expected: Option<String>,
    ) -> Result<(), ToolError> {
        self.code_tool_for_edit(user, id).await?;
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 80 {
            return Err(Invalid { field: "Test case name", reason: "must be 1 to 80 characters".into() }.into());
        }
        if !args.is_object() {
            return Err(Invalid { field: "Test case arguments", reason: "must be a JSON object".into() }.into());
        }
        let expected = expected.filter(|e| !e.trim().is_empty());
        sqlx::query(
            "INSERT INTO test_cases (tool_id, name, args_json, expected, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (tool_id, name) DO UPDATE SET args_json = excluded.args_json, expected = excluded.expected",
        )
        .bind(id.0)
        .bind(name)
        .bind(args.to_string())
        .bind(expected)
        .bind(now_ms())
        .execute(self.db.pool())
        .await
        .map_err(StoreError::from)?;
        Ok(())
    }

    pub async fn delete_test_case(&self, user: &User, id: ToolId, case_id: i64) -> Result<(), ToolError> {
        self.code_tool_for_edit(user, id).await?;
        // The tool_id condition keeps a foreign case ID from touching another tool.
        sqlx::query("DELETE FROM test_cases WHERE id = $1 AND tool_id = $2").bind(case_id).bind(id.0).execute(self.db.pool()).await?;
        Ok(())
    }

    /// Runs every test case against `source`, one after another.
    pub async fn run_test_cases(&self, user: &User, id: ToolId, source: RunSource) -> Result<Vec<TestCaseResult>, ToolError> {
        let cases = self.test_cases(user, id).await?;
        let mut results = Vec::with_capacity(cases.len());
        for case in cases {
            let outcome = self.run_tool(user, id, source.clone(), case.args.clone(), "test", None).await;
            let (actual, duration_ms, ok) = match outcome {
                Ok(report) => {
                    let ms = report.outcome.duration.as_secs_f64() * 1000.0;
                    match report.outcome.result {
                        Ok(v) => (result_text(&v), ms, true),
                        Err(e) => (e.to_string(), ms, false),
                    }
                }
                Err(e) => (e.to_string(), 0.0, false),
            };
            let passed = ok && case.expected.as_ref().is_none_or(|e| e.trim() == actual.trim());
            results.push(TestCaseResult { name: case.name, passed, actual, expected: case.expected, duration_ms });
        }
        Ok(results)
    }
}
