//! Writing to stdout: pretty JSON, aligned tables and output blocks
//! (SPEC §7.2, §7.4).
//!
//! Every write returns its `io::Error`, so a closed pipe ends the command
//! quietly through `exit` instead of panicking as `println!` would.
//!
//! Tables have two looks. *Plain* is used when stdout is not a terminal or
//! `NO_COLOR` is set: no header, no box drawing, the original's `key=value`
//! cells, columns separated by two spaces, so scripts that read the
//! original's lines keep working. *Styled* (a terminal) adds a header row
//! and a rule under it. Both align their columns.
//!
//! Human output never writes a control character from stored data to the
//! terminal: names, working directories, errors and run output may hold an
//! ESC or a CR (the original's database does not check them, and output is
//! whatever a process printed), which would move the cursor or rewrite the
//! screen. [`escape_controls`] shows each one as a Rust escape (`\u{1b}`,
//! `\r`): a line keeps only its tabs and line breaks, a table cell and an
//! output line nothing. JSON needs none of this: serde_json writes every C0
//! control as `\u00XX`.

use std::borrow::Cow;
use std::io::{BufWriter, IsTerminal, StdoutLock, Write};

use comfy_table::{ContentArrangement, LineStyle, Table as Grid, TableStyle};
use loops_core::LoopRun;
use serde_json::Value;

/// Output text is cut at this many characters (SPEC §7.2).
const BLOCK_MAX_CHARS: usize = 32_768;

/// The printer's stdout buffer.
const BUFFER: usize = 64 * 1024;

/// How human output looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Look {
    /// No header, no drawing: for pipes and `NO_COLOR`.
    Plain,
    /// A header row and a rule: for terminals.
    Styled,
}

/// Where command output goes.
pub(crate) struct Printer {
    /// Buffered: stdout is line-buffered, and a pretty JSON list of a
    /// thousand loops would otherwise cost tens of thousands of writes. The
    /// buffer is flushed by [`Printer::flush`] and when the printer drops.
    out: BufWriter<StdoutLock<'static>>,
    /// `--json` was given.
    pub(crate) json: bool,
    look: Look,
}

impl Printer {
    /// Stdout, styled only on a terminal without `NO_COLOR`.
    pub(crate) fn stdout(json: bool) -> Printer {
        let out = std::io::stdout();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let look = if out.is_terminal() && !no_color {
            Look::Styled
        } else {
            Look::Plain
        };
        Printer {
            out: BufWriter::with_capacity(BUFFER, out.lock()),
            json,
            look,
        }
    }

    /// Pretty-prints `value` with two-space indentation (SPEC §0).
    pub(crate) fn json(&mut self, value: &Value) -> std::io::Result<()> {
        self.json_of(value)
    }

    /// Pretty-prints any serializable record, without building a
    /// `serde_json::Value` first (lists of thousands of loops).
    pub(crate) fn json_of<T: serde::Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> std::io::Result<()> {
        crate::pretty::write(&mut self.out, value)?;
        writeln!(self.out)
    }

    /// A JSON array printed element by element, in chunks of the whole
    /// buffer; close it with [`Printer::end_json_array`].
    pub(crate) fn json_array(&mut self) -> crate::pretty::ArrayWriter<&mut dyn Write> {
        crate::pretty::ArrayWriter::new(&mut self.out, BUFFER)
    }

    /// Closes an array of [`Printer::json_array`], and a newline.
    pub(crate) fn end_json_array(
        list: crate::pretty::ArrayWriter<&mut dyn Write>,
    ) -> std::io::Result<()> {
        writeln!(list.finish()?)
    }

    /// One line of text (or several: `daemon logs` prints its tail at
    /// once), its control characters other than tabs and line breaks
    /// escaped.
    pub(crate) fn line(&mut self, text: &str) -> std::io::Result<()> {
        let text = escape_controls(text, &['\n', '\t']);
        writeln!(self.out, "{text}")
    }

    /// Writes out everything printed so far; for progress that should show
    /// before a long wait.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// A table; `after(i)` gives lines to print after row `i` (output
    /// blocks), which do not take part in the alignment.
    pub(crate) fn table(
        &mut self,
        table: &Table,
        after: impl Fn(usize) -> Vec<String>,
    ) -> std::io::Result<()> {
        let rendered = table.render(self.look);
        for line in &rendered.head {
            self.line(line)?;
        }
        for (i, line) in rendered.rows.iter().enumerate() {
            self.line(line)?;
            for extra in after(i) {
                self.line(&extra)?;
            }
        }
        Ok(())
    }
}

