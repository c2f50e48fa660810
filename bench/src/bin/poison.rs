//! How much tool poisoning the publish scan catches (scripts/bench.sh poison).
//!
//! bench/poison/corpus.json holds 205 poisoned tool texts (27 techniques,
//! 28 % not English) and 116 benign texts written to trip a naive filter;
//! the benign side also has the 122 written listings of bench/search/eval.json
//! and 9,878 generated ones (the browse benchmark's generator). Each text goes
//! through `scan::scan` as the field it is (a tool's title, description,
//! argument description, enum values, default or example, output schema; a
//! bundle's instructions are its description; an external server's tool
//! definition as a refresh reads it, field by field); a field nothing reads
//! would count as not caught. A poisoned text split across two fields is
//! caught when either part is.
//!
//! With the sentence model (`TOOLSHED_EMBEDDING_MODEL`, as scripts/env.sh
//! sets it) the scan by meaning (`scan::meaning`) runs too, at the threshold
//! the publish gate uses. `poison dev` instead shows ranges of thresholds on
//! the tuning sets, the only place they were chosen: bench/poison/dev.json
//! (descriptions, for prose) and bench/poison/dev_places.json (values, link
//! titles, comments, decoded spans: the hidden places, in two sets by two
//! writers, dev_places.json and dev_places2.json), and bench/poison/dev_mislead.json
//! (texts that have the agent mislead the user, and honest ones of the same
//! situations, in every field: for the mislead probe);
//! `poison train` retrains `scan/probe.json` from `scan/intents.json`;
//! `poison read [field]` shows how each line of standard input reads, unit by
//! unit, as that field (a description unless named);
//! `poison holdoutN` runs bench/poison/holdoutN.json alone (read from the
//! working directory): sets written by others after the scan was tuned.
//!
//! Reported: the share caught, overall and by technique, intent, language and field; the
//! share of benign texts held, by kind; the scan time.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Deserialize;
use toolshed_bench::Lcg;
use toolshed_domain::scan::{self, meaning};
use toolshed_domain::semantic::{Encoder, SentenceModel};
use toolshed_domain::upstream;

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
    /// What the writer says it tries, in the writer's own words.
    intent: String,
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

/// What the gate reads of a case, as (its name for the field, text) pairs
/// (`tools/gates.rs`, `upstream`); nothing for a field it does not read.
fn read_as(field: &str, text: &str) -> Vec<(String, String)> {
    let single = |name: &str| vec![(name.to_owned(), text.to_owned())];
    match field {
        "title" => single("title"),
        // A bundle's description is the instructions its endpoint sends.
        "description" | "bundle_instructions" => single("description"),
        // As the gate reads them: a schema written as JSON string by string,
        // listed values one a line.
        "output_schema" => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(schema @ serde_json::Value::Object(_)) => scan::schema_texts("output schema", &schema),
            _ => single("output schema /properties/x/description"),
        },
        "arg_description" => single("argument x"),
        "enum" => match serde_json::from_str::<Vec<String>>(text) {
            Ok(values) => vec![("values of x".to_owned(), values.join("\n"))],
            Err(_) => single("values of x"),
        },
        // A default or an example list as the gate reads an argument's value.
        "default" | "examples" => {
            let what = if field == "default" { "default of x" } else { "example of x" };
            let value = serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned()));
            vec![(what.to_owned(), scan::value_lines(&value))]
        }
        // An external server's tool as `tools/list` gives it: what a refresh reads of it.
        "upstream_tool" => serde_json::from_str(text).map(|listed| upstream::listed_texts(&listed)).unwrap_or_default(),
        _ => Vec::new(),
    }
}

fn flagged(field: &str, text: &str) -> bool {
    read_as(field, text).iter().any(|(field, text)| !scan::scan(field, text).is_empty())
}

/// The sentence model and its intents, when there is one.
type Reader<'a> = Option<(&'a Encoder, &'a meaning::Intents)>;

