//! What someone typed in the search box, turned into full-text terms that are
//! safe for either backend: words of letters and digits only, so FTS syntax
//! (`"`, `*`, `OR`, `-`, `NEAR(`, `:`, `&`, `!`) is never syntax, just words
//! or separators. The terms travel as a bound parameter, never inside the SQL.

use crate::names::Invalid;
use crate::store::Backend;
use crate::words::words;

/// A search of one or more words, as typed (`text`, what the sentence model
/// reads) and as full-text terms (the first [`Self::MAX_TERMS`] distinct words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchText {
    text: String,
    terms: Vec<String>,
}

impl SearchText {
    /// A paragraph: what an agent writes when it says what it needs.
    pub const MAX_CHARS: usize = 1000;
    /// Words past these still reach the sentence model, not the full-text index.
    pub const MAX_TERMS: usize = 32;

    /// `None` when the text has no words at all (blank, or only punctuation).
    pub fn parse(raw: &str) -> Result<Option<Self>, Invalid> {
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(Invalid { field: "Search", reason: format!("must be at most {} characters", Self::MAX_CHARS) });
        }
        let mut terms: Vec<String> = Vec::new();
        for word in words(raw) {
            if !terms.contains(&word) {
                terms.push(word);
            }
        }
        terms.truncate(Self::MAX_TERMS);
        let text = raw.split_whitespace().collect::<Vec<_>>().join(" ");
        Ok((!terms.is_empty()).then_some(Self { text, terms }))
    }

    /// The search as typed, its spacing made plain.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// The full-text query in the backend's own syntax: any of the
    /// [`Self::keywords`], each a prefix, the more matching the better: FTS5
    /// `"w1"* OR "w2"*`, PostgreSQL `'w1':* | 'w2':*` for `to_tsquery`. Safe
    /// because every term is letters and digits only.
    pub(crate) fn fts_query(&self, backend: Backend) -> String {
        let quoted = self.keywords().into_iter().map(|t| match backend {
            Backend::Sqlite => format!("\"{t}\"*"),
            Backend::Postgres => format!("'{t}':*"),
        });
        quoted.collect::<Vec<_>>().join(match backend {
            Backend::Sqlite => " OR ",
            Backend::Postgres => " | ",
        })
    }

    /// This search with `typed`'s words added to its full-text terms; its
    /// text, what the sentence model reads, stays. A correction keeps the
    /// words it replaced this way: the vocabulary it corrects by is titles and
    /// descriptions, and a replaced word may be a name's or a tag's.
    pub(crate) fn and_words_of(&self, typed: &SearchText) -> SearchText {
        let mut terms = self.terms.clone();
        terms.extend(typed.terms.iter().filter(|t| !self.terms.contains(t)).cloned());
        SearchText { text: self.text.clone(), terms }
    }

    /// The words that say what is wanted, as typed: neither common words nor
    /// plain numbers.
    pub fn subject_words(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(String::as_str).filter(|t| {
            !STOP_WORDS.contains(t)
                && !t.chars().all(|c| c.is_ascii_digit())
                && !CJK_STOP_PAIRS.contains(t)
                && !t.chars().any(|c| CJK_PARTICLES.contains(c))
        })
    }

    /// The words that say what is wanted, as the prefixes their stems keep: a
    /// sentence such as "how many vacation days do I have left" becomes
    /// `vacat`, `day`, `left`. Common words and plain numbers (which name an
    /// instance, not a tool) are left out, unless nothing else remains.
    pub fn keywords(&self) -> Vec<String> {
        let stemmer = rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English);
        let mut keywords: Vec<String> = Vec::new();
        for term in self.subject_words() {
            let stem = stem_prefix(term, &stemmer.stem(term));
            if !keywords.contains(&stem) {
                keywords.push(stem);
            }
        }
        if keywords.is_empty() {
            self.terms.clone()
        } else {
            keywords
        }
    }
}

/// What of `word` its `stem` keeps, as a prefix of the word: the index holds
/// words as written, and a stem may end otherwise ("daily" → `daili`, searched
/// as `dail`). Where the stem ends in the `i` of a `y` ("policies" → `polici`),
/// that goes too, so `polic` finds "policy" as well.
fn stem_prefix(word: &str, stem: &str) -> String {
    let kept: String = word.chars().zip(stem.chars()).take_while(|(w, s)| w == s).map(|(w, _)| w).collect();
    // "policies", "studied": the stem's `i` stands for a `y`; not in "taxis".
    let from_y = kept != word && (word.ends_with("ies") || word.ends_with("ied"));
    match kept.strip_suffix('i') {
        Some(rest) if from_y && rest.chars().count() >= 3 => rest.to_owned(),
        _ if kept.chars().count() < 2 => word.to_owned(),
        _ => kept,
    }
}

/// English words that carry no subject: questions and requests are full of them.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "but", "by", "can", "could", "did",
    "do", "does", "for", "from", "get", "give", "had", "has", "have", "he", "her", "here", "his", "how", "i", "if", "in", "into", "is",
    "it", "its", "just", "let", "many", "me", "much", "my", "need", "needs", "no", "not", "now", "of", "on", "or", "our", "please", "she",
    "should", "show", "so", "some", "tell", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "up",
    "us", "want", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "yet", "you",
    "your",
];

/// Chinese particles: a pair with one ("的审", "批吗") straddles two words
/// and means nothing. (Characters such as 请 or 会 stay: 请假, 会议.)
const CJK_PARTICLES: &str = "的吗呢吧啊呀么";

