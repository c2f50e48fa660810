//! Validated newtypes for everything a person types: parse once at the edge,
//! and the rest of the code can rely on the value being well-formed.

use std::fmt;

/// Why a typed value was refused; the message is shown to the person as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Invalid {
    pub field: &'static str,
    pub reason: String,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> Invalid {
    Invalid { field, reason: reason.into() }
}

/// A slug: lowercase ASCII letters, digits, `-` and `_`, starting with a letter.
fn parse_slug(field: &'static str, raw: &str, max: usize) -> Result<String, Invalid> {
    let s = raw.trim().to_ascii_lowercase();
    if s.is_empty() {
        return Err(invalid(field, "is required"));
    }
    if s.chars().count() > max {
        return Err(invalid(field, format!("must be at most {max} characters")));
    }
    if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(invalid(field, "must start with a letter"));
    }
    if !s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_') {
        return Err(invalid(field, "may contain only letters, digits, '-' and '_'"));
    }
    Ok(s)
}

pub(crate) fn parse_text(field: &'static str, raw: &str, max: usize) -> Result<String, Invalid> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(invalid(field, "is required"));
    }
    if s.chars().count() > max {
        return Err(invalid(field, format!("must be at most {max} characters")));
    }
    if s.chars().any(char::is_control) {
        return Err(invalid(field, "must not contain control characters"));
    }
    Ok(s.to_owned())
}

macro_rules! string_newtype {
    ($name:ident) => {
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

/// A login name; case-insensitive, stored lowercase.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Username(String);
string_newtype!(Username);

impl Username {
    pub const MAX: usize = 32;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = parse_slug("Username", raw, Self::MAX)?;
        if s.len() < 2 {
            return Err(invalid("Username", "must be at least 2 characters"));
        }
        Ok(Self(s))
    }
}

/// The name shown next to a person's work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisplayName(String);
string_newtype!(DisplayName);

impl DisplayName {
    pub const MAX: usize = 64;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        parse_text("Display name", raw, Self::MAX).map(Self)
    }
}

/// A department's URL slug, e.g. `finance` in `/mcp/tools/finance/fx_rate`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DepartmentName(String);
string_newtype!(DepartmentName);

impl DepartmentName {
    pub const MAX: usize = 32;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        parse_slug("Department", raw, Self::MAX).map(Self)
    }
}

/// A new password, checked for strength; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct NewPassword(String);

impl fmt::Debug for NewPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewPassword(***)")
    }
}

impl NewPassword {
    pub const MIN: usize = 10;
    pub const MAX: usize = 256;
    /// Long enough, not containing the username, and not guessable: zxcvbn
    /// (dictionaries of common passwords, names and words, keyboard walks,
    /// sequences, dates) must estimate at least 10^8 guesses (score 3 of 4).
    pub fn parse(raw: &str, username: &Username) -> Result<Self, Invalid> {
        let n = raw.chars().count();
        if n == 0 {
            return Err(invalid("Password", "is required"));
        }
        if n < Self::MIN {
            return Err(invalid("Password", format!("must be at least {} characters", Self::MIN)));
        }
        if n > Self::MAX {
            return Err(invalid("Password", format!("must be at most {} characters", Self::MAX)));
        }
        if raw.to_ascii_lowercase().contains(username.as_str()) {
            return Err(invalid("Password", "must not contain the username"));
        }
        let estimate = zxcvbn::zxcvbn(raw, &[username.as_str()]);
        if estimate.score() < zxcvbn::Score::Three {
            // zxcvbn's warning is a sentence of its own ("This is a very common password.").
            let why = estimate
                .feedback()
                .and_then(|f| f.warning())
                .map(|w| format!(" {}.", w.to_string().trim_end_matches('.')))
                .unwrap_or_default();
            return Err(invalid("Password", format!("is too easy to guess.{why} A few unrelated words make a strong one.")));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// A role within one's own department, in increasing power.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Browses, runs and connects to the department's listings.
    Member,
    /// And creates, edits and publishes them.
    Author,
    /// And invites people, approves requests to join and changes roles.
    Maintainer,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Member, Role::Author, Role::Maintainer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Member => "member",
            Role::Author => "author",
            Role::Maintainer => "maintainer",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == raw.trim())
            .ok_or_else(|| Invalid { field: "Role", reason: "must be member, author or maintainer".into() })
    }