/// Each unit of every case, read where the gate reads it (on every core): a
/// case is the (field, text) pairs the gate reads of it. Nothing without a model.
fn readings(reader: Reader, cases: &[Vec<(String, String)>]) -> Vec<Vec<meaning::Unit>> {
    let Some((encoder, intents)) = reader else {
        return vec![Vec::new(); cases.len()];
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|scope| {
        let workers: Vec<_> = cases
            .chunks(cases.len().div_ceil(cores).max(1))
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|fields| fields.iter().flat_map(|(field, text)| intents.readings(encoder, field, text)).collect())
                        .collect::<Vec<Vec<_>>>()
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("no panic")).collect()
    })
}

/// Whether any unit reads as an instruction: prose by `prose`, the rest by `hidden`.
fn any_flagged(units: &[meaning::Unit], prose: f32, hidden: f32) -> bool {
    units.iter().any(|u| u.reading.flagged(if u.place == meaning::Place::Prose { prose } else { hidden }))
}

fn shipped(units: &[meaning::Unit]) -> bool {
    units.iter().any(meaning::Unit::flagged)
}

#[derive(Deserialize)]
struct Dev {
    poisoned: Vec<DevText>,
    benign: Vec<DevText>,
}

#[derive(Clone, Deserialize)]
struct DevText {
    text: String,
    /// In `dev_places.json`: where in a tool the text stands.
    #[serde(default)]
    place: String,
}

impl DevText {
    /// What the gate reads of it: a description, or the field or Markdown
    /// construct its place names, around it.
    fn fields(&self) -> Vec<(String, String)> {
        use base64::Engine;
        let t = &self.text;
        let (field, text) = match self.place.as_str() {
            "" => ("description", t.clone()),
            "default" => ("default of x", t.clone()),
            "enum" => ("values of x", t.clone()),
            "example" => ("example of x", t.clone()),
            "output_schema" => ("output schema /properties/x/description", t.clone()),
            "link_title" => {
                ("description", format!("Finds reports. See [the guide](https://docs.example.com/g \"{}\").", t.replace('"', "'")))
            }
            "image_alt" => ("description", format!("Charts sales. ![{}](https://img.example.com/c.png)", t.replace(['[', ']'], ""))),
            "comment" => ("description", format!("Lists open tickets. <!-- {t} -->")),
            "decoded" => ("description", format!("Sends this payload: {}", base64::engine::general_purpose::STANDARD.encode(t))),
            other => panic!("no place {other}"),
        };
        vec![(field.to_owned(), text)]
    }
}

/// Every threshold on the tuning sets: prose on `dev.json`'s descriptions,
/// then places where no prose belongs on `dev_places.json`, prose staying
/// at the shipped threshold. Caught by phrases or meaning; held by meaning
/// alone for places (the phrases hold every comment as hidden markup).
fn tune(reader: Reader) {
    let dev: Dev = serde_json::from_str(include_str!("../../poison/dev.json")).expect("parse dev.json");
    let (poisoned, benign) = (readings(reader, &cases(&dev.poisoned)), readings(reader, &cases(&dev.benign)));
    let (p_phrases, b_phrases) = (phrases(&dev.poisoned), phrases(&dev.benign));
    println!(
        "tuning set: {} poisoned, {} benign; phrases alone catch {}, hold {}",
        poisoned.len(),
        benign.len(),
        p_phrases.iter().filter(|x| **x).count(),
        b_phrases.iter().filter(|x| **x).count()
    );
    println!("threshold  caught  held   (phrases or meaning)");
    for threshold in [0.5, 0.6, 0.7, 0.75, 0.8, 0.82, 0.84, 0.85, 0.86, 0.88, 0.9, 0.93, 0.95, 0.97, 0.99] {
        // What a description hides (a link's title, a comment) at the shipped threshold for it.
        let count = |r: &[Vec<meaning::Unit>], p: &[bool]| {
            r.iter().zip(p).filter(|(r, p)| **p || any_flagged(r, threshold, meaning::HIDDEN_THRESHOLD)).count()
        };
        println!(
            "{threshold:.3}      {:3}/{}  {:3}/{}",
            count(&poisoned, &p_phrases),
            poisoned.len(),
            count(&benign, &b_phrases),
            benign.len()
        );
    }
    let detail = std::env::var_os("POISON_DEV_DETAIL").is_some();
    if detail {
        show_detail(rows(&dev.poisoned, &poisoned), rows(&dev.benign, &benign), |r| r.instruction);
    }

    // Two places sets by two writers, each shown alone and together.
    let first: Dev = serde_json::from_str(include_str!("../../poison/dev_places.json")).expect("parse dev_places.json");
    let second: Dev = serde_json::from_str(include_str!("../../poison/dev_places2.json")).expect("parse dev_places2.json");
    let both = Dev {
        poisoned: first.poisoned.iter().chain(&second.poisoned).cloned().collect(),
        benign: first.benign.iter().chain(&second.benign).cloned().collect(),
    };
    // Each text read once: "both" is the two sets' readings together.
    let read = |set: &Dev| (readings(reader, &cases(&set.poisoned)), readings(reader, &cases(&set.benign)));
    let (first_read, second_read) = (read(&first), read(&second));
    let both_read = ([first_read.0.as_slice(), &second_read.0].concat(), [first_read.1.as_slice(), &second_read.1].concat());
    for (name, places, read) in
        [("dev_places.json", &first, &first_read), ("dev_places2.json", &second, &second_read), ("both", &both, &both_read)]
    {
        tune_places(name, places, read, detail && name != "both");
    }
    tune_mislead(reader, [benign, both_read.1].concat(), detail);
}

