//! `$json2MarkdownTable(rows, columns?)`: rows of objects as a GitHub table.

/// One row: (key, cell text) in the object's own key order. Rows come
/// straight from JS because serde_json's map would sort the keys.
pub(super) type Row = Vec<(String, String)>;

/// Columns default to the union of the rows' keys in first-seen order.
pub(super) fn markdown_table(rows: &[Row], columns: Option<Vec<String>>) -> String {
    let columns = columns.unwrap_or_else(|| {
        let mut seen: Vec<String> = Vec::new();
        for (key, _) in rows.iter().flatten() {
            if !seen.contains(key) {
                seen.push(key.clone());
            }
        }
        seen
    });
    if columns.is_empty() {
        return String::new();
    }

    let mut out = String::new();
    push_row(&mut out, columns.iter().map(String::as_str));
    push_row(&mut out, columns.iter().map(|_| "---"));
    for row in rows {
        push_row(&mut out, columns.iter().map(|column| row.iter().find(|(key, _)| key == column).map_or("", |(_, text)| text.as_str())));
    }
    out.pop();
    out
}

fn push_row<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>) {
    out.push('|');
    for cell in cells {
        out.push(' ');
        // A `|` would end the cell and a newline the row.
        out.push_str(&cell.replace('|', "\\|").replace("\r\n", "<br>").replace(['\n', '\r'], "<br>"));
        out.push_str(" |");
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cells: &[(&str, &str)]) -> Row {
        cells.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn columns_default_to_the_union_of_keys_in_first_seen_order() {
        let rows = [row(&[("b", "x|y"), ("a", "1")]), row(&[("c", "[1,2]"), ("a", "")])];
        assert_eq!(markdown_table(&rows, None), "| b | a | c |\n| --- | --- | --- |\n| x\\|y | 1 |  |\n|  |  | [1,2] |");
    }

    #[test]
    fn explicit_columns_select_and_order_cells() {
        let rows = [row(&[("a", "line1\nline2"), ("b", "{\"k\":true}")])];
        assert_eq!(
            markdown_table(&rows, Some(vec!["b".into(), "a".into()])),
            "| b | a |\n| --- | --- |\n| {\"k\":true} | line1<br>line2 |"
        );
    }

    #[test]
    fn no_rows_and_no_columns_is_an_empty_string() {
        assert_eq!(markdown_table(&[], None), "");
        assert_eq!(markdown_table(&[], Some(vec!["a".into()])), "| a |\n| --- |");
    }
}
