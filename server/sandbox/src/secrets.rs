//! Outbound-only secrets: values a tool's code may send with `$fetch` but
//! never read. `$env.NAME` holds a placeholder, `{{secret:NAME}}` (as is or
//! percent-encoded); the host fills the value into the header values and the
//! URL query of a request only when it goes to a host the secret is bound to,
//! checked again at every redirect hop, and puts the placeholder back wherever
//! a response (headers, body, URL, error) carries the value.
//!
//! Never in the URL path or the body: paths land in access logs and error
//! pages, and bodies are what APIs store and serve back; headers and the
//! query are where APIs take keys. What host binding cannot stop: a bound
//! host that stores what it is sent, or reflects it transformed beyond the
//! encodings masking knows (`crate::redact`), or in pieces. Binding a secret to a host trusts that host's API,
//! so requests carrying a value may not ask for pieces or compressed copies
//! ([`Refusal::Header`]).

use std::fmt;
use std::sync::{Arc, OnceLock};

use regex::{Captures, Regex};
use reqwest::Url;

use crate::outbound::{host_allowed, split_port};

/// A secret the code reaches only through its placeholder.
#[derive(Clone, PartialEq, Eq)]
pub struct OutboundSecret {
    name: String,
    value: String,
    hosts: Vec<String>,
}

impl OutboundSecret {
    /// `name` is its `$env` name; `hosts` are entries in the `$fetch`
    /// allow-list's syntax (`api.example.com`, `*.example.com`, `host:8443`).
    pub fn new(name: impl Into<String>, value: impl Into<String>, hosts: Vec<String>) -> Self {
        Self { name: name.into(), value: value.into(), hosts }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// For blanking out of whatever a run hands back.
    pub fn value(&self) -> &str {
        &self.value
    }

    fn bound_to(&self, url: &Url) -> bool {
        let (host, port) = (url.host_str().unwrap_or_default(), url.port_or_known_default().unwrap_or(0));
        if self.is_account() && url.scheme() != "https" {
            // A person's token goes in clear only to an entry that names its
            // port (an internal or test service); to any other, https only.
            let with_port: Vec<String> = self.hosts.iter().filter(|h| split_port(h).1.is_some()).cloned().collect();
            return host_allowed(&with_port, host, port);
        }
        host_allowed(&self.hosts, host, port)
    }

    /// A connected account's token (`account.APP`), not the author's secret.
    fn is_account(&self) -> bool {
        self.name.starts_with(ACCOUNT_PREFIX)
    }
}

/// The value stays out of logs and panics.
impl fmt::Debug for OutboundSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboundSecret").field("name", &self.name).field("hosts", &self.hosts).finish_non_exhaustive()
    }
}

/// The name a connected account's token travels under: `account.APP`.
pub const ACCOUNT_PREFIX: &str = "account.";

/// What the code sees in `$env.NAME` for an outbound-only secret.
pub fn placeholder(name: &str) -> String {
    format!("{{{{secret:{name}}}}}")
}

/// Why a request carrying a placeholder was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The request, or a redirect, goes to a host the secret is not bound to.
    NotBound { name: String, hosts: Vec<String>, target: String },
    /// A placeholder where values are never filled in.
    Place { name: String, place: &'static str },
    /// A header that lets the host answer with pieces or a compressed copy,
    /// which masking could not recognise.
    Header { name: String, header: String },
    /// `{account: app}` for an app the tool does not declare.
    Undeclared { app: String },
    /// A person's token anywhere but the `Authorization` header `{account}` sets.
    AccountPlace { app: String, place: &'static str },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotBound { name, hosts, target } => write!(
                f,
                "$fetch refused: secret {name} may be sent only to {} (an entry without a port means 80 and 443), not to {target}; nothing was sent",
                hosts.join(", ")
            ),
            Self::Place { name, place } => write!(
                f,
                "$fetch refused: secret {name} is filled in only in header values and the URL query, not in the {place}; nothing was sent"
            ),
            Self::Header { name, header } => {
                write!(f, "$fetch refused: a request carrying secret {name} may not set the {header} header; nothing was sent")
            }
            Self::AccountPlace { app, place } => write!(
                f,
                "$fetch refused: the caller's token at {app} goes only in the Authorization header that {{account: '{app}'}} sets, not in {place}; nothing was sent"
            ),
            Self::Undeclared { app } => write!(
                f,
                "$fetch refused: this tool does not declare the app {app} (its author adds it under Settings → Connected accounts); nothing was sent"
            ),
        }
    }
}