/// Prints `<label>: <text>` on stderr. A closed stderr leaves nobody to
/// tell, so write errors are ignored (where `eprintln!` would panic).
pub(crate) fn note(label: &str, text: &str) {
    let text = escape_controls(text, &['\n', '\t']);
    let _ = writeln!(std::io::stderr().lock(), "{label}: {text}");
}

/// Prints `warning: <text>` on stderr: something accepted that is probably
/// not what was meant.
pub(crate) fn warn(text: &str) {
    note("warning", text);
}

/// `text` with every control character (C0, DEL and C1) not in `keep`
/// written as its Rust escape: `\n`, `\r`, `\t`, `\u{1b}`, `\u{9b}`.
/// Borrowed when there is nothing to escape, which is almost always.
pub(crate) fn escape_controls<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    let escaped = |c: char| c.is_control() && !keep.contains(&c);
    if !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A column: its header in the styled look and the prefix of its cells in
/// the plain look (`next=`, `attempt=`), as the original prints them.
pub(crate) struct Column {
    pub(crate) header: &'static str,
    pub(crate) plain_prefix: &'static str,
}

/// Rows of cells under [`Column`]s.
pub(crate) struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
}

struct Rendered {
    head: Vec<String>,
    rows: Vec<String>,
}

impl Table {
    pub(crate) fn new(columns: Vec<Column>) -> Table {
        Table {
            columns,
            rows: Vec::new(),
        }
    }

    /// A row; a control character in a cell is escaped, so a stored name
    /// with a line break still takes one line.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .into_iter()
            .map(|cell| match escape_controls(&cell, &[]) {
                Cow::Borrowed(_) => cell,
                Cow::Owned(escaped) => escaped,
            })
            .collect();
        self.rows.push(cells);
    }

    fn render(&self, look: Look) -> Rendered {
        if self.rows.is_empty() {
            return Rendered {
                head: Vec::new(),
                rows: Vec::new(),
            };
        }
        let mut grid = Grid::new();
        let style = match look {
            Look::Plain => TableStyle::new(),
            Look::Styled => {
                TableStyle::new().header_separator(LineStyle::none().fill('─').junction('─'))
            }
        };
        grid.load_style(style)
            .set_content_arrangement(ContentArrangement::Disabled);
        if look == Look::Styled {
            grid.set_header(self.columns.iter().map(|c| c.header));
        }
        for cells in &self.rows {
            grid.add_row(
                cells
                    .iter()
                    .zip(&self.columns)
                    .map(|(cell, col)| match look {
                        Look::Plain => format!("{}{cell}", col.plain_prefix),
                        Look::Styled => cell.clone(),
                    }),
            );
        }
        // Two spaces between columns, as the original separates fields. The
        // rule under the styled header puts a one-character junction
        // between columns, which counts as one of the two.
        let gap = match look {
            Look::Plain => 2,
            Look::Styled => 1,
        };
        let last = self.columns.len().saturating_sub(1);
        for (i, column) in grid.column_iter_mut().enumerate() {
            column.set_padding((0, if i == last { 0 } else { gap }));
        }
        // Cells never contain newlines (they are escaped), so each line is
        // one row; the last column is padded
        // to its width, which is trimmed away.
        let mut lines: Vec<String> = grid.lines().map(|l| l.trim_end().to_owned()).collect();
        let head = match look {
            Look::Plain => Vec::new(),
            Look::Styled => lines.drain(..2.min(lines.len())).collect(),
        };
        Rendered { head, rows: lines }
    }
}

/// The output blocks of a run (SPEC §7.2): `  stdout:` then the text
/// indented four spaces, then the same for stderr; empty streams are
/// skipped.
pub(crate) fn output_blocks(run: &LoopRun) -> Vec<String> {
    stream_blocks(run.stdout.as_deref(), run.stderr.as_deref())
}

