//! Aligned tables that fit the terminal (issue 16, issue 28 "Fit the
//! terminal"): the one place every human table is laid out.
//!
//! A table has a header row and columns two spaces apart. Where stdout
//! goes decides the rest ([`Layout`]):
//!
//! - **On a terminal** (or under `LOOPS_FORCE_TTY=1`) a rule of `─` goes
//!   under the header and the table fits the width: `COLUMNS` when it is
//!   set, else the terminal's. Below 80 columns the optional columns are
//!   dropped first, one at a time in each table's documented order, until
//!   the table fits; then the widest free-text column ([`Fit::Shrink`]:
//!   names, labels, schedules, errors, messages) is cut, one character at a
//!   time, down to its header's width, each cut cell ending in `…`. When
//!   that is not enough, at any width, the next optional column goes too.
//!   Ids and statuses ([`Fit::Keep`]) are never cut: a table of only those
//!   may stay wider than the terminal.
//! - **Piped** output is never cut: every value whole, no rule, and (by
//!   anstream's rules) no colour. What a script or `less` reads is the whole
//!   text; scripts that need a contract read `--json`.
//!
//! Widths are display widths (`unicode-width`), so a CJK name or an emoji
//! takes the two cells it takes on screen. Colour is added after the
//! layout, around each cell's text, so escape codes never count toward a
//! width.

use std::borrow::Cow;

use anstyle::Style;
use unicode_width::UnicodeWidthStr;

use super::{escape_controls, paint};

/// Below this many columns, optional columns are dropped before any text
/// is cut.
pub(crate) const NARROW: usize = 80;

/// The variable that makes stdout count as a terminal for the layout,
/// whatever it is; for tests and for tools that record a terminal session.
pub(crate) const FORCE_TTY_ENV: &str = "LOOPS_FORCE_TTY";

/// How a table is laid out: to fit a terminal this wide, or whole for a
/// pipe or a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// A terminal this many columns wide.
    Terminal(usize),
    /// A pipe, a file or memory: nothing is cut and there is no rule.
    Piped,
}

impl Layout {
    /// The layout for stdout: a terminal (or `LOOPS_FORCE_TTY=1`) fits
    /// `COLUMNS` when it is a positive number, else the terminal's width,
    /// else 80.
    pub(crate) fn of_stdout() -> Layout {
        use std::io::IsTerminal;
        let forced = std::env::var(FORCE_TTY_ENV).is_ok_and(|v| !v.is_empty() && v != "0");
        let stdout = std::io::stdout();
        if !forced && !stdout.is_terminal() {
            return Layout::Piped;
        }
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0);
        let width = columns
            .or_else(|| terminal_size::terminal_size_of(&stdout).map(|(w, _)| usize::from(w.0)))
            .unwrap_or(NARROW);
        Layout::Terminal(width)
    }

    /// The width to fit, or `None` when nothing is cut.
    pub(crate) fn width(self) -> Option<usize> {
        match self {
            Layout::Terminal(width) => Some(width),
            Layout::Piped => None,
        }
    }
}

/// Whether a column's cells may be cut to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Never cut: ids, statuses, numbers, times.
    Keep,
    /// Free text, cut at its end with `…`.
    Shrink,
    /// A path, cut at its start with `…`, so the file name stays.
    ShrinkStart,
}

/// A column: its header, whether it may be cut, and whether it may be
/// dropped below 80 columns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    pub(crate) header: &'static str,
    pub(crate) fit: Fit,
    /// Dropped below 80 columns when the table does not fit, lowest rank
    /// first; `None`: always shown.
    pub(crate) drop_rank: Option<u8>,
}

impl Column {
    /// A column never cut nor dropped.
    pub(crate) const fn keep(header: &'static str) -> Column {
        Column {
            header,
            fit: Fit::Keep,
            drop_rank: None,
        }
    }

    /// A free-text column, cut at its end to fit.
    pub(crate) const fn shrink(header: &'static str) -> Column {
        Column {
            header,
            fit: Fit::Shrink,
            drop_rank: None,
        }
    }

    /// A path column, cut at its start to fit.
    pub(crate) const fn shrink_start(header: &'static str) -> Column {
        Column {
            header,
            fit: Fit::ShrinkStart,
            drop_rank: None,
        }
    }

    /// This column, dropped below 80 columns when the table does not fit:
    /// rank 0 first.
    pub(crate) const fn optional(mut self, rank: u8) -> Column {
        self.drop_rank = Some(rank);
        self
    }
}

