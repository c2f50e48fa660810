//! What a tool is served as on MCP endpoints. Most are tools; a prompt is a
//! tool whose value is the prompt's messages, a resource one whose value is
//! the contents at its URI. Both are written, tested, versioned, published,
//! reviewed and approved as any tool is: only the MCP methods that reach
//! them differ (`prompts/*`, `resources/*` instead of `tools/*`).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::Invalid;
use crate::schema::ArgDef;

/// What a listing's tool is served as, as its author set it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Serves {
    #[default]
    Tool,
    /// In `prompts/list`; its arguments are the prompt's.
    Prompt,
    /// In `resources/list` (a fixed URI) or `resources/templates/list` (a
    /// URI template, whose variables are the tool's arguments).
    Resource { uri: ResourceUri, mime: MimeType },
}

impl Serves {
    /// From the editor's fields (`uri` and `mime` count for a resource only).
    pub fn parse(kind: &str, uri: &str, mime: &str) -> Result<Self, Invalid> {
        match kind {
            "tool" => Ok(Self::Tool),
            "prompt" => Ok(Self::Prompt),
            "resource" => Ok(Self::Resource { uri: ResourceUri::parse(uri)?, mime: MimeType::parse(mime)? }),
            _ => Err(Invalid { field: "Served as", reason: "must be a tool, a prompt or a resource".into() }),
        }
    }

    /// As stored: the kind, and a resource's URI and MIME type.
    pub fn from_columns(kind: &str, uri: Option<String>, mime: Option<String>) -> Self {
        match (kind, uri, mime) {
            ("prompt", ..) => Self::Prompt,
            ("resource", Some(uri), Some(mime)) => Self::Resource { uri: ResourceUri(uri), mime: MimeType(mime) },
            _ => Self::Tool,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Prompt => "prompt",
            Self::Resource { .. } => "resource",
        }
    }

    pub fn uri(&self) -> Option<&ResourceUri> {
        match self {
            Self::Resource { uri, .. } => Some(uri),
            _ => None,
        }
    }

    pub fn mime(&self) -> Option<&MimeType> {
        match self {
            Self::Resource { mime, .. } => Some(mime),
            _ => None,
        }
    }
}

/// A resource's URI, or a URI template whose `{name}` variables each stand
/// for one path segment (RFC 6570's level 1, which is what MCP clients fill in).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceUri(String);

const FIELD: &str = "Resource URI";