/// The output blocks of any record with a stdout and a stderr, such as a
/// workflow step run.
pub(crate) fn stream_blocks(stdout: Option<&str>, stderr: Option<&str>) -> Vec<String> {
    let mut lines = Vec::new();
    for (label, text) in [("stdout", stdout), ("stderr", stderr)] {
        let Some(text) = text.filter(|t| !t.is_empty()) else {
            continue;
        };
        lines.push(format!("  {label}:"));
        let shown = cut(text);
        for line in shown.trim_end().split('\n') {
            // A CRLF line ending is a line ending; any other control
            // character but a tab is escaped.
            let line = line.strip_suffix('\r').unwrap_or(line);
            lines.push(format!("    {}", escape_controls(line, &['\t'])));
        }
    }
    lines
}

/// The text cut at 32768 characters, with `\n[truncated <n> chars]` when
/// something was cut.
fn cut(text: &str) -> String {
    match text.char_indices().nth(BLOCK_MAX_CHARS) {
        None => text.to_owned(),
        Some((end, _)) => {
            let rest = text[end..].chars().count();
            format!("{}\n[truncated {rest} chars]", &text[..end])
        }
    }
}

/// `word` as one `sh` word: as it is when it holds only characters the
/// shell takes literally, else in single quotes. For commands loops prints
/// for the user to run (`sqlite3 <db> VACUUM`, `launchctl bootstrap`).
pub(crate) fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:@".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `bytes` for people: `812 B`, `48.0 KiB`, `1.2 MiB`.
pub(crate) fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    // Tenths of the unit, in integers: exact enough, and no float casts.
    let mut unit = 0;
    let mut scaled = bytes;
    while scaled >= 1024 * 1024 && unit + 1 < UNITS.len() {
        scaled /= 1024;
        unit += 1;
    }
    let tenths = (scaled * 10 + 512) / 1024;
    format!("{}.{} {}", tenths / 10, tenths % 10, UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(vec![
            Column {
                header: "ID",
                plain_prefix: "",
            },
            Column {
                header: "NEXT",
                plain_prefix: "next=",
            },
            Column {
                header: "NAME",
                plain_prefix: "",
            },
        ]);
        t.row(vec!["a".into(), "-".into(), "first".into()]);
        t.row(vec!["bbb".into(), "2026".into(), "second".into()]);
        t
    }

    #[test]
    fn plain_tables_align_without_decoration() {
        let r = table().render(Look::Plain);
        assert!(r.head.is_empty());
        assert_eq!(r.rows, ["a    next=-     first", "bbb  next=2026  second"]);
    }

    #[test]
    fn styled_tables_have_a_header_and_a_rule() {
        let r = table().render(Look::Styled);
        assert_eq!(r.head[0], "ID   NEXT  NAME");
        assert!(r.head[1].starts_with('─'), "{:?}", r.head);
        assert_eq!(r.rows, ["a    -     first", "bbb  2026  second"]);
    }

    #[test]
    fn control_characters_are_escaped() {
        assert!(matches!(
            escape_controls("plain é\ttext", &['\t']),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\u{1b}[2Jb\rc\u{7f}\u{9b}d\ne\tf", &['\n']),
            "a\\u{1b}[2Jb\\rc\\u{7f}\\u{9b}d\ne\\tf"
        );
        let mut t = Table::new(vec![Column {
            header: "NAME",
            plain_prefix: "",
        }]);
        t.row(vec!["two\nlines\u{1b}]0;x\u{7}".into()]);
        assert_eq!(t.render(Look::Plain).rows, ["two\\nlines\\u{1b}]0;x\\u{7}"]);
        assert_eq!(
            stream_blocks(Some("ok\r\n\u{1b}[31mred\tx\r\n"), None),
            ["  stdout:", "    ok", "    \\u{1b}[31mred\tx"]
        );
    }

    #[test]
    fn long_output_is_cut_with_a_marker() {
        let text = "x".repeat(BLOCK_MAX_CHARS + 5);
        let shown = cut(&text);
        assert!(shown.ends_with("\n[truncated 5 chars]"));
        assert_eq!(cut("short"), "short");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(49_152), "48.0 KiB");
        assert_eq!(bytes(1_258_291), "1.2 MiB");
        assert_eq!(bytes(5 * 1024 * 1024 * 1024), "5.0 GiB");
    }

    #[test]
    fn paths_are_quoted_for_the_shell_when_needed() {
        assert_eq!(shell_word("/home/a/loops.db"), "/home/a/loops.db");
        assert_eq!(
            shell_word("/tmp/my dir/it's.db"),
            "'/tmp/my dir/it'\\''s.db'"
        );
    }
}
