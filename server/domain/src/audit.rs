//! The audit log: one row per state change, written inside the same transaction
//! as the change itself so the log can never disagree with the data.

use crate::ids::UserId;
use crate::store::{StoreError, Tx};

pub async fn record(
    tx: &mut Tx,
    actor: Option<UserId>,
    action: &str,
    target: &str,
    before: Option<serde_json::Value>,
    after: Option<serde_json::Value>,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO audit_log (at_ms, actor_id, action, target, before_json, after_json) VALUES ($1, $2, $3, $4, $5, $6)")
        .bind(crate::now_ms())
        .bind(actor.map(|a| a.0))
        .bind(action)
        .bind(target)
        .bind(before.map(|v| v.to_string()))
        .bind(after.map(|v| v.to_string()))
        .execute(&mut **tx)
        .await?;
    // Whatever changed may be in the call cache: `store::Tx::commit` empties it.
    tx.audited();
    Ok(())
}