    /// From the `role` column; the CHECK constraint keeps it one of ours, and
    /// anything else is an error rather than some default power.
    pub(crate) fn from_column(raw: &str) -> Result<Self, sqlx::Error> {
        Role::parse(raw).map_err(|e| sqlx::Error::Decode(e.to_string().into()))
    }
}

/// What a bundle's endpoint lists (its code mode, `crate::code_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodeMode {
    /// The members, one MCP tool each.
    #[default]
    Off,
    /// `run_code` alone.
    Instead,
    /// `run_code` and the members.
    Beside,
}

impl CodeMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CodeMode::Off => "off",
            CodeMode::Instead => "instead",
            CodeMode::Beside => "beside",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        match raw {
            "off" => Ok(CodeMode::Off),
            "instead" => Ok(CodeMode::Instead),
            "beside" => Ok(CodeMode::Beside),
            _ => Err(Invalid { field: "Code mode", reason: "must be off, instead or beside".into() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guessable_password_is_refused_in_plain_sentences() {
        let ada = Username::parse("ada").unwrap();
        let common = NewPassword::parse("password1234", &ada).unwrap_err().to_string();
        assert_eq!(common, "Password: is too easy to guess. This is a very common password. A few unrelated words make a strong one.");
        let weak = NewPassword::parse("qwertyuiop1", &ada).unwrap_err().to_string();
        assert!(weak.starts_with("Password: is too easy to guess.") && !weak.contains("(") && !weak.contains(".."), "{weak}");
    }

    #[test]
    fn usernames_are_trimmed_and_lowercased() {
        assert_eq!(Username::parse("  Alice_1 ").unwrap().as_str(), "alice_1");
    }

    #[test]
    fn usernames_reject_spaces_symbols_and_overlong_input() {
        for bad in ["", "a", "al ice", "al;ce", "1alice", &"a".repeat(33), "ålice"] {
            assert!(Username::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn display_names_reject_control_characters_and_overlong_input() {
        assert!(DisplayName::parse("Ada\u{0}Lovelace").is_err());
        assert!(DisplayName::parse(&"x".repeat(65)).is_err());
        assert_eq!(DisplayName::parse(" Ada Lovelace ").unwrap().as_str(), "Ada Lovelace");
    }

    #[test]
    fn weak_passwords_are_refused_with_a_reason() {
        let u = Username::parse("alice").unwrap();
        assert_eq!(NewPassword::parse("", &u).unwrap_err().reason, "is required");
        assert!(NewPassword::parse("short", &u).unwrap_err().reason.contains("at least 10"));
        for common in ["aaaaaaaaaaaa", "1234567890", "password12", "qwertyuiop", "iloveyou2024", "Summer2024!"] {
            assert!(NewPassword::parse(common, &u).unwrap_err().reason.contains("easy"), "{common}");
        }
        assert!(NewPassword::parse("xx-alice-2024!", &u).unwrap_err().reason.contains("username"));
        assert!(NewPassword::parse("correct horse battery", &u).is_ok());
    }

    #[test]
    fn passwords_never_appear_in_debug_output() {
        let u = Username::parse("bob").unwrap();
        let p = NewPassword::parse("correct horse battery", &u).unwrap();
        assert!(!format!("{p:?}").contains("horse"));
    }
}

/// A tool or bundle name as MCP requires it: `^[A-Za-z0-9_-]{1,64}$`, unique
/// within its department. Case is kept: it is what models see.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolName(String);
string_newtype!(ToolName);

impl ToolName {
    pub const MAX: usize = 64;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = raw.trim();
        if s.is_empty() {
            return Err(invalid("Name", "is required"));
        }
        if s.len() > Self::MAX {
            return Err(invalid("Name", format!("must be at most {} characters", Self::MAX)));
        }
        if !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(invalid("Name", "may contain only letters, digits, '_' and '-' (it is an MCP tool name)"));
        }
        Ok(Self(s.to_owned()))
    }
}

/// A one-line title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Title(String);
string_newtype!(Title);

impl Title {
    pub const MAX: usize = 120;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        parse_text("Title", raw, Self::MAX).map(Self)
    }
}

/// Text of a paragraph or two: required, bounded, line breaks allowed.
fn parse_paragraph(field: &'static str, raw: &str, max: usize) -> Result<String, Invalid> {
    let s = raw.trim().replace("\r\n", "\n");
    if s.is_empty() {
        return Err(invalid(field, "is required"));
    }
    if s.chars().count() > max {
        return Err(invalid(field, format!("must be at most {max} characters")));
    }
    if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(invalid(field, "must not contain control characters"));
    }
    Ok(s)
}

/// Why someone reports a listing to the admins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportReason(String);
string_newtype!(ReportReason);

impl ReportReason {
    pub const MAX: usize = 1000;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        parse_paragraph("Reason", raw, Self::MAX).map(Self)
    }
}

