//! Typo tolerance on the word side: a search word that no listing uses is
//! read as the listing word nearest it in spelling ("convrt 80 poudns" →
//! "convert 80 pounds"), so full-text search and the sentence model both see
//! what was meant.
//!
//! The vocabulary is the words of the listings searched (kept by the
//! semantic index beside its vectors, see `semantic`); a word is only
//! changed when it is unknown to both the listings and, when given, the
//! sentence model: "francs" stays "francs" even if no listing says it. The
//! model's vocabulary lacks many whole English words ("dogs", "bills"), so a
//! word it knows without an ending ("dog" + s) is no typo either; and a fix
//! keeps the typed first letter, which people rarely get wrong: "dogs" is not
//! read as "logs".

use std::collections::HashMap;

use super::SearchText;
use crate::words::{is_cjk, words};

/// Words this short are left alone: one letter off makes another word.
const MIN_LEN: usize = 4;
/// English endings a known word may have taken.
const ENDINGS: [&str; 4] = ["s", "es", "ed", "ing"];

/// How many words each listing has, and which, so a changed text can be taken back out.
#[derive(Debug, Default)]
pub struct Vocabulary {
    counts: HashMap<String, u32>,
    by_listing: HashMap<i64, Vec<String>>,
}

impl Vocabulary {
    /// Listing `id`'s text is now `text` (its words replace the ones it had).
    pub fn set(&mut self, id: i64, text: &str) {
        self.remove(id);
        let mut mine: Vec<String> = words(text).collect();
        mine.sort();
        mine.dedup();
        for word in &mine {
            *self.counts.entry(word.clone()).or_default() += 1;
        }
        self.by_listing.insert(id, mine);
    }

    /// Whether some listing uses `word` (lower case).
    pub fn has(&self, word: &str) -> bool {
        self.counts.contains_key(word)
    }

    /// The share of `keywords` (the stem prefixes of a search's words) that
    /// listing `id`'s words begin with: a full-text match on one word of a
    /// long question scores little, one on all its words 1. (Weighting rare
    /// keywords more changed nothing on the tuning sets.)
    /// A listing not read yet (published a moment ago) counts as holding them all.
    pub fn share(&self, id: i64, keywords: &[String]) -> f64 {
        let Some(mine) = self.by_listing.get(&id) else { return 1.0 };
        let held = keywords
            .iter()
            .filter(|keyword| {
                let at = mine.partition_point(|w| w.as_str() < keyword.as_str());
                mine.get(at).is_some_and(|w| w.starts_with(keyword.as_str()))
            })
            .count();
        held as f64 / keywords.len().max(1) as f64
    }

    pub fn remove(&mut self, id: i64) {
        for word in self.by_listing.remove(&id).unwrap_or_default() {
            if let Some(n) = self.counts.get_mut(&word) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&word);
                }
            }
        }
    }

    /// `search` with each misspelt word replaced by its nearest listing word,
    /// or `None` when nothing needed it. `known` says whether the sentence
    /// model knows a word as a whole word (such words are never changed).
    pub fn correct(&self, search: &SearchText, known: impl Fn(&str) -> bool) -> Option<SearchText> {
        let mut fixes: Vec<(String, &str)> = Vec::new();
        let known = |word: &str| {
            known(word)
                || ENDINGS.iter().any(|end| word.strip_suffix(end).is_some_and(|stem| stem.chars().count() >= MIN_LEN - 1 && known(stem)))
        };
        for word in search.terms() {
            if fixes.iter().any(|(w, _)| w == word) || self.counts.contains_key(word.as_str()) || known(word) {
                continue;
            }
            if let Some(nearest) = self.nearest(word) {
                fixes.push((word.clone(), nearest));
            }
        }
        if fixes.is_empty() {
            return None;
        }
        // Each run of letters and digits as typed, or its fix; the rest kept.
        let mut text = String::new();
        let mut word = String::new();
        for c in search.text().chars().chain(std::iter::once(' ')) {
            if c.is_alphanumeric() {
                word.push(c);
                continue;
            }
            let lower = word.to_lowercase();
            match fixes.iter().find(|(w, _)| *w == lower) {
                Some((_, fix)) => text.push_str(fix),
                None => text.push_str(&word),
            }
            word.clear();
            text.push(c);
        }
        SearchText::parse(&text).ok().flatten()
    }

    /// The listing word within reach of `word` (one edit for words of up to
    /// five letters, two beyond) that starts with its letter: the fewest
    /// edits, then the commonest.
    fn nearest(&self, word: &str) -> Option<&str> {
        let len = word.chars().count();
        if len < MIN_LEN || word.chars().any(|c| !c.is_alphabetic() || is_cjk(c)) {
            return None;
        }
        let reach = if len <= 5 { 1 } else { 2 };
        let first = word.chars().next();
        let mut best: Option<(usize, u32, &str)> = None;
        for (candidate, &count) in &self.counts {
            let other = candidate.chars().count();
            if other.abs_diff(len) > reach || other < MIN_LEN || candidate.chars().next() != first {
                continue;
            }
            let Some(d) = edits_within(word, candidate, reach) else { continue };
            let better = match best {
                None => true,
                Some((bd, bc, bw)) => (d, std::cmp::Reverse(count), candidate.as_str()) < (bd, std::cmp::Reverse(bc), bw),
            };
            if better {
                best = Some((d, count, candidate));
            }
        }
        best.map(|(_, _, w)| w)
    }
}

