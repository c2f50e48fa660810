//! `search train`: trains the search adapter (server/domain/src/semantic/adapter.rs)
//! on its training sets and writes `adapter.json`.
//!
//! First each training set is left out in turn: the adapter trained on the
//! others ranks that set's searches among its own listings, by meaning alone,
//! beside the model alone. Those listings and searches are ones it never saw,
//! so this is the evidence its constants were chosen on.

use toolshed_domain::semantic::adapter::{training_hash, Adapter, TrainingSet, TRAINING_FILES};
use toolshed_domain::semantic::{similarity, source, without, Encoder, SentenceModel};

use crate::{EvalSet, Listing, TuningQueries, TuningSet};

/// One set: its name, its listings, and its searches (text, wanted slug).
type Written = (String, Vec<Listing>, Vec<(String, String)>);

pub fn train(model: &SentenceModel) {
    let (name, encoder) = model.parts();
    let file = |path: &str| TRAINING_FILES.iter().find(|(p, _)| *p == path).expect("a training file").1;
    let eval: EvalSet = serde_json::from_str(file("bench/search/eval.json")).expect("parse eval.json");
    let cases: TuningSet = serde_json::from_str(file("bench/search/queries.json")).expect("parse queries.json");
    let more: TuningQueries = serde_json::from_str(file("bench/search/tuning.json")).expect("parse tuning.json");
    // eval.json's listings with the tuning searches for them; its own searches are never read.
    let tuning = cases.cases.into_iter().map(|c| (c.query, c.listing.slug())).chain(more.queries.into_iter().map(|q| (q.query, q.want)));
    let mut sets: Vec<Written> = vec![("tuning".into(), eval.listings, tuning.collect())];
    for (path, text) in TRAINING_FILES.iter().filter(|(p, _)| p.starts_with("bench/search/training/")) {
        let set: EvalSet = serde_json::from_str(text).unwrap_or_else(|e| panic!("parse {path}: {e}"));
        sets.push((path.to_string(), set.listings, set.queries.into_iter().map(|q| (q.query, q.want)).collect()));
    }
    let encoded: Vec<TrainingSet> = sets.iter().map(|set| encode(encoder, set)).collect();
    let all: Vec<&TrainingSet> = encoded.iter().collect();
    let trained = Adapter::train(name, training_hash(), &all);
    // Each left-out set is centred as the shipped adapter centres: on all the listings' mean.
    let mean = trained.mean();
    println!("each set left out, ranked among its own listings by meaning alone (first / top 5):");
    for (left_out, (set, _, _)) in sets.iter().enumerate() {
        let others: Vec<&TrainingSet> =
            encoded.iter().enumerate().filter(|(i, s)| *i != left_out && !s.searches.is_empty()).map(|(_, s)| s).collect();
        if others.is_empty() {
            continue;
        }
        let adapter = Adapter::train(name, String::new(), &others);
        let (before, after) = (ranks(&encoded[left_out], mean, None), ranks(&encoded[left_out], mean, Some(&adapter)));
        println!("  {set:42} model alone {}   with the adapter {}", line(&before), line(&after));
    }
    let path = "server/domain/src/semantic/adapter.json";
    std::fs::write(path, trained.to_json()).expect("write adapter.json");
    println!("trained on {name} with {} searches: {path}", all.iter().map(|s| s.searches.len()).sum::<usize>());
}

/// The set's listings read as the index reads them, and its searches as searches.
fn encode(encoder: &Encoder, (set, listings, searches): &Written) -> TrainingSet {
    let slugs: Vec<String> = listings.iter().map(Listing::slug).collect();
    let texts = listings.iter().map(|l| source(&l.title, &l.description)).chain(searches.iter().map(|(q, _)| q.clone()));
    let mut vectors: Vec<Vec<f32>> = encoder.encode_many(texts.enumerate().collect()).into_iter().map(|(_, v, _)| v).collect();
    let searched = vectors.split_off(listings.len());
    let wanted = searches.iter().map(|(q, want)| {
        slugs.iter().position(|s| s == want).unwrap_or_else(|| panic!("{set}: \"{q}\" wants {want}, which it does not list"))
    });
    TrainingSet { listings: vectors, searches: searched.into_iter().zip(wanted).collect() }
}

/// Where each search's listing ranks among the set's (0 first), by nearness
/// after the mean is taken out (unit length again), as the index compares.
fn ranks(set: &TrainingSet, mean: &[f32], adapter: Option<&Adapter>) -> Vec<usize> {
    let listings: Vec<Vec<f32>> = set.listings.iter().map(|v| without(v, mean)).collect();
    set.searches
        .iter()
        .map(|(search, want)| {
            let search = match adapter {
                Some(adapter) => adapter.apply(&without(search, mean)),
                None => without(search, mean),
            };
            let near: Vec<f32> = listings.iter().map(|l| similarity(&search, l)).collect();
            near.iter().filter(|s| **s > near[*want]).count()
        })
        .collect()
}

fn line(ranks: &[usize]) -> String {
    let share = |k: usize| 100.0 * ranks.iter().filter(|r| **r < k).count() as f64 / ranks.len().max(1) as f64;
    format!("{:5.1} % / {:5.1} %", share(1), share(5))
}