/// An admin's note on a moderation action: the author reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModerationNote(String);
string_newtype!(ModerationNote);

impl ModerationNote {
    pub const MAX: usize = 1000;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        parse_paragraph("Note", raw, Self::MAX).map(Self)
    }
}

/// Markdown that a model reads; may be empty, must not be a novel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description(String);
string_newtype!(Description);

impl Description {
    pub const MAX: usize = 20_000;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let s = raw.trim();
        if s.chars().count() > Self::MAX {
            return Err(invalid("Description", format!("must be at most {} characters", Self::MAX)));
        }
        Ok(Self(s.replace("\r\n", "\n")))
    }
}

/// Lowercase slugs, at most 10, separated by spaces or commas when typed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tags(Vec<String>);

impl Tags {
    pub const MAX_COUNT: usize = 10;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        let mut tags: Vec<String> = Vec::new();
        for t in raw.split([',', ' ', '\n', '\t']).filter(|t| !t.trim().is_empty()) {
            let t = parse_slug("Tags", t.trim_start_matches('#'), 32)?;
            if !tags.contains(&t) {
                tags.push(t);
            }
        }
        if tags.len() > Self::MAX_COUNT {
            return Err(invalid("Tags", format!("at most {} tags", Self::MAX_COUNT)));
        }
        Ok(Self(tags))
    }

    pub fn as_slice(&self) -> &[String] {
        &self.0
    }

    /// Stored space-separated.
    pub fn joined(&self) -> String {
        self.0.join(" ")
    }
}

/// JavaScript source of a tool: the body of an async function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code(String);
string_newtype!(Code);

impl Code {
    pub const MAX_BYTES: usize = 256 * 1024;
    pub fn parse(raw: &str) -> Result<Self, Invalid> {
        if raw.len() > Self::MAX_BYTES {
            return Err(invalid("Code", format!("must be at most {} KiB", Self::MAX_BYTES / 1024)));
        }
        Ok(Self(raw.replace("\r\n", "\n")))
    }
}

#[cfg(test)]
mod tool_name_tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_mcp_rule() {
        assert_eq!(ToolName::parse(" get_FX-rate ").unwrap().as_str(), "get_FX-rate");
        for bad in ["", "has space", "dot.name", "slash/name", &"x".repeat(65), "ünï"] {
            assert!(ToolName::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tags_are_deduplicated_lowercase_slugs() {
        assert_eq!(Tags::parse("Finance, #fx  finance").unwrap().as_slice(), ["finance", "fx"]);
        assert!(Tags::parse("a;b").is_err());
        assert!(Tags::parse(&(0..11).map(|i| format!("t{i}")).collect::<Vec<_>>().join(" ")).is_err());
    }
}

/// Whether a tool's calls may run as tasks, as its author set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// Every call answers in its request.
    #[default]
    Forbidden,
    /// A call from a client that takes tasks becomes one once it runs long;
    /// other clients wait for it in the request.
    Optional,
    /// Every call is a task; a client that does not take tasks is refused.
    Required,
}

impl TaskSupport {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "forbidden" => Some(Self::Forbidden),
            "optional" => Some(Self::Optional),
            "required" => Some(Self::Required),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

/// One entry of a host list (the `$fetch` allow-list's syntax): a host name,
/// address or `*.domain`, with `:port` or without.
pub(crate) fn parse_host_entry(field: &'static str, entry: &str) -> Result<String, Invalid> {
    let host = entry.to_ascii_lowercase();
    let bare = host.strip_prefix("*.").unwrap_or(&host);
    let ok = !bare.is_empty() && bare.len() <= 253 && bare.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c));
    if !ok {
        return Err(Invalid { field, reason: format!("“{entry}” is not a host name or *.domain, with :port or without") });
    }
    Ok(host)
}
