//! Calls that ask (`$input`, `$ask`) take rounds: each round runs the tool
//! again with every answer so far. Between rounds of MCP 2026-07-28's
//! input-required results the earlier answers travel with the client as its
//! `requestState`: sealed under the deployment's key (so any replica opens it,
//! and the client can read nothing and change nothing), bound to the caller,
//! the endpoint, the tool and its arguments (so it cannot be carried to
//! another call), and expiring. The state also names the questions its
//! round asked, so the client's `inputResponses` are taken as the answers to
//! those questions only.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::ids::UserId;
use crate::sandbox::{canonical_json, fingerprint, Answer, Input};
use crate::secrets::SecretBox;

/// How long a round's state may wait for the client's next round.
const STATE_TTL_MS: i64 = 60 * 60 * 1000;
/// Rounds one call may take, whichever way they travel: a tool that asks
/// forever must end.
pub const MAX_ROUNDS: usize = 10;

/// One call that may take several rounds.
pub struct AskedCall<'a> {
    pub user: UserId,
    /// The endpoint's listing (`department/name`, or `me`).
    pub endpoint: &'a str,
    /// The name the call used.
    pub tool: &'a str,
    pub arguments: &'a Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("requestState was not given by this server for this call (changed, or another call's); call the tool again without it")]
    NotOurs,
    #[error("requestState has expired; call the tool again without it")]
    Expired,
    #[error("requestState has taken {MAX_ROUNDS} rounds; call the tool again without it")]
    TooManyRounds,
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    expires_ms: i64,
    round: usize,
    input: Input,
    /// The questions this round asked: key → fingerprint.
    asked: BTreeMap<String, String>,
    /// The key the call's last admitted round was given, or the request it waits on ([`crate::tools::approvals`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approval: Option<String>,
}

/// A round's state, opened: where the call stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// Rounds taken so far.
    pub number: usize,
    /// Every answer so far.
    pub input: Input,
    /// The key the call's last admitted round was given, or the request it waits on.
    pub approval: Option<String>,
    asked: BTreeMap<String, String>,
}

impl Round {
    /// Takes the client's `inputResponses` as the answers to the questions
    /// this round asked. A response under any other key answers nothing.
    pub fn answered(mut self, responses: impl IntoIterator<Item = (String, Value)>) -> Input {
        for (key, answer) in responses {
            if let Some(question) = self.asked.get(&key) {
                self.input.give(key, Answer { question: question.clone(), answer });
            }
        }
        self.input
    }
}

