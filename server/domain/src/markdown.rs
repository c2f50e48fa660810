//! User Markdown (tool descriptions, text results) to HTML that is safe to put
//! in a page: rendered by pulldown-cmark, then cleaned by ammonia (no scripts,
//! no event handlers, no `javascript:` links).

use pulldown_cmark::{html, Event, Options, Parser, TagEnd};

pub fn to_safe_html(markdown: &str) -> String {
    let parser = Parser::new_ext(markdown, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS);
    let mut out = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut out, parser);
    ammonia::Builder::default().link_rel(Some("noopener noreferrer nofollow")).clean(&out).to_string()
}

/// The first `max` characters of the text, Markdown syntax removed, for cards.
pub fn summary(markdown: &str, max: usize) -> String {
    let mut text = String::new();
    for event in Parser::new(markdown) {
        match event {
            Event::Text(t) | Event::Code(t) => text.push_str(&t),
            // Inline ends (emphasis, links) join words; block ends separate them.
            Event::End(TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link) => {}
            Event::SoftBreak | Event::HardBreak | Event::End(_) => text.push(' '),
            _ => {}
        }
    }
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max).collect();
    format!("{}…", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_rendered_and_scripts_are_removed() {
        let html = to_safe_html("# Hi\n\n<script>alert(1)</script>\n\nA <img src=x onerror=alert(1)> [x](javascript:alert(1)) **bold**");
        assert!(html.contains("<h1>Hi</h1>") && html.contains("<strong>bold</strong>"), "{html}");
        assert!(!html.contains("<script") && !html.contains("onerror") && !html.contains("javascript:"), "{html}");
    }

    #[test]
    fn tables_render() {
        assert!(to_safe_html("| a | b |\n|---|---|\n| 1 | 2 |").contains("<table>"));
    }

    #[test]
    fn summaries_drop_syntax_and_cut_long_text() {
        assert_eq!(summary("# Title\n\nSome *emphasis* and `code`.", 100), "Title Some emphasis and code.");
        assert_eq!(summary("abcdefghij", 4), "abcd…");
    }
}