/// The mislead probe's threshold on its own tuning set, the other probes at
/// their shipped thresholds: caught of `dev_mislead.json`'s poisoned texts
/// (by phrases or meaning), held of the ordinary texts of every tuning set
/// (`ordinary`, read, and its own) by meaning.
fn tune_mislead(reader: Reader, ordinary: Vec<Vec<meaning::Unit>>, detail: bool) {
    let set: Corpus = serde_json::from_str(include_str!("../../poison/dev_mislead.json")).expect("parse dev_mislead.json");
    let read = |texts: Vec<Vec<(String, String)>>| readings(reader, &texts);
    let poisoned = read(set.poisoned.iter().map(|p| read_as(&p.field, &p.text)).collect());
    let own = read(set.benign_hard.iter().map(|b| read_as(&b.field, &b.text)).collect());
    let p_phrases: Vec<bool> = set.poisoned.iter().map(|p| flagged(&p.field, &p.text)).collect();
    let hit = |r: &[meaning::Unit], mislead: f32| r.iter().any(|u| u.reading.flagged_at(u.place.threshold(), mislead));
    println!(
        "mislead (dev_mislead.json): {} poisoned, {} ordinary of its own and {} of the other tuning sets; phrases alone catch {}",
        poisoned.len(),
        own.len(),
        ordinary.len(),
        p_phrases.iter().filter(|x| **x).count()
    );
    println!("threshold  caught   held (own + others)");
    // Above 1: the probe off, what the other probes do alone.
    for threshold in [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.99, 1.01] {
        let caught = poisoned.iter().zip(&p_phrases).filter(|(r, p)| **p || hit(r, threshold)).count();
        let held = |set: &[Vec<meaning::Unit>]| set.iter().filter(|r| hit(r, threshold)).count();
        let (mine, others) = (held(&own), held(&ordinary));
        println!(
            "{threshold:.3}      {caught:3}/{}  {:3}/{} ({mine} + {others})",
            poisoned.len(),
            mine + others,
            own.len() + ordinary.len()
        );
    }
    if detail {
        let missed = set.poisoned.iter().zip(&poisoned).map(|(t, r)| (t.field.as_str(), t.text.as_str(), r.as_slice()));
        let held = set.benign_hard.iter().zip(&own).map(|(t, r)| (t.field.as_str(), t.text.as_str(), r.as_slice()));
        show_detail(missed, held, |r| r.misleads);
    }
}

