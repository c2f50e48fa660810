//! Tool search by meaning: "request a new notebook computer" finds *Order a
//! laptop*, which shares no word with it.
//!
//! A sentence model (`toolshed_encoder`, in `server/encoder`) turns each published listing's (tool's
//! or bundle's) title and description into a vector, stored in `listing_vectors` by whichever replica
//! gets there first; every replica keeps all of them in memory (a cache of
//! that table) and compares a query's vector, moved by a map learnt for tool
//! catalogues ([`adapter`]), with each. `market::ranking`
//! merges these neighbours with the full-text ranking; who may see what is
//! still decided in SQL, after this.
//!
//! Optional: without a model folder (`TOOLSHED_EMBEDDING_MODEL`) search is
//! full-text only.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use sqlx::Row;
use tokio::sync::Semaphore;

use toolshed_encoder::{from_bytes, to_bytes};
pub use toolshed_encoder::{similarity, Encoder, ModelError};

use crate::changes::ListingChanges;
use crate::ids::{ToolId, UserId};
use crate::market::{Glossary, SearchText, Vocabulary};
use crate::now_ms;
use crate::scan::meaning::Intents;
use crate::scan::Finding;
use crate::store::{Db, StoreError};

pub mod adapter;
use adapter::Adapter;

/// With at least this many listings, what all their vectors share (their
/// mean) is taken out before comparing. A sentence model's vectors all lean
/// one way (multilingual-e5-small scores unrelated texts 0.72–0.80), and a
/// listing of generic words sits near that common direction, so it comes
/// near to every query: with the mean removed, meaning counts, not
/// genericness (in the search benchmark's tuning set, when listings were still
/// read with the passage prompt, 40 of 50 queries found their listing in the
/// first 5 by meaning alone, against 35). With fewer
/// listings the mean is too noisy to take out, unless the adapter's is there
/// to draw it towards ([`PRIOR_WEIGHT`]).
const CENTERED_FROM: usize = 100;
/// How many listings the adapter's mean counts as, in a catalogue's: a
/// company's first 48 tools are centred mostly on it, 10,000 on their own.
/// Before, a catalogue under [`CENTERED_FROM`] was not centred, but the
/// adapter was trained on centred vectors: centring a small catalogue found
/// 7 more of the 48-tool `holdout3.json`'s 200 searches in the top 5 (search
/// benchmark, `--alone`). Any weight from 0 (its own mean) to all-prior
/// moved the 70-listing held-out sets alone by at most two searches.
const PRIOR_WEIGHT: f32 = 50.0;
/// Listings encoded per database round trip while catching up.
const BATCH: i64 = 32;
/// Vectors written this long before the newest one seen are read again: other
/// replicas' clocks and commits may lag a little.
const OVERLAP_MS: i64 = 10_000;
/// Catch up at least this often even when no change was announced.
const IDLE: Duration = Duration::from_secs(30);

/// What a listing's vector is made of.
const SOURCE_SQL: &str = "t.title || ': ' || t.description";

/// [`SOURCE_SQL`] of a listing not in a database (the search adapter's training).
pub fn source(title: &str, description: &str) -> String {
    format!("{title}: {description}")
}

/// A sentence model, loaded once per process however many use it.
#[derive(Clone)]
pub struct SentenceModel {
    /// Its folder's name: the probe of the scan by meaning must have been
    /// trained on the same model.
    name: String,
    /// What stored vectors are keyed by: the model, and how it read the
    /// listings (since 2026-11-29 with its query prompt, see
    /// [`Encoder::encode_many`]). Vectors of another model, or made
    /// otherwise, are not comparable, so they are made again.
    vectors_key: String,
    encoder: Arc<Encoder>,
    /// Queries encoded at once: one a core (each spreads over rayon's
    /// threads, which they share), so a flood of searches queues instead of
    /// taking every blocking thread.
    queries: Arc<Semaphore>,
    /// The last searches' vectors, by who searched: the Browse box's next
    /// page, or an agent asking again, is not encoded again. By who, so no
    /// one can time whether someone else searched a text.
    recent: Arc<Mutex<Recent>>,
    /// Chinese words in English, for full text and a second reading of a
    /// search (`cedict.json` in the model's folder, if there).
    glossary: Option<Arc<Glossary>>,
}