/// Rows of cells under [`Column`]s, each cell with its colour.
pub(crate) struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<(String, Style)>>,
    /// No header row (and no rule): `doctor`'s report.
    headless: bool,
}

/// A laid-out table: the header and its rule, then a line per row.
pub(crate) struct Rendered {
    pub(crate) head: Vec<String>,
    pub(crate) rows: Vec<String>,
}

impl Table {
    pub(crate) fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
            headless: false,
        }
    }

    /// A table whose columns are these headers, none cut nor dropped.
    pub(crate) fn with_headers(headers: &[&'static str]) -> Table {
        Table::new(headers.iter().map(|&h| Column::keep(h)).collect())
    }

    /// The same table without its header row.
    pub(crate) fn headless(mut self) -> Table {
        self.headless = true;
        self
    }

    /// A row of uncoloured cells.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.styled_row(cells.into_iter().map(|c| (c, Style::new())).collect());
    }

    /// A row of cells, each with its colour; a control character in a
    /// cell is escaped, so a stored name with a line break still takes one
    /// line.
    pub(crate) fn styled_row(&mut self, cells: Vec<(String, Style)>) {
        let cells = cells
            .into_iter()
            .map(|(cell, style)| match escape_controls(&cell, &[]) {
                Cow::Borrowed(_) => (cell, style),
                Cow::Owned(escaped) => (escaped, style),
            })
            .collect();
        self.rows.push(cells);
    }

    /// The lines of the table: nothing for an empty table, not even its
    /// header.
    pub(crate) fn render(&self, layout: Layout, color: bool) -> Rendered {
        let mut rendered = Rendered {
            head: Vec::new(),
            rows: Vec::new(),
        };
        if self.rows.is_empty() {
            return rendered;
        }
        let natural = self.natural_widths();
        let (shown, widths) = match layout.width() {
            Some(width) => fit(&self.columns, natural, width),
            None => ((0..self.columns.len()).collect(), natural),
        };
        let header: Vec<(String, Style)> = self
            .columns
            .iter()
            .map(|c| (c.header.to_owned(), Style::new()))
            .collect();
        if !self.headless {
            let line = self.line(&shown, &widths, &header, false);
            let line = if color {
                paint(&line, Style::new().bold(), true)
            } else {
                line
            };
            rendered.head.push(line);
            if layout.width().is_some() {
                let total: usize = shown.iter().map(|&i| widths[i]).sum::<usize>()
                    + 2 * shown.len().saturating_sub(1);
                rendered.head.push("─".repeat(total));
            }
        }
        for cells in &self.rows {
            rendered.rows.push(self.line(&shown, &widths, cells, color));
        }
        rendered
    }

    /// Each column's width: its widest cell or its header.
    fn natural_widths(&self) -> Vec<usize> {
        self.columns
            .iter()
            .enumerate()
            .map(|(i, column)| {
                let cells = self.rows.iter().filter_map(|r| r.get(i));
                let widest = cells.map(|(c, _)| c.width()).max().unwrap_or(0);
                if self.headless {
                    widest
                } else {
                    widest.max(column.header.width())
                }
            })
            .collect()
    }

    /// One line: the shown cells, cut to their column's width, padded,
    /// two spaces apart, the last one unpadded.
    fn line(
        &self,
        shown: &[usize],
        widths: &[usize],
        cells: &[(String, Style)],
        color: bool,
    ) -> String {
        let mut line = String::new();
        for (n, &i) in shown.iter().enumerate() {
            let (text, style) = cells
                .get(i)
                .map_or(("", Style::new()), |(c, s)| (c.as_str(), *s));
            let text = cut(text, widths[i], self.columns[i].fit);
            let used = text.width();
            line.push_str(&paint(&text, style, color));
            if n + 1 < shown.len() {
                line.push_str(&" ".repeat(widths[i].saturating_sub(used) + 2));
            }
        }
        line.truncate(line.trim_end().len());
        line
    }
}

