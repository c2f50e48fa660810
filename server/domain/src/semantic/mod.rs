//! Tool search by meaning: "request a new notebook computer" finds *Order a
//! laptop*, which shares no word with it.
//!
//! A sentence model ([`encoder`]) turns each published tool's title and
//! description into a vector, stored in `listing_vectors` by whichever replica
//! gets there first; every replica keeps all of them in memory (a cache of
//! that table) and compares a query's vector with each. `Catalog::search`
//! merges these neighbours with the full-text ranking; who may see what is
//! still decided in SQL, after this.
//!
//! Optional: without a model folder (`TOOLSHED_EMBEDDING_MODEL`) search is
//! full-text only.

mod encoder;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use sqlx::Row;
use tokio::sync::Semaphore;

pub use encoder::{similarity, Encoder, ModelError};

use crate::changes::ListingChanges;
use crate::ids::ToolId;
use crate::market::SearchText;
use crate::now_ms;
use crate::store::{Db, StoreError};

/// Neighbours below this cosine count as unrelated. For this model, texts on
/// unrelated topics score 0.1–0.2 ("banana smoothie recipe" scores at most
/// 0.15 against 10,000 company tools); written queries score their listing
/// 0.2–0.7, a few lower (those the full-text ranking finds).
const MIN_SIMILARITY: f32 = 0.2;
/// Listings encoded per database round trip while catching up.
const BATCH: i64 = 32;
/// Vectors written this long before the newest one seen are read again: other
/// replicas' clocks and commits may lag a little.
const OVERLAP_MS: i64 = 10_000;
/// Catch up at least this often even when no change was announced.
const IDLE: Duration = Duration::from_secs(30);

/// What a tool's vector is made of.
const SOURCE_SQL: &str = "t.title || ': ' || t.description";

/// A sentence model, loaded once per process however many use it.
#[derive(Clone)]
pub struct SentenceModel {
    /// Its folder's name, stored with each vector: vectors of another model
    /// are not comparable, so they are made again.
    name: String,
    encoder: Arc<Encoder>,
    /// Queries encoded at once: one a core, so a flood of searches queues
    /// instead of taking every blocking thread.
    queries: Arc<Semaphore>,
}

impl std::fmt::Debug for SentenceModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceModel").field("name", &self.name).finish_non_exhaustive()
    }
}

impl SentenceModel {
    /// The sentence-transformers model folder `dir` (see [`Encoder::load`]).
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        static LOADED: OnceLock<Mutex<HashMap<PathBuf, Arc<Encoder>>>> = OnceLock::new();
        let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        let encoder = match loaded.get(dir) {
            Some(e) => e.clone(),
            None => loaded.entry(dir.to_owned()).or_insert(Arc::new(Encoder::load(dir)?)).clone(),
        };
        let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Self { name, encoder, queries: Arc::new(Semaphore::new(cores)) })
    }

    /// `text`'s meaning as a unit vector (CPU-bound: off the async workers).
    async fn encode(&self, text: String) -> Vec<f32> {
        let _turn = self.queries.acquire().await.expect("the semaphore is never closed");
        let encoder = self.encoder.clone();
        tokio::task::spawn_blocking(move || encoder.encode(&text)).await.expect("encoding does not panic")
    }
}

/// The vectors of every published tool of one database, and its model.
pub struct SemanticIndex {
    model: SentenceModel,
    vectors: RwLock<Vectors>,
}

#[derive(Default)]
struct Vectors {
    by_tool: HashMap<i64, Vec<f32>>,
    /// The newest `updated_at` read.
    newest: i64,
}

impl SemanticIndex {
    pub fn new(model: SentenceModel) -> Self {
        Self { model, vectors: Default::default() }
    }