/// The edits (insert, delete, substitute, swap two neighbours) that turn `a`
/// into `b`, if at most `reach`.
fn edits_within(a: &str, b: &str, reach: usize) -> Option<usize> {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Optimal string alignment over three rows.
    let mut before: Vec<usize> = Vec::new();
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        if row.iter().min().is_some_and(|&m| m > reach) {
            return None;
        }
        before = std::mem::replace(&mut last, row);
    }
    Some(last[b.len()]).filter(|&d| d <= reach)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocabulary() -> Vocabulary {
        let mut v = Vocabulary::default();
        v.set(1, "Currency converter: converts an amount between currencies, euros, pounds and dollars");
        v.set(2, "Shipment tracking: where is my customer's shipment");
        v.set(3, "Convert units");
        v
    }

    fn corrected(v: &Vocabulary, text: &str) -> Option<String> {
        v.correct(&SearchText::parse(text).unwrap().unwrap(), |_| false).map(|s| s.text().to_owned())
    }

    #[test]
    fn swapped_missing_and_doubled_letters_are_read_as_the_listings_word() {
        let v = vocabulary();
        assert_eq!(corrected(&v, "convrt 80 poudns to euors").as_deref(), Some("convert 80 pounds to euros"));
        assert_eq!(
            corrected(&v, "trakc my custmer's shipmnet").as_deref(),
            Some("trakc my customer's shipment"),
            "three edits from tracking"
        );
        assert_eq!(corrected(&v, "Currrency"), Some("currency".into()));
    }

    #[test]
    fn words_spelt_right_short_words_and_words_the_model_knows_stay() {
        let v = vocabulary();
        assert_eq!(corrected(&v, "convert euros"), None);
        assert_eq!(corrected(&v, "eur to gbp"), None, "short words are left alone");
        let search = SearchText::parse("francs to euros").unwrap().unwrap();
        assert_eq!(v.correct(&search, |w| w == "francs"), None, "a real word the listings lack is no typo");
        assert_eq!(corrected(&v, "把欧元换算成美元"), None);
        assert_eq!(corrected(&v, "zzzzzzzz"), None, "nothing within reach");
    }

    #[test]
    fn a_word_the_model_knows_without_its_ending_is_no_typo_and_a_fix_keeps_the_first_letter() {
        let mut v = vocabulary();
        v.set(4, "Error logs: search a service's logs");
        let search = SearchText::parse("may I bring dogs to the office").unwrap().unwrap();
        assert_eq!(v.correct(&search, |w| w == "dog"), None, "dog + s");
        assert_eq!(corrected(&v, "dogs"), None, "logs is one edit away, but from another letter");
        assert_eq!(corrected(&v, "lgos").as_deref(), Some("logs"));
        let search = SearchText::parse("convrts pounds").unwrap().unwrap();
        assert_eq!(
            v.correct(&search, |w| w == "dog").map(|s| s.text().to_owned()).as_deref(),
            Some("converts pounds"),
            "a typo with an ending"
        );
    }

    #[test]
    fn a_listings_changed_text_changes_the_vocabulary() {
        let mut v = vocabulary();
        v.set(2, "Parcel tracking");
        assert_eq!(corrected(&v, "shipmnet"), None, "its old words are gone");
        assert_eq!(corrected(&v, "parcle").as_deref(), Some("parcel"));
        v.remove(2);
        assert_eq!(corrected(&v, "parcle"), None);
    }

    #[test]
    fn a_listing_holds_the_share_of_the_keywords_its_words_begin_with() {
        let v = vocabulary();
        let keywords = |text: &str| SearchText::parse(text).unwrap().unwrap().keywords();
        assert_eq!(v.share(1, &keywords("convert pounds to euros")), 1.0);
        assert_eq!(v.share(3, &keywords("convert pounds to euros")), 1.0 / 3.0, "convert, not pounds or euros");
        assert_eq!(v.share(2, &keywords("convert pounds to euros")), 0.0);
        assert_eq!(v.share(9, &keywords("convert")), 1.0, "a listing not read yet is not held against");
        let mut v = v;
        v.set(4, "差旅报销规定");
        assert_eq!(v.share(4, &keywords("出租车能报销吗")), 1.0 / 5.0, "报销, of 出租 租车 车能 能报 报销 (销吗 straddles a particle)");
    }

    #[test]
    fn edits_count_a_swap_as_one() {
        assert_eq!(edits_within("trakc", "track", 1), Some(1));
        assert_eq!(edits_within("custmer", "customer", 2), Some(1));
        assert_eq!(edits_within("abcdef", "uvwxyz", 2), None);
    }
}