/// Chinese words that carry no subject, as "what" and "we" do not.
const CJK_STOP_PAIRS: &[&str] = &[
    "什么", "怎么", "怎样", "为什", "我们", "你们", "他们", "她们", "它们", "多少", "是否", "是不", "不是", "可以", "哪些", "哪个", "这个",
    "那个", "这些", "那些", "一下", "有没", "没有", "能不", "不能", "请问", "帮我", "我想", "我要", "现在", "需要", "如何",
];

/// The tool source's full-text part for `backend`, with `$param` standing for
/// the bound [`SearchText::fts_query`]: a join that keeps matching tools, and
/// the relevance expression over alias `t` (higher is better; `0` unless `ranked`).
pub(crate) fn tool_text_match(backend: Backend, param: &str, ranked: bool) -> (String, String) {
    match (backend, ranked) {
        (Backend::Sqlite, false) => (format!("JOIN (SELECT rowid AS id FROM tools_fts WHERE tools_fts MATCH {param}) m ON m.id = t.id"), "0".to_owned()),
        // bm25 is lower-is-better; the weights are name, title, tags, description, CJK pairs.
        (Backend::Sqlite, true) => (
            format!("JOIN (SELECT rowid AS id, -bm25(tools_fts, 10.0, 10.0, 5.0, 1.0, 5.0) AS rank FROM tools_fts WHERE tools_fts MATCH {param}) m ON m.id = t.id"),
            "m.rank".to_owned(),
        ),
        (Backend::Postgres, ranked) => (
            format!("JOIN to_tsquery('simple', {param}) m(query) ON t.search_vector @@ m.query"),
            if ranked { "ts_rank(t.search_vector, m.query)" } else { "0" }.to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_syntax_becomes_plain_words() {
        let s = SearchText::parse(r#"FX "rate" OR -x* NEAR(a b) col:val"#).unwrap().unwrap();
        assert_eq!(s.terms(), ["fx", "rate", "or", "x", "near", "a", "b", "col", "val"]);
        assert_eq!(SearchText::parse("Rate rate").unwrap().unwrap().fts_query(Backend::Sqlite), r#""rate"*"#);
        assert_eq!(SearchText::parse("fx b2").unwrap().unwrap().fts_query(Backend::Postgres), "'fx':* | 'b2':*");
    }

    #[test]
    fn a_question_matches_on_any_of_its_stemmed_keywords() {
        let s = SearchText::parse("How many vacation days do I have left in 2027?").unwrap().unwrap();
        assert_eq!(s.keywords(), ["vacat", "day", "left"]);
        assert_eq!(s.fts_query(Backend::Sqlite), r#""vacat"* OR "day"* OR "left"*"#);
        assert_eq!(s.fts_query(Backend::Postgres), "'vacat':* | 'day':* | 'left':*");
        let s = SearchText::parse("daily policies, taxis policy").unwrap().unwrap();
        assert_eq!(s.keywords(), ["dail", "polic", "taxi"], "prefixes of the words as written");
        // Nothing but common words: they are what there is to search for.
        assert_eq!(SearchText::parse("who is it").unwrap().unwrap().keywords(), ["who", "is", "it"]);
    }

    #[test]
    fn a_correction_keeps_the_words_it_replaced_for_full_text_only() {
        let typed = SearchText::parse("ledgr lookup").unwrap().unwrap();
        let both = SearchText::parse("ledger lookup").unwrap().unwrap().and_words_of(&typed);
        assert_eq!(both.text(), "ledger lookup", "the model reads the correction");
        assert_eq!(both.terms(), ["ledger", "lookup", "ledgr"]);
    }

    #[test]
    fn chinese_is_searched_by_pairs_of_characters() {
        let s = SearchText::parse("报销规定 taxi报销").unwrap().unwrap();
        assert_eq!(s.terms(), ["报销", "销规", "规定", "taxi"], "a pair already seen is not repeated");
        assert_eq!(s.fts_query(Backend::Sqlite), r#""报销"* OR "销规"* OR "规定"* OR "taxi"*"#);
        assert_eq!(SearchText::parse("税").unwrap().unwrap().terms(), ["税"], "one character is a word of its own");
        assert_eq!(SearchText::parse("报销是什么").unwrap().unwrap().keywords(), ["报销", "销是", "是什"], "什么: no subject");
        assert_eq!(SearchText::parse("我想请假").unwrap().unwrap().keywords(), ["想请", "请假"], "我想: no subject; 请假 is one");
    }

    #[test]
    fn blank_or_punctuation_only_text_is_no_search() {
        assert_eq!(SearchText::parse("").unwrap(), None);
        assert_eq!(SearchText::parse(r#" "*" -- ' ; "#).unwrap(), None);
    }

    #[test]
    fn overlong_text_is_refused_clearly_and_a_long_sentence_is_not() {
        let e = SearchText::parse(&"x".repeat(10_000)).unwrap_err();
        assert_eq!(e.to_string(), "Search: must be at most 1000 characters");
        let many = (0..60).map(|i| format!("w{i}")).collect::<Vec<_>>().join("  ");
        let search = SearchText::parse(&many).unwrap().unwrap();
        assert_eq!(search.terms().len(), SearchText::MAX_TERMS, "full text takes the first words");
        assert_eq!(search.text(), many.replace("  ", " "), "the model reads them all");
    }
}