    /// Keeps the vectors current for the life of the runtime: at start, after
    /// every announced listing change, and every [`IDLE`] in any case.
    pub(crate) fn start(self: &Arc<Self>, db: Db, changes: ListingChanges) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut news = None;
            loop {
                if news.is_none() {
                    news = changes.subscribe().await.ok();
                }
                if let Err(e) = this.catch_up(&db).await {
                    tracing::warn!(error = %e, "semantic index: catching up failed");
                }
                match &mut news {
                    Some(sub) => {
                        if let Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) = tokio::time::timeout(IDLE, sub.recv()).await {
                            news = None;
                        }
                    }
                    None => tokio::time::sleep(IDLE).await,
                }
            }
        });
    }

    /// Encodes every published tool whose vector is missing or out of date,
    /// then reads the vectors written since the last time (by any replica).
    pub async fn catch_up(&self, db: &Db) -> Result<(), StoreError> {
        let mut encoded_now = std::collections::HashSet::new();
        loop {
            let stale = sqlx::query(&format!(
                "SELECT t.id, {SOURCE_SQL} AS source FROM tools t LEFT JOIN listing_vectors v ON v.tool_id = t.id \
                 WHERE t.kind = 'tool' AND t.published_version IS NOT NULL AND t.status = 'active' \
                 AND (v.tool_id IS NULL OR v.model <> $1 OR v.source <> {SOURCE_SQL}) ORDER BY t.id LIMIT {BATCH}"
            ))
            .bind(&self.model.name)
            .fetch_all(db.pool())
            .await?;
            if stale.is_empty() {
                break;
            }
            let texts: Vec<(i64, String)> =
                stale.iter().map(|r| Ok((r.try_get("id")?, r.try_get("source")?))).collect::<Result<_, sqlx::Error>>()?;
            // A row still stale after its write would be encoded forever.
            if texts.iter().any(|(id, _)| !encoded_now.insert(*id)) {
                tracing::warn!("semantic index: a vector written is still out of date; stopping until the next change");
                break;
            }
            let encoder = self.model.encoder.clone();
            let encoded = tokio::task::spawn_blocking(move || encoder.encode_all(texts)).await.expect("encoding does not panic");
            let mut tx = db.begin().await?;
            for (id, vector, source) in &encoded {
                // Only while the text is still the tool's: another catch-up (this
                // replica's background one, or another replica's) may have read it
                // before an edit and finish after the vector of the new text was written.
                sqlx::query(&format!(
                    "INSERT INTO listing_vectors (tool_id, model, source, vector, updated_at) \
                     SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM tools t WHERE t.id = $1 AND {SOURCE_SQL} = $3) \
                     ON CONFLICT (tool_id) DO UPDATE SET model = excluded.model, source = excluded.source, \
                     vector = excluded.vector, updated_at = excluded.updated_at"
                ))
                .bind(id)
                .bind(&self.model.name)
                .bind(source)
                .bind(to_bytes(vector))
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        }
        let since = self.vectors.read().unwrap_or_else(|e| e.into_inner()).newest - OVERLAP_MS;
        let rows = sqlx::query("SELECT tool_id, vector, updated_at FROM listing_vectors WHERE model = $1 AND updated_at >= $2")
            .bind(&self.model.name)
            .bind(since)
            .fetch_all(db.pool())
            .await?;
        let mut vectors = self.vectors.write().unwrap_or_else(|e| e.into_inner());
        for row in rows {
            let bytes: Vec<u8> = row.try_get("vector")?;
            vectors.by_tool.insert(row.try_get("tool_id")?, from_bytes(&bytes));
            vectors.newest = vectors.newest.max(row.try_get("updated_at")?);
        }
        Ok(())
    }

    /// The tools whose meaning is nearest `query`'s, nearest first, at most
    /// `limit` (of every tool, seen by the caller or not: filter them after).
    /// None when the model knows fewer than half of the query's words (as
    /// whole words of its vocabulary): it would guess at the meaning of "zzzz
    /// qqqq" and find something. Its vocabulary lacks some jargon ("invoice",
    /// "vpn"), which full-text search finds anyway.
    pub async fn nearest(&self, query: &SearchText, limit: usize) -> Vec<(ToolId, f32)> {
        let subject: Vec<&str> = query.subject_words().collect();
        let known = subject.iter().filter(|w| self.model.encoder.knows(w)).count();
        if known == 0 || known * 2 < subject.len() {
            return Vec::new();
        }
        let wanted = self.model.encode(query.terms().join(" ")).await;
        let vectors = self.vectors.read().unwrap_or_else(|e| e.into_inner());
        let mut near: Vec<(ToolId, f32)> =
            vectors.by_tool.iter().map(|(id, v)| (ToolId(*id), similarity(&wanted, v))).filter(|(_, s)| *s >= MIN_SIMILARITY).collect();
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
        near.truncate(limit);
        near
    }

    /// How many tools have a vector in memory.
    pub fn len(&self) -> usize {
        self.vectors.read().unwrap_or_else(|e| e.into_inner()).by_tool.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn to_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian f32s: the stored vectors, and the model's weights.
fn from_bytes(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_survive_their_stored_bytes() {
        let v = vec![0.5, -1.25, f32::MIN_POSITIVE, 3.0e7];
        assert_eq!(from_bytes(&to_bytes(&v)), v);
    }
}
