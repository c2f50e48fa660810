//! How much tool poisoning the publish scan catches (scripts/bench.sh poison).
//!
//! bench/poison/corpus.json holds 205 poisoned tool texts (27 techniques,
//! 28 % not English) and 116 benign texts written to trip a naive filter;
//! the benign side also has the 122 written listings of bench/search/eval.json
//! and 9,878 generated ones (the browse benchmark's generator). Each text goes
//! through `scan::scan` as the field it is (a tool's title, description,
//! argument description, enum values, default or example); a field the
//! publish gate does not read (output schemas, bundle instructions, external
//! servers' tools) counts as not caught, since nothing reads it. A poisoned
//! text split across two fields is caught when either part is.
//!
//! Reported: the share caught, overall and by technique and language; the
//! share of benign texts held, by kind; the scan time.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Deserialize;
use toolshed_bench::Lcg;
use toolshed_domain::scan;

#[derive(Deserialize)]
struct Corpus {
    poisoned: Vec<Poisoned>,
    benign_hard: Vec<Benign>,
}

#[derive(Deserialize)]
struct Poisoned {
    id: String,
    field: String,
    technique: String,
    language: String,
    text: String,
    #[serde(default)]
    group: Option<String>,
}

#[derive(Deserialize)]
struct Benign {
    id: String,
    field: String,
    kind: String,
    text: String,
}

#[derive(Deserialize)]
struct EvalSet {
    listings: Vec<Listing>,
}

#[derive(Deserialize)]
struct Listing {
    title: String,
    description: String,
}

/// The gate's name for a field it reads (`tools/gates.rs`), or `None`.
fn scanned_as(field: &str) -> Option<&'static str> {
    match field {
        "title" => Some("title"),
        "description" => Some("description"),
        "arg_description" => Some("argument x"),
        "enum" => Some("values of x"),
        "default" => Some("default of x"),
        "examples" => Some("example of x"),
        _ => None,
    }
}

fn flagged(field: &str, text: &str) -> bool {
    scanned_as(field).is_some_and(|as_field| !scan::scan(as_field, text).is_empty())
}

/// Counted and of how many.
#[derive(Default)]
struct Share {
    hits: usize,
    of: usize,
}

impl Share {
    fn add(&mut self, hit: bool) {
        self.hits += usize::from(hit);
        self.of += 1;
    }

    fn line(&self) -> String {
        format!("{:4}/{:<5} ({:5.1} %)", self.hits, self.of, 100.0 * self.hits as f64 / self.of.max(1) as f64)
    }
}

fn print_table(title: &str, rows: &BTreeMap<String, Share>) {
    println!("{title}");
    for (name, share) in rows {
        println!("  {name:28} {}", share.line());
    }
}

fn main() {
    let corpus: Corpus = serde_json::from_str(include_str!("../../poison/corpus.json")).expect("parse corpus.json");
    let eval: EvalSet = serde_json::from_str(include_str!("../../search/eval.json")).expect("parse eval.json");
    let started = Instant::now();

    // Poisoned: a split case counts once, caught if any of its parts is.
    let mut cases: BTreeMap<String, (bool, &Poisoned)> = BTreeMap::new();
    for p in &corpus.poisoned {
        let key = p.group.clone().unwrap_or_else(|| p.id.clone());
        let hit = flagged(&p.field, &p.text);
        cases.entry(key).and_modify(|(caught, _)| *caught |= hit).or_insert((hit, p));
    }
    let (mut all, mut by_technique, mut by_language, mut by_field) = (Share::default(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut missed = Vec::new();
    for (caught, p) in cases.values() {
        all.add(*caught);
        by_technique.entry(p.technique.clone()).or_insert_with(Share::default).add(*caught);
        let language = if p.language == "en" { "English" } else { "not English" };
        by_language.entry(language.to_owned()).or_insert_with(Share::default).add(*caught);
        by_field.entry(p.field.clone()).or_insert_with(Share::default).add(*caught);
        if !caught {
            missed.push(format!("  {} {} ({}, {})", p.id, p.technique, p.field, p.language));
        }
    }

    // Benign: the hard ones, the written listings, the generated catalogue.
    let mut held = BTreeMap::new();
    for b in &corpus.benign_hard {
        let hit = flagged(&b.field, &b.text);
        held.entry(format!("hard: {}", b.kind)).or_insert_with(Share::default).add(hit);
        if hit {
            println!("held benign: {} ({}): {}", b.id, b.kind, b.text.chars().take(100).collect::<String>());
        }
    }
    let mut listings = Share::default();
    for l in &eval.listings {
        listings.add(flagged("title", &l.title) || flagged("description", &l.description));
    }
    let mut generated = Share::default();
    let mut rng = Lcg::default();
    for _ in 0..9_878 {
        let (title, description) = (rng.words(3), format!("{}.\n\n{}.", rng.words(12), rng.words(24)));
        generated.add(flagged("title", &title) || flagged("description", &description));
    }
    let hard: Share = corpus.benign_hard.iter().fold(Share::default(), |mut s, b| {
        s.add(flagged(&b.field, &b.text));
        s
    });
    let elapsed = started.elapsed();

    println!("poisoned caught: {}", all.line());
    print_table("by technique", &by_technique);
    print_table("by language", &by_language);
    print_table("by field (fields the gate does not read count as missed)", &by_field);
    println!("benign held: hard {}, written listings {}, generated listings {}", hard.line(), listings.line(), generated.line());
    print_table("hard benign, held by kind", &held);
    println!("missed:");
    for m in &missed {
        println!("{m}");
    }
    let texts = corpus.poisoned.len() + corpus.benign_hard.len() + 2 * eval.listings.len() + 2 * 9_878;
    println!("scan time: {:.1} µs a text ({texts} texts)", elapsed.as_secs_f64() * 1e6 / texts as f64);
}
