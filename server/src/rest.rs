//! The JSON REST API for scripts and CI, under `/api/v1`: an API token with
//! the `publish` grant pushes a tool file (`POST /api/v1/tools`), which
//! `Tools::push_tool` turns into a saved, tested and published version.
//! Every error is one [`ApiError`] variant, one HTTP status, and a body
//! `{"error": {"code": …, "message": …}}`.

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Json;
use serde_json::json;
use toolshed_domain::tokens::TokenInfo;
use toolshed_domain::tools::{PushOutcome, PushReport, ToolError, ToolFile};
use toolshed_domain::{Toolshed, User};

/// The most a tool file may weigh (code is limited further by the domain).
const MAX_FILE_BYTES: usize = 2 * 1024 * 1024;

pub fn routes(toolshed: Toolshed) -> axum::Router {
    axum::Router::new()
        .route("/api/v1/tools", post(push_tool))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FILE_BYTES))
        .with_state(toolshed)
}

/// Why a REST request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("This token may not publish: create one with the publish scope (Account page, or `toolshed admin create-token --publish`).")]
    MissingScope,
    #[error("This token is limited to other listings; {0} is not in its scope.")]
    OutOfScope(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("The listing has been disabled by an administrator.")]
    Disabled,
    #[error("{0}")]
    InvalidFile(String),
    #[error("{0}")]
    NameTaken(String),
    /// A race with another push: retryable.
    #[error("{0}")]
    Conflict(String),
    #[error("{failed} of {total} test cases failed; nothing was saved or published.")]
    TestsFailed { failed: usize, total: usize, report: Box<PushReport> },
    #[error(
        "Nothing was saved or published: this department requires at least one passing test case before a publish; \
         add test_cases to the tool file."
    )]
    TestsMissing(Box<PushReport>),
    /// The scan found hidden instructions; the version was saved and waits for an admin.
    #[error("{0}")]
    HiddenInstructions(String),
    #[error(
        "Nothing was saved or published: the file's arguments may break calls made to the published version ({}). \
         Push again with confirm_breaking=true (toolshed push --allow-breaking) to publish it.",
        .0.breaking.join("; ")
    )]
    Breaking(Box<PushReport>),
    #[error("The sandbox is busy; try again in a moment.")]
    Busy,
    #[error("Too many calls in flight for you; try again shortly.")]
    TooManyCalls,
    #[error("Something went wrong on the server.")]
    Internal,
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::MissingScope | ApiError::OutOfScope(_) | ApiError::Forbidden(_) | ApiError::Disabled => StatusCode::FORBIDDEN,
            ApiError::InvalidFile(_) => StatusCode::BAD_REQUEST,
            ApiError::NameTaken(_) | ApiError::Conflict(_) | ApiError::Breaking(_) => StatusCode::CONFLICT,
            ApiError::TestsFailed { .. } | ApiError::TestsMissing(_) | ApiError::HiddenInstructions(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Busy => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManyCalls => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::MissingScope => "missing_scope",
            ApiError::OutOfScope(_) => "out_of_scope",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::Disabled => "disabled",
            ApiError::InvalidFile(_) => "invalid_file",
            ApiError::NameTaken(_) => "name_taken",
            ApiError::Conflict(_) => "conflict",
            ApiError::TestsFailed { .. } => "tests_failed",
            ApiError::TestsMissing(_) => "tests_missing",
            ApiError::HiddenInstructions(_) => "hidden_instructions",
            ApiError::Breaking(_) => "breaking_change",
            ApiError::Busy => "busy",
            ApiError::TooManyCalls => "too_many_calls",
            ApiError::Internal => "internal",
        }
    }
}