impl AskedCall<'_> {
    /// Binds a state to this call: what is sealed for one call opens for no
    /// other. The arguments are hashed with their keys sorted, so a client
    /// that sends them back in another order is the same call.
    fn purpose(&self) -> String {
        let arguments = Sha256::digest(canonical_json(&Value::Object(self.arguments.clone())));
        format!("mcp.request-state:{}:{}:{}:{}", self.user.0, self.endpoint, self.tool, hex::encode(arguments))
    }

    /// The state after round `round` (from 1), which asked `asked`, with
    /// the answers so far and the call's approval.
    pub fn seal(&self, secrets: &SecretBox, round: usize, (input, approval): (&Input, Option<&str>), asked: &Map<String, Value>) -> String {
        let asked = asked.iter().map(|(key, question)| (key.clone(), fingerprint(question))).collect();
        let (input, approval) = (input.clone(), approval.map(str::to_owned));
        let sealed = Sealed { expires_ms: crate::now_ms() + STATE_TTL_MS, round, input, asked, approval };
        let json = serde_json::to_string(&sealed).expect("answers and fingerprints serialize");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secrets.seal(&self.purpose(), &json))
    }

    /// The round a state was sealed after.
    pub fn open(&self, secrets: &SecretBox, state: &str) -> Result<Round, StateError> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(state).map_err(|_| StateError::NotOurs)?;
        let json = secrets.open(&self.purpose(), &bytes).map_err(|_| StateError::NotOurs)?;
        let sealed: Sealed = serde_json::from_str(&json).map_err(|_| StateError::NotOurs)?;
        if sealed.expires_ms < crate::now_ms() {
            return Err(StateError::Expired);
        }
        if sealed.round >= MAX_ROUNDS {
            return Err(StateError::TooManyRounds);
        }
        Ok(Round { number: sealed.round, input: sealed.input, approval: sealed.approval, asked: sealed.asked })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call<'a>(user: i64, tool: &'a str, arguments: &'a Map<String, Value>) -> AskedCall<'a> {
        AskedCall { user: UserId(user), endpoint: "ops/deploy", tool, arguments }
    }

    fn question(message: &str) -> Value {
        json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {"type": "object", "properties": {}}}})
    }

    #[test]
    fn a_state_opens_only_for_the_call_it_was_sealed_for() {
        let secrets = SecretBox::ephemeral();
        let args = json!({"service": "api", "region": "eu"}).as_object().cloned().unwrap();
        let asked = json!({"ask1": question("Deploy?")}).as_object().cloned().unwrap();
        let state = call(1, "deploy", &args).seal(&secrets, 1, (&Input::default(), None), &asked);
        assert_eq!(call(1, "deploy", &args).open(&secrets, &state).unwrap().number, 1);
        // The same arguments in another key order are the same call.
        let reordered: Map<String, Value> = serde_json::from_str(r#"{"region": "eu", "service": "api"}"#).unwrap();
        assert!(call(1, "deploy", &reordered).open(&secrets, &state).is_ok());

        let other_args = json!({"service": "db"}).as_object().cloned().unwrap();
        assert_eq!(call(2, "deploy", &args).open(&secrets, &state), Err(StateError::NotOurs), "another caller");
        assert_eq!(call(1, "rollback", &args).open(&secrets, &state), Err(StateError::NotOurs), "another tool");
        assert_eq!(call(1, "deploy", &other_args).open(&secrets, &state), Err(StateError::NotOurs), "other arguments");
        assert_eq!(call(1, "deploy", &args).open(&SecretBox::ephemeral(), &state), Err(StateError::NotOurs), "another key");
        let mut tampered = state.clone();
        tampered.push_str("-TAMPERED");
        assert_eq!(call(1, "deploy", &args).open(&secrets, &tampered), Err(StateError::NotOurs));
        assert_eq!(call(1, "deploy", &args).open(&secrets, "not base64 !"), Err(StateError::NotOurs));
    }

    #[test]
    fn responses_answer_only_the_questions_the_round_asked() {
        let secrets = SecretBox::ephemeral();
        let args = Map::new();
        let asked = json!({"ask1": question("Deploy?")}).as_object().cloned().unwrap();
        let state = call(1, "t", &args).seal(&secrets, 1, (&Input::default(), None), &asked);
        let responses = json!({"ask1": {"action": "accept"}, "ask2": {"action": "accept"}}).as_object().cloned().unwrap();
        let input = call(1, "t", &args).open(&secrets, &state).unwrap().answered(responses);
        let keys: Vec<&String> = input.answers().keys().collect();
        assert_eq!(keys, ["ask1"], "ask2 was never asked");
        assert_eq!(input.answers()["ask1"], Answer::to(&asked["ask1"], json!({"action": "accept"})));

        // The next round's state carries that answer, bound to its question.
        let state = call(1, "t", &args).seal(&secrets, 2, (&input, Some("a1")), &Map::new());
        let opened = call(1, "t", &args).open(&secrets, &state).unwrap();
        assert_eq!((opened.input, opened.approval.as_deref()), (input, Some("a1")), "and the approval the call runs under");
    }

    #[test]
    fn a_call_cannot_ask_forever() {
        let secrets = SecretBox::ephemeral();
        let args = Map::new();
        let state = call(1, "t", &args).seal(&secrets, MAX_ROUNDS, (&Input::default(), None), &Map::new());
        assert_eq!(call(1, "t", &args).open(&secrets, &state), Err(StateError::TooManyRounds));
    }
}