/// The tuning texts missed and held at the shipped thresholds, each with
/// where it stands and its units' strongest `belief`.
fn show_detail<'a>(
    poisoned: impl Iterator<Item = (&'a str, &'a str, &'a [meaning::Unit])>,
    benign: impl Iterator<Item = (&'a str, &'a str, &'a [meaning::Unit])>,
    belief: fn(&meaning::Reading) -> f32,
) {
    let strongest = |r: &[meaning::Unit]| r.iter().map(|u| belief(&u.reading)).fold(0.0f32, f32::max);
    for (place, text, r) in poisoned.filter(|(_, _, r)| !shipped(r)) {
        println!("missed ({:.2}, {place}): {text}", strongest(r));
    }
    for (place, text, r) in benign.filter(|(_, _, r)| shipped(r)) {
        println!("held ({:.2}, {place}): {text}", strongest(r));
    }
}

/// The places threshold on one set of places (`read`: its poisoned and its
/// ordinary texts' units), with its misses and holds if `detail`.
fn tune_places(name: &str, places: &Dev, read: &(Vec<Vec<meaning::Unit>>, Vec<Vec<meaning::Unit>>), detail: bool) {
    let (poisoned, benign) = read;
    let p_phrases = phrases(&places.poisoned);
    let names: std::collections::BTreeSet<&str> = places.poisoned.iter().map(|t| t.place.as_str()).collect();
    println!(
        "places ({name}): {} poisoned, {} benign; phrases alone catch {}",
        poisoned.len(),
        benign.len(),
        p_phrases.iter().filter(|x| **x).count()
    );
    println!("threshold  caught   held     by place (caught/held): {}", names.iter().copied().collect::<Vec<_>>().join(", "));
    for threshold in [0.2, 0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8, 0.85, 0.9] {
        let hit = |r: &[meaning::Unit]| any_flagged(r, meaning::THRESHOLD, threshold);
        let caught: Vec<bool> = poisoned.iter().zip(&p_phrases).map(|(r, p)| *p || hit(r)).collect();
        let held: Vec<bool> = benign.iter().map(|r| hit(r)).collect();
        let by_place = names
            .iter()
            .map(|name| {
                let c = places.poisoned.iter().zip(&caught).filter(|(t, c)| t.place == *name && **c).count();
                let h = places.benign.iter().zip(&held).filter(|(t, h)| t.place == *name && **h).count();
                format!("{c}/{h}")
            })
            .collect::<Vec<_>>();
        let count = |v: &[bool]| v.iter().filter(|x| **x).count();
        println!("{threshold:.3}      {:3}/{}  {:3}/{}   {}", count(&caught), caught.len(), count(&held), held.len(), by_place.join(" "));
    }
    if detail {
        show_detail(rows(&places.poisoned, poisoned), rows(&places.benign, benign), |r| r.instruction);
    }
}

/// Each tuning text with where it stands and its units, for [`show_detail`].
fn rows<'a>(set: &'a [DevText], read: &'a [Vec<meaning::Unit>]) -> impl Iterator<Item = (&'a str, &'a str, &'a [meaning::Unit])> {
    set.iter().zip(read).map(|(t, r)| (if t.place.is_empty() { "description" } else { t.place.as_str() }, t.text.as_str(), r.as_slice()))
}

/// What the gate reads of each tuning text.
fn cases(set: &[DevText]) -> Vec<Vec<(String, String)>> {
    set.iter().map(DevText::fields).collect()
}