/// Headers that make a host answer with a piece (`Range`) or a re-encoded
/// copy (`Accept-Encoding`) of what it echoes, or send the request to
/// another site behind the same address (`Host`).
const NOT_WITH_SECRETS: [&str; 4] = ["host", "range", "if-range", "accept-encoding"];

/// The placeholder in any of its forms: braces and colon as is or
/// percent-encoded (`encodeURIComponent($env.KEY)` in a query).
fn pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(r"(?:\{|%7[bB]){2}secret(?::|%3[aA])((?:account\.)?[A-Za-z_][A-Za-z0-9_]*)(?:\}|%7[dD]){2}")
            .expect("the placeholder pattern")
    })
}

/// A run's outbound-only secrets, and the values renewed ones had: those
/// are masked still, never sent.
#[derive(Debug, Clone, Default)]
pub(super) struct Secrets {
    current: Arc<[OutboundSecret]>,
    retired: Arc<[OutboundSecret]>,
}

impl Secrets {
    pub(super) fn new(secrets: Vec<OutboundSecret>) -> Self {
        Self { current: secrets.into(), retired: Arc::new([]) }
    }

    fn named(&self, name: &str) -> Option<&OutboundSecret> {
        self.current.iter().find(|s| s.name == name)
    }

    /// The app and the token of the connected account `headers` carry as
    /// `$fetch`'s `account` writes it.
    pub(super) fn account_in<'a>(&'a self, headers: &'a [(String, String)]) -> Option<(&'a str, &'a str)> {
        let (_, value) = headers.iter().find(|(name, value)| is_account_bearer(name, value))?;
        let secret = self.named_in(value).next()?;
        Some((secret.name.strip_prefix(ACCOUNT_PREFIX)?, &secret.value))
    }

    /// The token of the caller's account at `app` this run holds now.
    pub(super) fn account_token(&self, app: &str) -> Option<&str> {
        self.named(&format!("{ACCOUNT_PREFIX}{app}")).map(|s| s.value.as_str())
    }

    /// The same secrets with `app`'s account token renewed to `token`.
    pub(super) fn renewed(&self, app: &str, token: String) -> Self {
        let name = format!("{ACCOUNT_PREFIX}{app}");
        let old = self.current.iter().filter(|s| s.name == name && s.value != token).cloned();
        let retired = self.retired.iter().cloned().chain(old).collect();
        let current = self
            .current
            .iter()
            .map(|s| if s.name == name { OutboundSecret { value: token.clone(), ..s.clone() } } else { s.clone() })
            .collect();
        Self { current, retired }
    }

    /// A connected account's placeholder naming an account this run does not
    /// carry (the tool does not declare that app): never sent as text.
    fn undeclared_account<'a>(&self, text: &'a str) -> Option<&'a str> {
        pattern()
            .captures_iter(text)
            .filter_map(|c| c.get(1))
            .map(|m| m.as_str())
            .find(|name| name.starts_with(ACCOUNT_PREFIX) && self.named(name).is_none())
    }

    /// The secrets whose placeholder `text` holds; text naming no secret of
    /// this tool is just text.
    fn named_in<'a>(&'a self, text: &'a str) -> impl Iterator<Item = &'a OutboundSecret> + 'a {
        pattern().captures_iter(text).filter_map(|c| self.named(&c[1]))
    }

    fn replace(&self, text: &str, with: impl Fn(&OutboundSecret) -> String) -> String {
        pattern()
            .replace_all(text, |c: &Captures<'_>| match self.named(&c[1]) {
                Some(secret) => with(secret),
                None => c[0].to_owned(),
            })
            .into_owned()
    }

    /// The URL and headers of one hop to `url`, values filled in, or why the
    /// hop may not be sent. Called for every hop, just before it is sent.
    pub(super) fn fill(
        &self,
        url: &Url,
        headers: &[(String, String)],
        body: Option<&str>,
    ) -> Result<(Url, Vec<(String, String)>), Refusal> {
        let every = headers.iter().map(|(_, v)| v.as_str()).chain([url.as_str()]);
        if let Some(name) = every.into_iter().find_map(|text| self.undeclared_account(text)) {
            return Err(Refusal::Undeclared { app: name.trim_start_matches(ACCOUNT_PREFIX).to_owned() });
        }
        if self.current.is_empty() {
            return Ok((url.clone(), headers.to_vec()));
        }
        let mut outside_query = url.clone();
        outside_query.set_query(None);
        let query = url.query().unwrap_or_default();
        let texts = [outside_query.as_str(), query, body.unwrap_or_default()];
        let everywhere = texts.into_iter().chain(headers.iter().flat_map(|(n, v)| [n.as_str(), v.as_str()]));
        let mut carried = Vec::new();
        for secret in everywhere.flat_map(|text| self.named_in(text)) {
            if !secret.bound_to(url) {
                let target = format!("{}:{}", url.host_str().unwrap_or_default(), url.port_or_known_default().unwrap_or(0));
                return Err(Refusal::NotBound { name: secret.name.clone(), hosts: secret.hosts.clone(), target });
            }
            carried.push(secret);
        }
        let Some(first) = carried.first() else {
            return Ok((url.clone(), headers.to_vec()));
        };
        // A person's token goes only where `$fetch`'s `account` puts it: the
        // whole `Authorization` value. Anywhere else (a query, another
        // header) a tool could have an API keep it for its author to read.
        let elsewhere = [(query, "URL query")]
            .into_iter()
            .chain(headers.iter().filter(|(name, value)| !is_account_bearer(name, value)).map(|(_, value)| (value.as_str(), "a header")));
        for (text, place) in elsewhere {
            if let Some(secret) = self.named_in(text).find(|s| s.is_account()) {
                return Err(Refusal::AccountPlace { app: secret.name.trim_start_matches(ACCOUNT_PREFIX).to_owned(), place });
            }
        }
        let places = [(outside_query.as_str(), "URL outside its query"), (body.unwrap_or_default(), "body")];
        let names = headers.iter().map(|(name, _)| (name.as_str(), "header name"));
        if let Some((secret, place)) = places.into_iter().chain(names).find_map(|(text, place)| Some((self.named_in(text).next()?, place)))
        {
            return Err(Refusal::Place { name: secret.name.clone(), place });
        }
        if let Some((header, _)) = headers.iter().find(|(name, _)| NOT_WITH_SECRETS.iter().any(|h| name.eq_ignore_ascii_case(h))) {
            return Err(Refusal::Header { name: first.name.clone(), header: header.clone() });
        }
        let mut filled = url.clone();
        if url.query().is_some() {
            filled.set_query(Some(&self.replace(query, |s| percent_encoded(&s.value))));
        }
        let headers = headers.iter().map(|(name, value)| (name.clone(), self.replace(value, |s| s.value.clone()))).collect();
        Ok((filled, headers))
    }

    /// Whether every placeholder in `text` may go to `next` (a redirect's
    /// target): headers that fail this are dropped, as `Authorization` is
    /// across hosts.
    pub(super) fn may_follow(&self, text: &str, next: &Url) -> bool {
        self.named_in(text).all(|s| s.bound_to(next))
    }

    /// `text` with every copy of a value (as is, percent-, form- or
    /// JSON-encoded, in base64: `crate::redact`) replaced by its placeholder.
    pub(super) fn mask(&self, text: String) -> String {
        self.current.iter().chain(self.retired.iter()).fold(text, |mut text, secret| {
            crate::redact::blank_out(&mut text, &[&secret.value], &placeholder(&secret.name));
            text
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.current.is_empty() && self.retired.is_empty()
    }
}

/// `Authorization: Bearer {{secret:account.APP}}`, as `$fetch`'s `account` writes it.
fn is_account_bearer(name: &str, value: &str) -> bool {
    name.eq_ignore_ascii_case("authorization")
        && value.strip_prefix("Bearer ").is_some_and(|rest| {
            pattern().find(rest).is_some_and(|m| m.start() == 0 && m.end() == rest.len() && rest.contains(ACCOUNT_PREFIX))
        })
}

/// Every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as `%XX`.
fn percent_encoded(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets() -> Secrets {
        Secrets::new(vec![OutboundSecret::new("KEY", "s3cr3t value/x", vec!["api.example.com".into(), "127.0.0.1:8080".into()])])
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn a_placeholder_is_filled_into_header_values_and_the_query_for_a_bound_host() {
        let headers = vec![("Authorization".to_string(), "Bearer {{secret:KEY}}".to_string())];
        let (filled, headers) = secrets().fill(&url("https://api.example.com/v1?key={{secret:KEY}}&q=1"), &headers, None).unwrap();
        assert_eq!(filled.as_str(), "https://api.example.com/v1?key=s3cr3t%20value%2Fx&q=1");
        assert_eq!(headers, [("Authorization".to_string(), "Bearer s3cr3t value/x".to_string())]);
        let encoded = url("http://127.0.0.1:8080/?key=%7B%7Bsecret%3AKEY%7D%7D");
        assert_eq!(secrets().fill(&encoded, &[], None).unwrap().0.as_str(), "http://127.0.0.1:8080/?key=s3cr3t%20value%2Fx");
    }

    #[test]
    fn a_placeholder_bound_elsewhere_is_refused_naming_the_secret_and_its_hosts() {
        for target in ["https://evil.example.org/?k={{secret:KEY}}", "http://api.example.com:8080/?k={{secret:KEY}}"] {
            let refusal = secrets().fill(&url(target), &[], None).unwrap_err();
            assert!(matches!(&refusal, Refusal::NotBound { name, .. } if name == "KEY"), "{refusal}");
            assert!(refusal.to_string().contains("api.example.com, 127.0.0.1:8080"), "{refusal}");
        }
        let header = vec![("x-key".to_string(), "{{secret:KEY}}".to_string())];
        assert!(secrets().fill(&url("https://evil.example.org/"), &header, None).is_err());
    }

    #[test]
    fn a_placeholder_in_the_path_body_or_a_header_name_is_refused_even_for_a_bound_host() {
        let bound = url("https://api.example.com/");
        let refusals = [
            secrets().fill(&url("https://api.example.com/{{secret:KEY}}/x"), &[], None),
            secrets().fill(&bound, &[], Some(r#"{"key":"{{secret:KEY}}"}"#)),
            secrets().fill(&bound, &[("{{secret:KEY}}".into(), "1".into())], None),
            secrets().fill(&url("https://api.example.com/#{{secret:KEY}}"), &[], None),
        ];
        for refusal in refusals {
            assert!(matches!(refusal, Err(Refusal::Place { .. })), "{refusal:?}");
        }
    }

    #[test]
    fn a_request_carrying_a_value_may_not_ask_for_pieces_compression_or_another_host() {
        for header in ["Range", "host", "Accept-Encoding"] {
            let headers = vec![("x-key".to_string(), "{{secret:KEY}}".to_string()), (header.to_string(), "x".to_string())];
            let refusal = secrets().fill(&url("https://api.example.com/"), &headers, None);
            assert!(matches!(refusal, Err(Refusal::Header { .. })), "{header}: {refusal:?}");
        }
        let plain = vec![("Range".to_string(), "bytes=0-1".to_string())];
        assert!(secrets().fill(&url("https://api.example.com/"), &plain, None).is_ok(), "no secret, no rule");
    }

    #[test]
    fn text_naming_no_secret_of_the_tool_is_sent_as_it_is() {
        let headers = vec![("x".to_string(), "{{secret:OTHER}}".to_string())];
        let (filled, headers) = secrets().fill(&url("https://evil.example.org/?a={{secret:OTHER}}"), &headers, None).unwrap();
        assert_eq!(filled.query(), Some("a={{secret:OTHER}}"));
        assert_eq!(headers[0].1, "{{secret:OTHER}}");
    }

    #[test]
    fn echoed_values_in_any_common_encoding_are_masked() {
        let echoed = [
            "s3cr3t value/x",
            "s3cr3t%20value%2Fx",
            "s3cr3t%20value%2fx",
            "s3cr3t+value%2Fx",
            r"s3cr3t value\/x",
            r"s3cr3t\u0020value\u002fx",
            r"s3cr3t\u0020value\u002Fx",
        ];
        for copy in echoed {
            assert_eq!(secrets().mask(format!("<{copy}>")), "<{{secret:KEY}}>", "{copy}");
        }
    }

    #[test]
    fn a_redirect_keeps_only_headers_whose_secrets_are_bound_to_its_target() {
        assert!(secrets().may_follow("Bearer {{secret:KEY}}", &url("http://127.0.0.1:8080/next")));
        assert!(!secrets().may_follow("Bearer {{secret:KEY}}", &url("http://127.0.0.1:8081/next")));
        assert!(secrets().may_follow("no secret here", &url("http://elsewhere.test/")));
    }

    #[test]
    fn the_value_never_shows_in_debug_output() {
        let debug = format!("{:?}", secrets());
        assert!(debug.contains("KEY") && !debug.contains("s3cr3t"), "{debug}");
    }

    #[test]
    fn a_connected_accounts_token_goes_to_its_apps_hosts_only_and_an_undeclared_app_is_refused() {
        let jira = Secrets::new(vec![OutboundSecret::new("account.jira", "tok-ada", vec!["jira.example.com".into()])]);
        let bearer = vec![("Authorization".to_string(), format!("Bearer {}", placeholder("account.jira")))];
        let (_, headers) = jira.fill(&url("https://jira.example.com/rest/api/3/myself"), &bearer, None).unwrap();
        assert_eq!(headers[0].1, "Bearer tok-ada");
        let elsewhere = jira.fill(&url("https://evil.example.org/"), &bearer, None).unwrap_err();
        assert!(matches!(&elsewhere, Refusal::NotBound { name, .. } if name == "account.jira"), "{elsewhere}");
        assert!(!jira.may_follow(&bearer[0].1, &url("https://evil.example.org/")), "a redirect elsewhere drops it");
        let github = vec![("Authorization".to_string(), format!("Bearer {}", placeholder("account.github")))];
        for secrets in [jira.clone(), Secrets::default()] {
            let refused = secrets.fill(&url("https://api.github.com/user"), &github, None).unwrap_err();
            assert_eq!(refused, Refusal::Undeclared { app: "github".into() });
            assert!(refused.to_string().contains("does not declare the app github"), "{refused}");
        }
        assert_eq!(jira.mask("echo tok-ada".into()), "echo {{secret:account.jira}}");
        // Not where an API could keep it: a query, another header.
        let query = jira.fill(&url(&format!("https://jira.example.com/post?text={}", placeholder("account.jira"))), &[], None);
        assert_eq!(query.unwrap_err(), Refusal::AccountPlace { app: "jira".into(), place: "URL query" });
        let other = vec![("X-Note".to_string(), placeholder("account.jira"))];
        assert_eq!(
            jira.fill(&url("https://jira.example.com/"), &other, None).unwrap_err(),
            Refusal::AccountPlace { app: "jira".into(), place: "a header" }
        );
        // Over plain http only to an entry that names its port; a downgrade drops it.
        assert!(matches!(jira.fill(&url("http://jira.example.com/"), &bearer, None), Err(Refusal::NotBound { .. })));
        assert!(!jira.may_follow(&bearer[0].1, &url("http://jira.example.com/next")));
        let local = Secrets::new(vec![OutboundSecret::new("account.people", "tok-bo", vec!["127.0.0.1:8080".into()])]);
        let to_local = vec![("Authorization".to_string(), format!("Bearer {}", placeholder("account.people")))];
        assert_eq!(local.fill(&url("http://127.0.0.1:8080/me"), &to_local, None).unwrap().1[0].1, "Bearer tok-bo");
    }
}
