//! Best first: the one ranking behind the Browse box, bundle pickers and the
//! personal endpoint's `search_tools`. Two rankings are merged: the full-text
//! one (any keyword of the search may match, since people and models ask in
//! sentences; the more and rarer the better) and, with a sentence model, the
//! nearest in meaning, which finds "notebook computer" for *Order a laptop*,
//! and a Chinese query's English tool. Misspelt words are first read as the
//! listings' nearest words (full text looks for both).
//!
//! Each listing scores a weighted sum of its meaning match (its similarity,
//! scaled between the nearest and the last the caller may see of the
//! [`NEAREST`]) and its full-text match (its rank, times the share of the
//! search's keywords its text holds): unlike fusing ranks alone, a meaning
//! match far ahead of the rest beats a word match that only happens to rank
//! first, or that holds one common word of a long question.

use crate::accounts::User;
use crate::ids::ToolId;
use crate::tools::ToolError;

use super::{BrowseQuery, BrowseSort, Market};

/// How much a listing's meaning counts against its words in the fused score.
/// This, [`WORD_RANK_DECAY`] and [`WORD_SHARE_FLOOR`] were chosen on the
/// tuning sets (bench/search/queries.json and tuning.json), never on eval.json.
const MEANING_WEIGHT: f64 = 0.7;
/// A full-text rank's score: the first 1, the second 0.5, the fifth 0.2.
const WORD_RANK_DECAY: f64 = 1.0;
/// What a full-text match is worth when its title and description hold none
/// of the search's keywords (it matched on its name or tags), against 1 when
/// they hold them all.
const WORD_SHARE_FLOOR: f64 = 0.3;
/// How far down each ranking fusion looks at least.
const FUSION_CANDIDATES: usize = 50;
/// Nearest listings the caller may see that meaning is scaled over, before
/// the filters thin them.
const NEAREST: usize = 100;
/// Nearest listings asked of the semantic index, before the caller's
/// visibility thins them to [`NEAREST`]: only where more than this many
/// nearer ones are hidden from the caller do those move what they get.
const NEAREST_ASKED: usize = 3 * NEAREST;

/// One listing a search found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Found {
    pub id: ToolId,
    /// Some of its words match the search's.
    pub by_words: bool,
    /// How near its meaning is: 1 the nearest the caller may see, 0 the last
    /// of those among the [`NEAREST`], or further.
    pub nearness: f32,
}

impl Market<'_> {
    /// The listings `user` may see that match `query`'s text and filters,
    /// best first, at most `limit` of them (its page and sort are not read):
    /// those with a word of the search, and the nearest in meaning. No text: none.
    pub(crate) async fn best_first(self, user: &User, query: &BrowseQuery, limit: usize) -> Result<Vec<Found>, ToolError> {
        let Some(typed) = &query.text else { return Ok(Vec::new()) };
        let semantic = self.core.semantic();
        let corrected = semantic.and_then(|s| s.correct(typed));
        let mut terms = corrected.as_ref().map_or_else(|| typed.clone(), |c| c.and_words_of(typed));
        let mut text = corrected.unwrap_or_else(|| typed.clone());
        // Chinese words are searched in English too (the sentence model reads
        // the search both ways itself, see `SemanticIndex::nearest`).
        if let Some(english) = semantic.and_then(|s| s.in_english(typed)) {
            terms = terms.and_words_of(&english);
            text = text.and_words_of(&english);
        }
        let words = BrowseQuery { text: Some(terms), sort: BrowseSort::Relevance, page: 1, ..query.clone() };
        let by_words = self.ranked(user, &words, limit.max(FUSION_CANDIDATES), 0);
        let Some(semantic) = semantic else {
            return Ok(by_words.await?.into_iter().take(limit).map(|id| Found { id, by_words: true, nearness: 0.0 }).collect());
        };
        // Independent: the full-text query waits on the database while the
        // search is encoded (most of a search's time) on another thread.
        let (lexical, near) = tokio::join!(by_words, semantic.nearest(user.id, &text, NEAREST_ASKED));
        let lexical = lexical?;
        // The nearest the caller may see, whatever the filters, and of those
        // the ones the filters keep. Nearness is scaled among the former:
        // neither a listing the caller may not see nor a filter moves it.
        let ids = |near: &[(ToolId, f32)]| near.iter().map(|(id, _)| *id).collect::<Vec<_>>();
        let anyone =
            BrowseQuery { sort: BrowseSort::Newest, among: Some(ids(&near)), within: query.within.clone(), ..BrowseQuery::default() };
        let may_see = if near.is_empty() { Vec::new() } else { self.ranked(user, &anyone, NEAREST_ASKED, 0).await? };
        let visible: Vec<(ToolId, f32)> = near.into_iter().filter(|(id, _)| may_see.contains(id)).take(NEAREST).collect();
        let filtered = BrowseQuery { text: None, sort: BrowseSort::Newest, among: Some(ids(&visible)), ..words };
        let kept = if visible.is_empty() { Vec::new() } else { self.ranked(user, &filtered, NEAREST, 0).await? };
        // A word match counts as much as the share of the search's keywords
        // the listing's text holds: one common word of a long question is weak.
        let shares = semantic.shares(&lexical, &text.keywords());
        let mut scored: Vec<(f64, Found)> = lexical
            .into_iter()
            .zip(shares)
            .enumerate()
            .map(|(rank, (id, share))| {
                let words = WORD_SHARE_FLOOR + (1.0 - WORD_SHARE_FLOOR) * share;
                ((1.0 - MEANING_WEIGHT) * words / (1.0 + WORD_RANK_DECAY * rank as f64), Found { id, by_words: true, nearness: 0.0 })
            })
            .collect();
        // Similarity scaled from the last of the visible nearest (0) to the nearest (1).
        let (best, last) = (visible.first().map_or(1.0, |n| n.1), visible.last().map_or(0.0, |n| n.1));
        for &(id, similarity) in visible.iter().filter(|(id, _)| kept.contains(id)).take(FUSION_CANDIDATES) {
            let nearness = if best > last { (similarity - last) / (best - last) } else { 1.0 };
            let score = MEANING_WEIGHT * f64::from(nearness);
            match scored.iter_mut().find(|(_, found)| found.id == id) {
                Some((total, found)) => (*total, found.nearness) = (*total + score, nearness),
                None => scored.push((score, Found { id, by_words: false, nearness })),
            }
        }
        // A stable sort: ties go to the full-text match, which came first.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok(scored.into_iter().take(limit).map(|(_, found)| found).collect())
    }
}