/// The columns shown and each column's width to fit `width` (module doc):
/// below [`NARROW`], optional columns dropped in rank order until the
/// natural widths fit; then the widest cuttable column narrowed, one cell
/// at a time, down to its header's width; and if that is not enough, at
/// any width, the next optional column dropped and the cutting redone.
fn fit(columns: &[Column], natural: Vec<usize>, width: usize) -> (Vec<usize>, Vec<usize>) {
    let mut shown: Vec<usize> = (0..columns.len()).collect();
    let mut optional: Vec<usize> = shown
        .iter()
        .copied()
        .filter(|&i| columns[i].drop_rank.is_some())
        .collect();
    optional.sort_by_key(|&i| columns[i].drop_rank);
    let mut optional = optional.into_iter();
    if width < NARROW {
        while total(&shown, &natural) > width {
            let Some(drop) = optional.next() else { break };
            shown.retain(|&i| i != drop);
        }
    }
    loop {
        let widths = shrink(columns, &shown, natural.clone(), width);
        if total(&shown, &widths) <= width {
            return (shown, widths);
        }
        match optional.next() {
            Some(drop) => shown.retain(|&i| i != drop),
            None => return (shown, widths),
        }
    }
}

/// The width of the shown columns, two spaces apart.
fn total(shown: &[usize], widths: &[usize]) -> usize {
    shown.iter().map(|&i| widths[i]).sum::<usize>() + 2 * shown.len().saturating_sub(1)
}

/// `widths` with the widest cuttable shown column narrowed, one cell at a
/// time, until the table fits `width` or each is down to its header's
/// width (at least 4).
fn shrink(columns: &[Column], shown: &[usize], mut widths: Vec<usize>, width: usize) -> Vec<usize> {
    let floors: Vec<usize> = (0..columns.len())
        .map(|i| columns[i].header.width().max(4).min(widths[i]))
        .collect();
    let mut over = total(shown, &widths).saturating_sub(width);
    while over > 0 {
        let widest = shown
            .iter()
            .copied()
            .filter(|&i| columns[i].fit != Fit::Keep && widths[i] > floors[i])
            .max_by_key(|&i| (widths[i], std::cmp::Reverse(i)));
        let Some(i) = widest else { break };
        widths[i] -= 1;
        over -= 1;
    }
    widths
}

/// `text` cut to `width` display cells with `…` (at its end, or at its
/// start for a path); as it is when it fits or is never cut.
pub(crate) fn cut(text: &str, width: usize, fit: Fit) -> Cow<'_, str> {
    if fit == Fit::Keep || text.width() <= width {
        return Cow::Borrowed(text);
    }
    let room = width.saturating_sub(1);
    match fit {
        Fit::ShrinkStart => {
            let mut used = 0;
            let mut start = text.len();
            for (at, c) in text.char_indices().rev() {
                let w = c.to_string().width();
                if used + w > room {
                    break;
                }
                used += w;
                start = at;
            }
            Cow::Owned(format!("…{}", &text[start..]))
        }
        Fit::Shrink | Fit::Keep => {
            let mut used = 0;
            let mut end = 0;
            for (at, c) in text.char_indices() {
                let w = c.to_string().width();
                if used + w > room {
                    break;
                }
                used += w;
                end = at + c.len_utf8();
            }
            Cow::Owned(format!("{}…", &text[..end]))
        }
    }
}