/// The most recently used vectors of the last [`Recent::KEPT`] searches
/// (who, text), most recent first.
#[derive(Default)]
struct Recent(std::collections::VecDeque<(Search, Arc<Vec<f32>>)>);

/// Who searched, and for what.
type Search = (UserId, String);

impl Recent {
    const KEPT: usize = 64;

    fn get(&mut self, asker: UserId, text: &str) -> Option<Arc<Vec<f32>>> {
        let at = self.0.iter().position(|((who, t), _)| *who == asker && t == text)?;
        let found = self.0.remove(at)?;
        let vector = found.1.clone();
        self.0.push_front(found);
        Some(vector)
    }

    fn put(&mut self, asker: UserId, text: String, vector: Arc<Vec<f32>>) {
        self.0.retain(|((who, t), _)| *who != asker || *t != text);
        self.0.push_front(((asker, text), vector));
        self.0.truncate(Self::KEPT);
    }
}

impl std::fmt::Debug for SentenceModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceModel").field("name", &self.name).finish_non_exhaustive()
    }
}

impl SentenceModel {
    /// The sentence-transformers model folder `dir` (see [`Encoder::load`]).
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        type Loaded = (Arc<Encoder>, Option<Arc<Glossary>>);
        static LOADED: OnceLock<Mutex<HashMap<PathBuf, Loaded>>> = OnceLock::new();
        let mut loaded = LOADED.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        let (encoder, glossary) = match loaded.get(dir) {
            Some(both) => both.clone(),
            None => {
                let glossary = Glossary::load(dir).map_err(|reason| ModelError::new(dir, reason))?.map(Arc::new);
                loaded.entry(dir.to_owned()).or_insert((Arc::new(Encoder::load(dir)?), glossary)).clone()
            }
        };
        let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let queries = Arc::new(Semaphore::new(cores));
        Ok(Self { vectors_key: format!("{name} (query prompt)"), name, encoder, queries, recent: Arc::default(), glossary })
    }

    /// What the publish scan finds by meaning ([`crate::scan::meaning`]) in
    /// `texts`, the (field, text) pairs models read; nothing if the shipped
    /// probe was trained on another model.
    pub async fn instructions_in(&self, texts: Vec<(String, String)>) -> Vec<Finding> {
        let intents = Intents::shipped();
        if intents.model != self.name {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(
                || tracing::warn!(model = %self.name, probe = %intents.model, "no scan by meaning: the probe was trained on another model"),
            );
            return Vec::new();
        }
        let _turn = self.queries.acquire().await.expect("the semaphore is never closed");
        let encoder = self.encoder.clone();
        tokio::task::spawn_blocking(move || texts.iter().filter_map(|(field, text)| intents.scan(&encoder, field, text)).collect())
            .await
            .expect("encoding does not panic")
    }

    /// The shipped search adapter ([`adapter`]), unless it was trained on
    /// another model.
    fn adapter(&self) -> Option<&'static Adapter> {
        let adapter = Adapter::shipped();
        if adapter.model != self.name {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| tracing::warn!(model = %self.name, adapter = %adapter.model, "searches read without the adapter: it was trained on another model"));
            return None;
        }
        Some(adapter)
    }

    /// Its name (the folder's) and encoder, for the benchmarks and tests.
    pub fn parts(&self) -> (&str, &Encoder) {
        (&self.name, &self.encoder)
    }

    /// A search's meaning as a unit vector (CPU-bound: off the async
    /// workers), or the one kept from when `asker` last searched it.
    async fn encode(&self, asker: UserId, text: String) -> Arc<Vec<f32>> {
        if let Some(kept) = self.recent.lock().unwrap_or_else(|e| e.into_inner()).get(asker, &text) {
            return kept;
        }
        // The turn and the keeping go with the encoding, not with its caller:
        // a search whose caller went away still holds its core until it is
        // done (a flood of abandoned searches cannot take every core), and
        // keeps its vector for the caller's next try.
        let turn = self.queries.clone().acquire_owned().await.expect("the semaphore is never closed");
        let (encoder, recent) = (self.encoder.clone(), self.recent.clone());
        let encoding = tokio::task::spawn_blocking(move || {
            let vector = Arc::new(encoder.encode_search(&text));
            recent.lock().unwrap_or_else(|e| e.into_inner()).put(asker, text, vector.clone());
            drop(turn);
            vector
        });
        encoding.await.expect("encoding does not panic")
    }
}

