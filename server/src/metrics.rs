//! `GET /metrics`: this process's metrics in the Prometheus text format, for
//! whoever holds `TOOLSHED_METRICS_TOKEN` as a bearer token (the domain
//! decides). Unset, the route answers 404 as if it did not exist.

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use toolshed_domain::metrics::{Refused, CONTENT_TYPE};
use toolshed_domain::Toolshed;

pub fn routes(toolshed: Toolshed) -> Router {
    Router::new().route("/metrics", get(move |headers: HeaderMap| async move { scrape(&toolshed, &headers) }))
}

fn scrape(toolshed: &Toolshed, headers: &HeaderMap) -> Response {
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer ")).map(str::trim);
    match toolshed.render_metrics(bearer) {
        Ok(text) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response(),
        Err(Refused::Off) => StatusCode::NOT_FOUND.into_response(),
        Err(Refused::WrongToken) => {
            (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], "/metrics needs the metrics token as a bearer token\n")
                .into_response()
        }
    }
}