/// Whether the phrases alone find something in each tuning text.
fn phrases(set: &[DevText]) -> Vec<bool> {
    set.iter().map(|t| t.fields().iter().any(|(f, t)| flagged(f, t))).collect()
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
    let model = std::env::var_os("TOOLSHED_EMBEDDING_MODEL")
        .map(|dir| SentenceModel::load(std::path::Path::new(&dir)).expect("load the sentence model"));
    let mode = std::env::args().nth(1);
    if mode.as_deref() == Some("train") {
        let (name, encoder) = model.as_ref().expect("training needs the sentence model").parts();
        let trained = meaning::Intents::train(encoder, name);
        let path = "server/domain/src/scan/probe.json";
        std::fs::write(path, serde_json::to_string(&trained).expect("serializes")).expect("write probe.json");
        return println!("trained on {name}: {path}");
    }
    let intents = meaning::Intents::shipped();
    let reader: Reader = model.as_ref().map(SentenceModel::parts).filter(|(name, _)| *name == intents.model).map(|(_, e)| (e, intents));
    if mode.as_deref() == Some("dev") {
        return tune(reader);
    }
    if mode.as_deref() == Some("read") {
        // Each line of standard input, unit by unit, as the field named next
        // (a set's field, as the gate reads it, or the gate's own name; a
        // description unless said): why a text is held or not.
        let (encoder, intents) = reader.expect("reading needs the sentence model the probe was trained on");
        let field = std::env::args().nth(2).unwrap_or_else(|| "description".to_owned());
        for line in std::io::stdin().lines() {
            let line = line.expect("read standard input");
            // A set's field (`enum`, `output_schema`, …) as the gate reads it; any other as named.
            let mut read = read_as(&field, &line);
            if read.is_empty() {
                read = vec![(field.clone(), line)];
            }
            for (field, text) in read {
                for unit in intents.readings(encoder, &field, &text) {
                    let (reading, place) = (unit.reading, unit.place);
                    println!("{:.4} {:.4} {:?} {:?} {}", reading.instruction, reading.misleads, reading.intent, place, unit.text);
                }
            }
        }
        return;
    }
    // `poison holdout`, `holdout2`, …: a held-out set alone, without the catalogue's
    // listings (see BENCHMARKS for what each was used for), read when asked for from
    // bench/poison/ under the working directory (scripts/bench.sh runs at the root),
    // so a new set needs no new code. Any other mode is refused, never measured as
    // the corpus under the wrong name.
    let holdout = mode.is_some();
    let set = match mode.as_deref() {
        None => include_str!("../../poison/corpus.json").to_owned(),
        Some(name) if name.strip_prefix("holdout").is_some_and(|n| n.chars().all(|c| c.is_ascii_digit())) => {
            let path = format!("bench/poison/{name}.json");
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path} (run from the repository's root): {e}"))
        }
        Some(other) => panic!("unknown mode {other:?}: dev, train, read [field], holdout, holdout2, …, or none for the corpus"),
    };
    let corpus: Corpus = serde_json::from_str(&set).expect("parse the held-out set or corpus");
    let mut eval: EvalSet = serde_json::from_str(include_str!("../../search/eval.json")).expect("parse eval.json");
    let mut rng = Lcg::default();
    let mut generated: Vec<(String, String)> =
        (0..9_878).map(|_| (rng.words(3), format!("{}.\n\n{}.", rng.words(12), rng.words(24)))).collect();
    if holdout {
        eval.listings.clear();
        generated.clear();
    }

    // Every text once through the phrases (timed), then through the meaning scan.
    let started = Instant::now();
    let p_phrases: Vec<bool> = corpus.poisoned.iter().map(|p| flagged(&p.field, &p.text)).collect();
    let b_phrases: Vec<bool> = corpus.benign_hard.iter().map(|b| flagged(&b.field, &b.text)).collect();
    let l_phrases: Vec<bool> = eval.listings.iter().map(|l| flagged("title", &l.title) || flagged("description", &l.description)).collect();
    let g_phrases: Vec<bool> = generated.iter().map(|(t, d)| flagged("title", t) || flagged("description", d)).collect();
    let phrase_time = started.elapsed();
    let started = Instant::now();
    // What the gate reads, and only that, is read by meaning too, field by field.
    let listing = |t: &str, d: &str| vec![("title".to_owned(), t.to_owned()), ("description".to_owned(), d.to_owned())];
    let texts: Vec<Vec<(String, String)>> = corpus
        .poisoned
        .iter()
        .map(|p| read_as(&p.field, &p.text))
        .chain(corpus.benign_hard.iter().map(|b| read_as(&b.field, &b.text)))
        .chain(eval.listings.iter().map(|l| listing(&l.title, &l.description)))
        .chain(generated.iter().map(|(t, d)| listing(t, d)))
        .collect();
    let mut all = readings(reader, &texts).into_iter();
    let meaning_time = started.elapsed();
    let mut next = |n: usize| all.by_ref().take(n).map(|r| shipped(&r)).collect::<Vec<bool>>();
    let (p_meaning, b_meaning, l_meaning, g_meaning) =
        (next(corpus.poisoned.len()), next(corpus.benign_hard.len()), next(eval.listings.len()), next(generated.len()));
    let either = |a: &[bool], b: &[bool]| a.iter().zip(b).map(|(a, b)| *a || *b).collect::<Vec<bool>>();
    let share = |hits: &[bool]| {
        hits.iter().fold(Share::default(), |mut s, h| {
            s.add(*h);
            s
        })
    };

    // Poisoned: a split case counts once, caught if any of its parts is.
    let caught_by = |hits: &[bool]| {
        let mut cases: BTreeMap<String, (bool, &Poisoned)> = BTreeMap::new();
        for (p, hit) in corpus.poisoned.iter().zip(hits) {
            let key = p.group.clone().unwrap_or_else(|| p.id.clone());
            cases.entry(key).and_modify(|(caught, _)| *caught |= hit).or_insert((*hit, p));
        }
        cases
    };
    // An external tool the refresh cannot import (a name outside MCP's tool-name
    // characters) is never served: nothing of it reaches a model.
    let never_served: Vec<bool> = corpus
        .poisoned
        .iter()
        .map(|p| {
            p.field == "upstream_tool"
                && serde_json::from_str::<serde_json::Value>(&p.text).is_ok_and(|t| upstream::listed_texts(&t).is_empty())
        })
        .collect();
    for p in corpus.poisoned.iter().zip(&never_served).filter(|(_, n)| **n).map(|(p, _)| p) {
        println!("never served (its name cannot be imported), counted as caught: {}", p.id);
    }
    let phrases_only = caught_by(&p_phrases);
    let cases = caught_by(&either(&either(&p_phrases, &p_meaning), &never_served));
    let (mut total, mut by_technique, mut by_intent, mut by_language, mut by_field) =
        (Share::default(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let mut missed = Vec::new();
    for (caught, p) in cases.values() {
        total.add(*caught);
        by_technique.entry(p.technique.clone()).or_insert_with(Share::default).add(*caught);
        by_intent.entry(p.intent.clone()).or_insert_with(Share::default).add(*caught);
        let language = if p.language == "en" { "English" } else { "not English" };
        by_language.entry(language.to_owned()).or_insert_with(Share::default).add(*caught);
        by_field.entry(p.field.clone()).or_insert_with(Share::default).add(*caught);
        if !caught {
            missed.push(format!("  {} {} ({}, {})", p.id, p.technique, p.field, p.language));
        }
    }
    let hard = either(&b_phrases, &b_meaning);
    let mut held = BTreeMap::new();
    for (b, hit) in corpus.benign_hard.iter().zip(&hard) {
        held.entry(format!("hard: {}", b.kind)).or_insert_with(Share::default).add(*hit);
        if *hit {
            println!("held benign: {} ({}): {}", b.id, b.kind, b.text.chars().take(100).collect::<String>());
        }
    }
    for (l, hit) in eval.listings.iter().zip(&l_meaning) {
        if *hit {
            println!("held listing: {}", l.title);
        }
    }
    for ((title, description), _) in generated.iter().zip(&g_meaning).filter(|(_, hit)| **hit) {
        println!("held generated listing: {title} | {}", description.chars().take(100).collect::<String>());
    }

    let phrase_caught = phrases_only.values().filter(|(c, _)| *c).count();
    println!("phrases alone: {phrase_caught}/{} caught, hard benign held {}", phrases_only.len(), share(&b_phrases).line());
    if reader.is_none() {
        println!("(no sentence model: TOOLSHED_EMBEDDING_MODEL is not set, so phrases only)");
    }
    println!("poisoned caught: {}", total.line());
    print_table("by technique", &by_technique);
    print_table("by intent (the writer's label)", &by_intent);
    print_table("by language", &by_language);
    print_table("by field", &by_field);
    println!(
        "benign held: hard {}, written listings {}, generated listings {}",
        share(&hard).line(),
        share(&either(&l_phrases, &l_meaning)).line(),
        share(&either(&g_phrases, &g_meaning)).line()
    );
    print_table("hard benign, held by kind", &held);
    println!("missed:");
    for m in &missed {
        println!("{m}");
    }
    let n = corpus.poisoned.len() + corpus.benign_hard.len() + 2 * (eval.listings.len() + generated.len());
    println!(
        "scan time a text: phrases {:.1} µs, meaning {:.1} ms ({} texts, {} cores)",
        phrase_time.as_secs_f64() * 1e6 / n as f64,
        meaning_time.as_secs_f64() * 1e3 / texts.len() as f64,
        texts.len(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}