impl From<ToolError> for ApiError {
    fn from(e: ToolError) -> Self {
        match e {
            ToolError::Invalid(_) | ToolError::BadArguments(_) => ApiError::InvalidFile(e.to_string()),
            ToolError::NotFound | ToolError::Forbidden => ApiError::Forbidden("You may not change this tool.".into()),
            ToolError::NotAnAuthor | ToolError::Held(_) | ToolError::NotConnected(_) => ApiError::Forbidden(e.to_string()),
            ToolError::NameTaken(_) => ApiError::NameTaken(e.to_string()),
            ToolError::Conflict(m) => ApiError::Conflict(m),
            ToolError::Disabled => ApiError::Disabled,
            ToolError::Busy => ApiError::Busy,
            ToolError::TooManyCalls => ApiError::TooManyCalls,
            ToolError::HiddenInstructions(_) => ApiError::HiddenInstructions(e.to_string()),
            ToolError::NoSuchVersion(_)
            | ToolError::NotPublished
            | ToolError::UnknownTool(_)
            | ToolError::Breaking(_)
            | ToolError::TestsMissing
            | ToolError::TestsFailed(_)
            | ToolError::Store(_) => {
                tracing::error!(error = %e, "push failed");
                ApiError::Internal
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code(), "message": self.to_string()}});
        if let ApiError::TestsFailed { report, .. } | ApiError::TestsMissing(report) | ApiError::Breaking(report) = &self {
            // The results are the point of the answer: beside the error, as on success.
            if let (Some(b), Ok(serde_json::Value::Object(r))) = (body.as_object_mut(), serde_json::to_value(report)) {
                b.extend(r);
            }
        }
        let mut res = (self.status(), Json(body)).into_response();
        if let ApiError::Unauthorized(_) = self {
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(r#"Bearer realm="toolshed", error="invalid_token""#));
        }
        res
    }
}

/// The user and token behind `Authorization: Bearer …` (never a cookie, never the URL).
async fn authenticate(ts: &Toolshed, headers: &HeaderMap) -> Result<(User, TokenInfo), ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or(ApiError::Unauthorized("Missing API token: send Authorization: Bearer <token>."))?;
    match ts.tokens().authenticate_token(token.trim()).await {
        Ok(Ok(found)) => Ok(found),
        Ok(Err(_)) => Err(ApiError::Unauthorized("Invalid, expired or revoked API token.")),
        Err(e) => {
            tracing::error!(error = %e, "token check failed");
            Err(ApiError::Internal)
        }
    }
}

#[derive(serde::Deserialize)]
struct PushQuery {
    /// Publish even a version that may break calls made to the published one.
    #[serde(default)]
    confirm_breaking: bool,
}

/// `POST /api/v1/tools[?confirm_breaking=true]`: a tool file in, the push
/// report out (200 when published or waiting for review, saying whether the
/// new title and description wait for review; 422 with the results when a
/// test failed or the department requires tests and the file has none, 409
/// with the changes when it may break callers: refused, nothing changed).
async fn push_tool(
    State(ts): State<Toolshed>,
    Query(query): Query<PushQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<PushReport>, ApiError> {
    let (user, token) = authenticate(&ts, &headers).await?;
    if !token.publish {
        return Err(ApiError::MissingScope);
    }
    let file: ToolFile = serde_json::from_slice(&body).map_err(|e| ApiError::InvalidFile(format!("The tool file is not valid: {e}")))?;
    let slug = format!("{}/{}", user.department.name, file.name);
    if !token.allows(&slug) {
        return Err(ApiError::OutOfScope(slug));
    }
    let report = ts.tools().push_tool(&user, file, query.confirm_breaking).await?;
    match report.outcome {
        PushOutcome::TestsFailed => {
            let failed = report.test_results.iter().filter(|r| !r.passed).count();
            Err(ApiError::TestsFailed { failed, total: report.test_results.len(), report: Box::new(report) })
        }
        PushOutcome::Breaking => Err(ApiError::Breaking(Box::new(report))),
        PushOutcome::TestsMissing => Err(ApiError::TestsMissing(Box::new(report))),
        PushOutcome::Published | PushOutcome::PendingReview => Ok(Json(report)),
    }
}
