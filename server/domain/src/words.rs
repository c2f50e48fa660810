//! The words of a text as search compares them, in any script: what the
//! full-text index, the search box and typo tolerance agree on. A leaf, so
//! the store can fill in what an older schema lacked.

/// The words of `text` as search compares them: runs of letters and digits,
/// lower case; a run of Chinese, Japanese or Korean characters (written
/// without spaces) as its overlapping pairs, "报销规定" as 报销 销规 规定, so
/// a search shares words with a listing that says 报销 anywhere.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).flat_map(|run| {
        let run = run.to_lowercase();
        let chars: Vec<char> = run.chars().collect();
        let mut words = Vec::new();
        let mut start = 0;
        for end in 1..=chars.len() {
            if end < chars.len() && is_cjk(chars[end]) == is_cjk(chars[start]) {
                continue;
            }
            let part = &chars[start..end];
            if is_cjk(part[0]) && part.len() > 1 {
                words.extend(part.windows(2).map(|pair| pair.iter().collect::<String>()));
            } else {
                words.push(part.iter().collect());
            }
            start = end;
        }
        words
    })
}

/// The CJK pairs of a listing's `title` and `description` (see [`words`]),
/// kept in `tools.cjk_pairs` for full text (see `market::search`): the index's own tokenizer (FTS5
/// unicode61, PostgreSQL `simple`) takes a run without spaces as one word.
pub fn cjk_pairs(title: &str, description: &str) -> String {
    let mut pairs: Vec<String> = Vec::new();
    for word in words(title).chain(words(description)).filter(|w| w.chars().count() == 2 && w.chars().all(is_cjk)) {
        if !pairs.contains(&word) {
            pairs.push(word);
        }
    }
    pairs.join(" ")
}

/// Chinese, Japanese (kana) and Korean (Hangul) characters: scripts written without spaces.
pub fn is_cjk(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{AC00}'..='\u{D7AF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_without_spaces_is_read_as_its_pairs_of_characters() {
        assert_eq!(words("Taxi报销规定, 税").collect::<Vec<_>>(), ["taxi", "报销", "销规", "规定", "税"]);
        assert_eq!(cjk_pairs("差旅报销", "Travel: 报销 rules, 差旅"), "差旅 旅报 报销", "Latin words are indexed as they are");
        assert_eq!(cjk_pairs("Expense policy", "What can be claimed"), "");
    }
}