/// A line cut to `layout`'s width with `…`; whole when piped.
pub(crate) fn fit_line(text: &str, layout: Layout) -> Cow<'_, str> {
    match layout.width() {
        Some(width) => cut(text, width, Fit::Shrink),
        None => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::status_style;

    fn table() -> Table {
        let mut t = Table::with_headers(&["ID", "NEXT", "NAME"]);
        t.row(vec!["a".into(), "-".into(), "first".into()]);
        t.styled_row(vec![
            ("bbb".into(), Style::new()),
            ("2026".into(), status_style("failed")),
            ("second".into(), Style::new()),
        ]);
        t
    }

    const WIDE: Layout = Layout::Terminal(200);

    #[test]
    fn a_terminal_gets_a_rule_and_a_pipe_does_not() {
        let r = table().render(WIDE, false);
        assert_eq!(r.head[0], "ID   NEXT  NAME");
        assert_eq!(r.head[1], "─".repeat(17));
        assert_eq!(r.rows, ["a    -     first", "bbb  2026  second"]);
        let piped = table().render(Layout::Piped, false);
        assert_eq!(piped.head, ["ID   NEXT  NAME"]);
        assert_eq!(piped.rows, r.rows);
        assert!(
            Table::with_headers(&["ID"])
                .render(WIDE, false)
                .head
                .is_empty()
        );
    }

    #[test]
    fn colour_comes_after_the_layout() {
        let r = table().render(WIDE, true);
        assert_eq!(r.head[0], "\u{1b}[1mID   NEXT  NAME\u{1b}[0m");
        assert_eq!(r.rows[0], "a    -     first");
        assert_eq!(r.rows[1], "bbb  \u{1b}[31m2026\u{1b}[0m  second");
    }

    fn wide_table() -> Table {
        let mut t = Table::new(vec![
            Column::keep("ID"),
            Column::shrink("NAME"),
            Column::keep("STATUS"),
            Column::shrink("SCHEDULE").optional(1),
            Column::shrink("LAST").optional(0),
        ]);
        t.row(vec![
            "0123456789ab".into(),
            "a-rather-long-loop-name [label-one,label-two]".into(),
            "active".into(),
            "cron 0 9 * * MON-FRI (Europe/Berlin)".into(),
            "succeeded 2h ago".into(),
        ]);
        t
    }

    #[test]
    fn tables_fit_by_dropping_then_cutting_never_ids_or_statuses() {
        for width in [40, 60, 79, 80, 100, 120] {
            let r = wide_table().render(Layout::Terminal(width), false);
            for line in r.head.iter().chain(&r.rows) {
                assert!(line.width() <= width, "{width}: {line:?}");
            }
            assert!(r.rows[0].starts_with("0123456789ab  "), "{:?}", r.rows);
            assert!(r.rows[0].contains("  active"), "{:?}", r.rows);
        }
        // Below 80 the optional columns go first, in rank order.
        let r = wide_table().render(Layout::Terminal(79), false);
        assert!(!r.head[0].contains("LAST"), "{:?}", r.head);
        let r = wide_table().render(Layout::Terminal(60), false);
        assert_eq!(
            r.head[0].split_whitespace().collect::<Vec<_>>(),
            ["ID", "NAME", "STATUS"]
        );
        assert!(
            r.rows[0].contains("a-rather-long-loop-name [label-one,la…"),
            "{:?}",
            r.rows
        );
        // At 80 and above nothing is dropped: text is cut instead.
        let r = wide_table().render(Layout::Terminal(80), false);
        assert!(r.head[0].contains("LAST"), "{:?}", r.head);
        assert!(r.rows[0].contains('…'), "{:?}", r.rows);
        // Piped: every value whole.
        let r = wide_table().render(Layout::Piped, false);
        assert!(r.rows[0].ends_with("succeeded 2h ago"));
        assert!(!r.rows[0].contains('…'));
    }

    #[test]
    fn cuts_count_display_width() {
        assert_eq!(cut("abcdef", 4, Fit::Shrink), "abc…");
        assert_eq!(cut("abcd", 4, Fit::Shrink), "abcd");
        assert_eq!(cut("日本語の名前", 6, Fit::Shrink), "日本…");
        assert_eq!(cut("/a/b/backup.db", 10, Fit::ShrinkStart), "…backup.db");
        assert_eq!(cut("0123456789ab", 4, Fit::Keep), "0123456789ab");
        let mut t = Table::new(vec![Column::shrink("NAME"), Column::keep("STATUS")]);
        t.row(vec!["日本語の名前です".into(), "active".into()]);
        let r = t.render(Layout::Terminal(16), false);
        // The cut name takes 7 of its 8 cells: a wide character does not
        // fit in the last one.
        assert_eq!(r.rows[0], "日本語…   active");
        assert_eq!(r.rows[0].width(), 16);
    }

    #[test]
    fn control_characters_are_escaped_in_cells() {
        let mut t = Table::with_headers(&["NAME"]);
        t.row(vec!["two\nlines\u{1b}]0;x\u{7}".into()]);
        assert_eq!(
            t.render(Layout::Piped, false).rows,
            ["two\\nlines\\u{1b}]0;x\\u{7}"]
        );
        // Issue 25 item 7: bidi and zero-width characters are escaped too,
        // so a name cannot read backwards and columns stay aligned.
        let mut t = Table::with_headers(&["NAME", "STATUS"]);
        t.row(vec!["safe\u{202e}txt.exe".into(), "active".into()]);
        t.row(vec!["a\u{200b}\u{2066}b".into(), "paused".into()]);
        assert_eq!(
            t.render(Layout::Piped, false).rows,
            [
                "safe\\u{202e}txt.exe  active",
                "a\\u{200b}\\u{2066}b   paused"
            ]
        );
    }

    #[test]
    fn a_headless_table_has_no_header() {
        let mut t = Table::with_headers(&["S", "ID", "MESSAGE"]).headless();
        t.row(vec!["ok".into(), "daemon".into(), "fine".into()]);
        let r = t.render(WIDE, false);
        assert!(r.head.is_empty());
        assert_eq!(r.rows, ["ok  daemon  fine"]);
    }
}
