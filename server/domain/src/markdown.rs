//! User Markdown (tool descriptions, text results) to HTML that is safe to put
//! in a page: rendered by pulldown-cmark, then cleaned by ammonia (no scripts,
//! no event handlers, no `javascript:` links).

use pulldown_cmark::{html, Event, Options, Parser, TagEnd};

/// `markdown` parsed with the extensions pages render (the scan reads it the same way).
pub(crate) fn parser(markdown: &str) -> Parser<'_> {
    Parser::new_ext(markdown, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS)
}

pub fn to_safe_html(markdown: &str) -> String {
    let parser = parser(markdown);
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

/// MCP content blocks as a page shows them: text as sanitized Markdown,
/// images and audio inline from their data (already checked base64, so only
/// `data:` URLs of their own type), resources as preformatted text, links
/// only when http(s). Every value is escaped.
pub fn content_html(blocks: &[serde_json::Value]) -> String {
    let field = |v: &serde_json::Value, k: &str| escape(v[k].as_str().unwrap_or_default());
    blocks
        .iter()
        .map(|b| match b["type"].as_str().unwrap_or_default() {
            "text" => to_safe_html(b["text"].as_str().unwrap_or_default()),
            "image" => {
                format!(r#"<p><img class="result-image" alt="" src="data:{};base64,{}"></p>"#, field(b, "mimeType"), field(b, "data"))
            }
            "audio" => format!(r#"<p><audio controls src="data:{};base64,{}"></audio></p>"#, field(b, "mimeType"), field(b, "data")),
            "resource" => {
                let r = &b["resource"];
                let body = match r["text"].as_str() {
                    Some(text) => escape(text),
                    None => "(binary)".into(),
                };
                format!(
                    r#"<figure class="result-resource"><figcaption><code>{}</code></figcaption><pre>{body}</pre></figure>"#,
                    field(r, "uri")
                )
            }
            _ => {
                let uri = b["uri"].as_str().unwrap_or_default();
                let name = field(b, "name");
                match uri.starts_with("https://") || uri.starts_with("http://") {
                    true => format!(r#"<p><a href="{}" rel="noopener noreferrer nofollow">{name}</a></p>"#, escape(uri)),
                    false => format!("<p>{name} <code>{}</code></p>", escape(uri)),
                }
            }
        })
        .collect()
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
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

    #[test]
    fn content_shows_images_and_audio_inline_and_escapes_everything_else() {
        let blocks = serde_json::json!([
            {"type": "text", "text": "**Chart** <script>alert(1)</script>"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png\" onerror=\"x"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "test://r", "text": "<b>raw</b>"}},
            {"type": "resource_link", "uri": "javascript:alert(1)", "name": "bad"},
            {"type": "resource_link", "uri": "https://example.com/a?b=1&c=2", "name": "good"}
        ]);
        let html = content_html(blocks.as_array().unwrap());
        assert!(html.contains("<strong>Chart</strong>") && !html.contains("<script>"), "{html}");
        assert!(html.contains(r#"src="data:image/png&quot; onerror=&quot;x;base64,iVBORw0KGgo=""#), "{html}");
        assert!(html.contains(r#"<audio controls src="data:audio/wav;base64,UklGRg=="></audio>"#));
        assert!(html.contains("&lt;b&gt;raw&lt;/b&gt;"));
        assert!(!html.contains(r#"href="javascript"#));
        assert!(html.contains(r#"href="https://example.com/a?b=1&amp;c=2""#));
    }
}
