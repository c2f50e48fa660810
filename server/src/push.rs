//! `toolshed push tool.json`: sends a tool file to a Toolshed server's REST
//! API (`POST /api/v1/tools`) with a publish-scoped token, prints what
//! happened (a new title and description waiting for review included), and
//! fails (exit code 1) unless the version was published or waits for review;
//! a refused push changes nothing. A version that may break calls made to
//! the published one is refused unless `--allow-breaking` says so. A
//! `code_file` in the tool file is read relative to it and sent as `code`, so
//! the code can live in its own `.js` file.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::Value;

#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The tool file (JSON; see README, "Publishing from CI").
    pub file: PathBuf,
    /// The Toolshed server.
    #[arg(long, env = "TOOLSHED_URL", default_value = "http://127.0.0.1:3000")]
    pub url: String,
    /// An API token with the publish scope.
    #[arg(long, env = "TOOLSHED_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Publish even when the new arguments may break calls made to the
    /// published version (an argument removed, retyped or newly required).
    #[arg(long)]
    pub allow_breaking: bool,
}

/// The tool file with `code_file` replaced by the file's contents as `code`.
fn read_tool_file(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut file: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let Some(obj) = file.as_object_mut() else { bail!("{} must hold a JSON object", path.display()) };
    if let Some(code_file) = obj.remove("code_file") {
        let Some(name) = code_file.as_str() else { bail!("code_file must be a path") };
        if obj.contains_key("code") {
            bail!("give code or code_file, not both");
        }
        let code_path = path.parent().unwrap_or(Path::new(".")).join(name);
        let code = std::fs::read_to_string(&code_path).with_context(|| format!("cannot read {}", code_path.display()))?;
        obj.insert("code".into(), Value::String(code));
    }
    Ok(file)
}

pub async fn run(args: PushArgs) -> anyhow::Result<()> {
    let file = read_tool_file(&args.file)?;
    let url = format!("{}/api/v1/tools", args.url.trim_end_matches('/'));
    let res = reqwest::Client::new()
        .post(&url)
        .query(&[("confirm_breaking", args.allow_breaking)])
        .bearer_auth(args.token.trim())
        .json(&file)
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let status = res.status();
    let body: Value = res.json().await.with_context(|| format!("{url} answered {status} without JSON"))?;
    for r in body["test_results"].as_array().into_iter().flatten() {
        let mark = if r["passed"] == true { "pass" } else { "FAIL" };
        println!("  {mark} {} ({:.0} ms)", r["name"].as_str().unwrap_or_default(), r["duration_ms"].as_f64().unwrap_or_default());
        if r["passed"] != true {
            if let Some(reason) = r["reason"].as_str() {
                println!("       why:      {reason}");
            }
            if let Some(expected) = r["expected"].as_str() {
                println!("       expected: {expected}");
            }
            println!("       actual:   {}", r["actual"].as_str().unwrap_or_default());
        }
    }
    for change in body["breaking"].as_array().into_iter().flatten() {
        println!("  breaking: {}", change.as_str().unwrap_or_default());
    }
    if let Some(error) = body.get("error") {
        bail!("{} ({status}, {})", error["message"].as_str().unwrap_or_default(), error["code"].as_str().unwrap_or_default());
    }
    let tool = body["tool"].as_str().unwrap_or_default();
    let version = body["version"].as_i64().unwrap_or_default();
    let saved = match (body["created"] == true, body["new_version"] == true) {
        (true, _) => "created, version saved",
        (false, true) => "version saved",
        (false, false) => "unchanged since the latest version",
    };
    let outcome = match body["outcome"].as_str() {
        Some("published") => "published",
        Some("pending_review") => "waiting for an administrator's review",
        other => bail!("unexpected answer from {url}: {other:?}"),
    };
    let text = match body["text_waiting_for_review"] == true {
        true => "; the new title and description wait for an administrator's review",
        false => "",
    };
    println!("{tool} v{version}: {saved}; {outcome}{text}.");
    Ok(())
}