impl ResourceUri {
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let bad = |reason: &str| Invalid { field: FIELD, reason: reason.into() };
        let s = raw.trim();
        if s.is_empty() {
            return Err(bad("is required for a resource"));
        }
        if s.len() > 500 {
            return Err(bad("must be at most 500 characters"));
        }
        let scheme = s.split_once(':').map(|(scheme, _)| scheme).unwrap_or_default();
        let scheme_ok =
            scheme.starts_with(|c: char| c.is_ascii_alphabetic()) && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
        if !scheme_ok {
            return Err(bad("must start with a scheme, as in test://report or docs://{id}"));
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("must not contain spaces"));
        }
        let parts = parts(s).ok_or_else(|| bad("each {variable} must be a name (letters, digits, _) and close"))?;
        if parts.windows(2).any(|w| matches!(w, [Part::Variable(_), Part::Variable(_)])) {
            return Err(bad("two {variables} must have something between them"));
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether it has variables (`resources/templates/list`) or not (`resources/list`).
    pub fn is_template(&self) -> bool {
        self.0.contains('{')
    }

    /// Refuses a URI that cannot be read with `args`: a variable that is not
    /// one of them, or a required one the URI does not fill.
    pub fn fits(&self, args: &[ArgDef]) -> Result<(), Invalid> {
        let bad = |reason: String| Invalid { field: FIELD, reason };
        let variables: Vec<&str> = parts(&self.0)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| match p {
                Part::Variable(name) => Some(name),
                Part::Literal(_) => None,
            })
            .collect();
        if let Some(v) = variables.iter().find(|v| !args.iter().any(|a| a.name == **v)) {
            return Err(bad(format!("{{{v}}} is not one of the tool's arguments")));
        }
        match args.iter().find(|a| a.required && !variables.contains(&a.name.as_str())) {
            Some(a) => {
                Err(bad(format!("the tool's required argument “{0}” is not in it: add {{{0}}}, or make the argument optional", a.name)))
            }
            None => Ok(()),
        }
    }

    /// The variables' values when `uri` is one this names, else `None`. A
    /// value is one path segment: not empty, no `/`, `?` or `#`, percent-decoded
    /// (RFC 6570 encodes what is not allowed in a URI), and still no `/` once decoded.
    pub fn matches(&self, uri: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
        let parts = parts(&self.0)?;
        let mut values = serde_json::Map::new();
        let mut rest = uri;
        for (i, part) in parts.iter().enumerate() {
            match part {
                Part::Literal(text) => rest = rest.strip_prefix(text)?,
                Part::Variable(name) => {
                    // A value runs to the next literal (or the end), within one segment.
                    let end = match parts.get(i + 1) {
                        Some(Part::Literal(next)) => rest.find(next)?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.contains(['/', '?', '#']) {
                        return None;
                    }
                    let decoded = percent_encoding::percent_decode_str(value).decode_utf8().ok()?;
                    if decoded.contains('/') {
                        return None;
                    }
                    values.insert((*name).to_owned(), serde_json::Value::String(decoded.into_owned()));
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(values)
    }
}

impl fmt::Display for ResourceUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

enum Part<'a> {
    Literal(&'a str),
    Variable(&'a str),
}

/// A template's literals and variables, or `None` for a brace that does not close on a name.
fn parts(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return None;
        }
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let close = rest[open..].find('}')? + open;
        let name = &rest[open + 1..close];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        parts.push(Part::Variable(name));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    Some(parts)
}

/// A resource's media type, `type/subtype` (what `resources/read` says its text is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MimeType(String);

impl MimeType {
    /// An empty field means plain text.
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = raw.trim().to_ascii_lowercase();
        if s.is_empty() {
            return Ok(Self("text/plain".into()));
        }
        let token = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c));
        match s.split_once('/') {
            Some((kind, sub)) if s.len() <= 100 && token(kind) && token(sub) => Ok(Self(s)),
            _ => Err(Invalid { field: "MIME type", reason: "must be a type/subtype, as in text/markdown or application/json".into() }),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_uri_matches_only_itself() {
        let uri = ResourceUri::parse("test://static-text").unwrap();
        assert!(!uri.is_template());
        assert_eq!(uri.matches("test://static-text"), Some(Default::default()));
        assert_eq!(uri.matches("test://static-text/more"), None);
        assert_eq!(uri.matches("test://static"), None);
    }

    #[test]
    fn a_template_fills_each_variable_with_one_segment() {
        let uri = ResourceUri::parse("test://template/{id}/data").unwrap();
        assert!(uri.is_template());
        let values = uri.matches("test://template/123/data").unwrap();
        assert_eq!(values["id"], "123");
        assert_eq!(uri.matches("test://template//data"), None, "empty");
        assert_eq!(uri.matches("test://template/1/2/data"), None, "two segments");
        assert_eq!(uri.matches("test://template/123/data/x"), None, "more after");
        let two = ResourceUri::parse("repo://{owner}/{name}").unwrap();
        let values = two.matches("repo://acme/tools").unwrap();
        assert_eq!((values["owner"].as_str(), values["name"].as_str()), (Some("acme"), Some("tools")));
        assert_eq!(two.matches("repo://acme/tools?x=1"), None);
        let spaced = uri.matches("test://template/Getting%20started/data").unwrap();
        assert_eq!(spaced["id"], "Getting started", "decoded");
        assert_eq!(uri.matches("test://template/a%2Fb/data"), None, "an encoded slash is still two segments");
        assert_eq!(uri.matches("test://template/%FF/data"), None, "not UTF-8");
    }

    #[test]
    fn uris_without_a_scheme_or_with_broken_variables_are_refused() {
        for bad in ["", "static-text", "://x", "1x://y", "test://a b", "test://{id", "test://{}", "test://{a-b}", "test://x}", "t://{a}{b}"]
        {
            assert!(ResourceUri::parse(bad).is_err(), "{bad:?}");
        }
        assert!(ResourceUri::parse("docs://{id}.md").is_ok());
    }

    #[test]
    fn a_uri_fits_a_tool_whose_arguments_it_fills() {
        let arg = |name: &str, required| -> ArgDef {
            serde_json::from_value(serde_json::json!({"name": name, "type": {"kind": "string"}, "required": required})).unwrap()
        };
        let uri = ResourceUri::parse("docs://{section}").unwrap();
        assert!(uri.fits(&[arg("section", true), arg("lang", false)]).is_ok());
        assert!(uri.fits(&[arg("sectoin", true)]).unwrap_err().reason.contains("{section} is not one of"));
        let fixed = ResourceUri::parse("docs://all").unwrap();
        assert!(fixed.fits(&[arg("lang", true)]).unwrap_err().reason.contains("“lang” is not in it"));
        assert!(fixed.fits(&[]).is_ok());
    }

    #[test]
    fn a_mime_type_is_a_type_and_a_subtype_and_defaults_to_plain_text() {
        assert_eq!(MimeType::parse("").unwrap().as_str(), "text/plain");
        assert_eq!(MimeType::parse(" Application/JSON ").unwrap().as_str(), "application/json");
        for bad in ["json", "text/", "/plain", "text/plain; charset=utf-8", "a/b/c"] {
            assert!(MimeType::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_setting_parses_from_the_editor_and_round_trips_through_its_columns() {
        let r = Serves::parse("resource", "test://template/{id}/data", "application/json").unwrap();
        let back = Serves::from_columns(r.kind(), r.uri().map(|u| u.as_str().to_owned()), r.mime().map(|m| m.as_str().to_owned()));
        assert_eq!(back, r);
        assert_eq!(Serves::parse("prompt", "ignored", "ignored").unwrap(), Serves::Prompt);
        assert!(Serves::parse("resource", "", "").is_err());
        assert!(Serves::parse("widget", "", "").is_err());
    }
}