/// The vectors of every published listing of one database, and its model.
pub struct SemanticIndex {
    model: SentenceModel,
    vectors: RwLock<Vectors>,
}

#[derive(Default)]
struct Vectors {
    by_tool: HashMap<i64, Vec<f32>>,
    /// The words of the same listings' texts, for typo tolerance.
    words: Vocabulary,
    /// Each vector with the mean of all taken out (unit length again), once
    /// there are [`CENTERED_FROM`] of them; otherwise empty.
    centered: HashMap<i64, Vec<f32>>,
    /// That mean, taken out of queries too.
    mean: Option<Vec<f32>>,
    /// The newest `updated_at` read.
    newest: i64,
}

impl Vectors {
    /// Takes the mean out of every vector: the catalogue's, drawn towards
    /// `prior` (the adapter's) when it has few listings; without a prior,
    /// none below [`CENTERED_FROM`].
    fn center(&mut self, prior: Option<&[f32]>) {
        let n = self.by_tool.len();
        let dimensions = self.by_tool.values().next().map_or(0, Vec::len);
        let own = mean(self.by_tool.values(), dimensions);
        let mean = match prior.filter(|p| p.len() == dimensions && n > 0) {
            Some(prior) => {
                let (n, k) = (n as f32, PRIOR_WEIGHT);
                own.iter().zip(prior).map(|(o, p)| (n * o + k * p) / (n + k)).collect()
            }
            None if n >= CENTERED_FROM && dimensions > 0 => own,
            None => {
                self.mean = None;
                self.centered.clear();
                return;
            }
        };
        self.centered = self.by_tool.iter().map(|(id, v)| (*id, without(v, &mean))).collect();
        self.mean = Some(mean);
    }
}

/// The mean of `vectors`, each `dimensions` wide.
pub(crate) fn mean<'a>(vectors: impl ExactSizeIterator<Item = &'a Vec<f32>>, dimensions: usize) -> Vec<f32> {
    let n = vectors.len().max(1) as f32;
    let mut mean = vec![0.0f32; dimensions];
    vectors.for_each(|v| mean.iter_mut().zip(v).for_each(|(m, x)| *m += x / n));
    mean
}

/// `v` without `mean`, at unit length.
pub fn without(v: &[f32], mean: &[f32]) -> Vec<f32> {
    let rest: Vec<f32> = v.iter().zip(mean).map(|(x, m)| x - m).collect();
    let length = rest.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
    rest.into_iter().map(|x| x / length).collect()
}

impl SemanticIndex {
    pub fn new(model: SentenceModel) -> Self {
        Self { model, vectors: Default::default() }
    }

    pub fn model(&self) -> &SentenceModel {
        &self.model
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

    /// Encodes every published listing whose vector is missing or out of date,
    /// then reads the vectors written since the last time (by any replica).
    pub async fn catch_up(&self, db: &Db) -> Result<(), StoreError> {
        let mut encoded_now = std::collections::HashSet::new();
        loop {
            let stale = sqlx::query(&format!(
                "SELECT t.id, {SOURCE_SQL} AS source FROM tools t LEFT JOIN listing_vectors v ON v.tool_id = t.id \
                 WHERE t.published_version IS NOT NULL AND t.status = 'active' \
                 AND (v.tool_id IS NULL OR v.model <> $1 OR v.source <> {SOURCE_SQL}) ORDER BY t.id LIMIT {BATCH}"
            ))
            .bind(&self.model.vectors_key)
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
            let encoded = tokio::task::spawn_blocking(move || encoder.encode_many(texts)).await.expect("encoding does not panic");
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
                .bind(&self.model.vectors_key)
                .bind(source)
                .bind(to_bytes(vector))
                .bind(now_ms())
                .execute(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        }
        let since = self.vectors.read().unwrap_or_else(|e| e.into_inner()).newest - OVERLAP_MS;
        let rows = sqlx::query("SELECT tool_id, vector, source, updated_at FROM listing_vectors WHERE model = $1 AND updated_at >= $2")
            .bind(&self.model.vectors_key)
            .bind(since)
            .fetch_all(db.pool())
            .await?;
        let mut vectors = self.vectors.write().unwrap_or_else(|e| e.into_inner());
        for row in rows {
            let bytes: Vec<u8> = row.try_get("vector")?;
            let id: i64 = row.try_get("tool_id")?;
            vectors.by_tool.insert(id, from_bytes(&bytes));
            vectors.words.set(id, &row.try_get::<String, _>("source")?);
            vectors.newest = vectors.newest.max(row.try_get("updated_at")?);
        }
        vectors.center(self.model.adapter().map(Adapter::mean));
        Ok(())
    }

    /// The English words of `query`'s Chinese words (see `market::Glossary`),
    /// as a search of those words, or `None` when it has none.
    pub fn in_english(&self, query: &SearchText) -> Option<SearchText> {
        let mut words = self.model.glossary.as_ref()?.english(query.text());
        words.truncate(SearchText::MAX_TERMS);
        SearchText::parse(&words.join(" ")).ok().flatten()
    }

    /// `query` with its misspelt words read as the listings' words nearest
    /// them (see `market::Vocabulary`), or `None` when none was.
    pub fn correct(&self, query: &SearchText) -> Option<SearchText> {
        let vectors = self.vectors.read().unwrap_or_else(|e| e.into_inner());
        vectors.words.correct(query, |word| self.model.encoder.knows(word))
    }

    /// The listings whose meaning is nearest `query`'s, nearest first, at most
    /// `limit` (of every listing, seen by the caller or not: filter them
    /// after), each with its nearness: 1 the nearest, 0 the `limit`-th (or
    /// further), summed over the search's readings.
    /// None when no word of the query is one the model or the listings know
    /// (a run of Chinese or Japanese characters counts as known): the model
    /// would guess at the meaning of "zzzz qqqq" and find something. (A
    /// multilingual vocabulary lacks many whole English words, "hungry"
    /// among them, but "we are hungry" has "we" and "are".)
    ///
    /// A search with Chinese words the dictionary has is read twice, as typed
    /// and in those words' English ([`Self::in_english`]), and a listing's
    /// nearness is what both readings give it. The model puts a Chinese
    /// search near Chinese listings of its meaning, but English ones of it
    /// often below unrelated ones; and since a reading in one language lies
    /// nearer everything in that language, each reading's nearness is scaled
    /// among its own nearest before the two are added: what both put near
    /// comes first, not what one reading puts near for its language alone.
    pub async fn nearest(&self, asker: UserId, query: &SearchText, limit: usize) -> Vec<(ToolId, f32)> {
        let known = {
            let vectors = self.vectors.read().unwrap_or_else(|e| e.into_inner());
            query.terms().iter().any(|w| self.model.encoder.knows(w) || vectors.words.has(w) || !w.is_ascii())
        };
        if !known || limit == 0 {
            return Vec::new();
        }
        let wanted = match self.in_english(query) {
            Some(english) => {
                let (typed, english) =
                    tokio::join!(self.model.encode(asker, query.text().to_owned()), self.model.encode(asker, english.text().to_owned()));
                vec![typed, english]
            }
            None => vec![self.model.encode(asker, query.text().to_owned()).await],
        };
        let adapter = self.model.adapter();
        let vectors = self.vectors.read().unwrap_or_else(|e| e.into_inner());
        let mut nearness: HashMap<i64, f32> = HashMap::new();
        for wanted in wanted {
            let (wanted, listings) = match &vectors.mean {
                Some(mean) => (without(&wanted, mean), &vectors.centered),
                None => (wanted.to_vec(), &vectors.by_tool),
            };
            let wanted = match adapter {
                Some(adapter) => adapter.apply(&wanted),
                None => wanted,
            };
            let mut near: Vec<(i64, f32)> = listings.iter().map(|(id, v)| (*id, similarity(&wanted, v))).collect();
            near.sort_by(|a, b| b.1.total_cmp(&a.1));
            near.truncate(limit);
            let (nearest, last) = (near.first().map_or(1.0, |n| n.1), near.last().map_or(0.0, |n| n.1));
            for (id, similarity) in near {
                let scaled = if nearest > last { (similarity - last) / (nearest - last) } else { 1.0 };
                *nearness.entry(id).or_insert(0.0) += scaled;
            }
        }
        let mut near: Vec<(ToolId, f32)> = nearness.into_iter().map(|(id, n)| (ToolId(id), n)).collect();
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
        near.truncate(limit);
        near
    }

    /// For each of `ids`, the share of `keywords` its text holds (see `Vocabulary::share`).
    pub fn shares(&self, ids: &[ToolId], keywords: &[String]) -> Vec<f64> {
        let vectors = self.vectors.read().unwrap_or_else(|e| e.into_inner());
        ids.iter().map(|id| vectors.words.share(id.0, keywords)).collect()
    }

    /// How many listings have a vector in memory.
    pub fn len(&self) -> usize {
        self.vectors.read().unwrap_or_else(|e| e.into_inner()).by_tool.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Recent, SentenceModel, UserId, Vectors, CENTERED_FROM, PRIOR_WEIGHT};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_search_whose_caller_went_away_still_holds_its_turn_until_encoded_and_keeps_its_vector() {
        let dir = std::env::var_os("TOOLSHED_EMBEDDING_MODEL").expect(
            "TOOLSHED_EMBEDDING_MODEL names the sentence model's folder (scripts/env.sh sets it; scripts/bootstrap.sh installs it)",
        );
        let model = SentenceModel::load(dir.as_ref()).unwrap();
        let (asker, text) = (UserId(7), "the cheapest flight to Lisbon on Friday");
        // Polled once (its turn taken, the encoding started), then dropped.
        let _ = tokio::time::timeout(std::time::Duration::ZERO, model.encode(asker, text.into())).await;
        // Every turn is free again only once that encoding has finished.
        let cores = u32::try_from(std::thread::available_parallelism().map_or(1, |n| n.get())).unwrap();
        let _all = model.queries.acquire_many(cores).await.unwrap();
        assert!(model.recent.lock().unwrap().get(asker, text).is_some(), "kept for the next try");
    }

    #[test]
    fn a_small_catalogue_is_centred_on_its_mean_drawn_towards_the_adapters_and_without_one_not_at_all() {
        let mut vectors = Vectors::default();
        vectors.by_tool.insert(1, vec![1.0, 0.0, 0.0]);
        vectors.by_tool.insert(2, vec![0.0, 1.0, 0.0]);
        let prior = [0.0, 0.0, 1.0];
        vectors.center(Some(&prior));
        let k = PRIOR_WEIGHT;
        let mean = vectors.mean.clone().expect("centred");
        let expected = [1.0 / (2.0 + k), 1.0 / (2.0 + k), k / (2.0 + k)];
        assert!(mean.iter().zip(expected).all(|(m, e)| (m - e).abs() < 1e-6), "{mean:?}");
        let one = &vectors.centered[&1];
        assert!((one.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5, "unit length again");
        assert!(one[0] > 0.6 && one[2] < 0.0, "the prior's direction taken out: {one:?}");

        const { assert!(CENTERED_FROM > 2) };
        vectors.center(None);
        assert!(vectors.mean.is_none() && vectors.centered.is_empty(), "too few to centre on their own");
        vectors.center(Some(&[1.0, 0.0]));
        assert!(vectors.mean.is_none(), "a prior of another width is no prior");
    }

    #[test]
    fn the_last_searches_vectors_are_kept_by_who_searched_and_the_least_recently_used_go_first() {
        let (alice, bob) = (UserId(1), UserId(2));
        let mut recent = Recent::default();
        let v = |x: f32| Arc::new(vec![x]);
        for i in 0..Recent::KEPT {
            recent.put(alice, format!("query {i}"), v(i as f32));
        }
        assert_eq!(recent.get(bob, "query 0"), None, "another's search is not theirs to time");
        assert_eq!(recent.get(alice, "query 0"), Some(v(0.0)), "used again: now the most recent");
        recent.put(alice, "one more".into(), v(-1.0));
        assert_eq!(recent.get(alice, "query 1"), None, "the least recently used went");
        assert_eq!(recent.get(alice, "query 0"), Some(v(0.0)));
        recent.put(alice, "one more".into(), v(-2.0));
        assert_eq!(recent.get(alice, "one more"), Some(v(-2.0)), "a search is kept once, with its latest vector");
        assert_eq!(recent.0.len(), Recent::KEPT);
    }
}
