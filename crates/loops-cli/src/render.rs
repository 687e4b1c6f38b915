//! Writing to stdout: pretty JSON, aligned tables and output blocks
//! (SPEC §7.2, §7.4).
//!
//! Every write returns its `io::Error`, so a closed pipe ends the command
//! quietly through `exit` instead of panicking as `println!` would.
//!
//! Tables are laid out in [`table`]: a header row and columns two spaces
//! apart, fitted to a terminal's width with a rule under the header, or
//! whole and without the rule when piped (issue 28); scripts read
//! `--json`, whose shapes do not change. Colour is separate from the
//! layout: statuses and overdue marks are coloured only when anstream's
//! rules say so (`NO_COLOR` off; `CLICOLOR_FORCE` on; else `CLICOLOR` and
//! whether stdout is a terminal), around each cell after the layout.
//!
//! `-q/--quiet` makes the printer write nothing on stdout, and
//! `Context::note` and `Context::hint` nothing on stderr but errors.
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
use std::io::{BufWriter, StdoutLock, Write};

use anstyle::{AnsiColor, Style};
use loops_core::LoopRun;
use serde_json::Value;

mod table;

pub(crate) use table::{Column, Layout, Table, fit_line};

/// Output text is cut at this many characters (SPEC §7.2).
const BLOCK_MAX_CHARS: usize = 32_768;

/// The printer's stdout buffer.
const BUFFER: usize = 64 * 1024;

/// Stdout, nowhere under `--quiet`, or memory (`loops mcp`, whose stdout
/// is the protocol's).
enum Sink {
    Stdout(StdoutLock<'static>),
    Nowhere,
    Memory(Vec<u8>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Stdout(out) => out.write(buf),
            Sink::Nowhere => Ok(buf.len()),
            Sink::Memory(out) => out.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::Nowhere | Sink::Memory(_) => Ok(()),
        }
    }
}

/// Where command output goes.
pub(crate) struct Printer {
    /// Buffered: stdout is line-buffered, and a pretty JSON list of a
    /// thousand loops would otherwise cost tens of thousands of writes. The
    /// buffer is flushed by [`Printer::flush`] and when the printer drops.
    out: BufWriter<Sink>,
    /// `--json` was given.
    pub(crate) json: bool,
    /// Tables are coloured.
    color: bool,
    /// Whether tables fit a terminal or print whole.
    layout: Layout,
}

impl Printer {
    /// Stdout, coloured by anstream's rules (`NO_COLOR`, `CLICOLOR`,
    /// `CLICOLOR_FORCE`, a terminal), or nowhere under `--quiet`.
    pub(crate) fn stdout(json: bool, quiet: bool) -> Printer {
        let out = std::io::stdout();
        let color = anstream::AutoStream::choice(&out) != anstream::ColorChoice::Never;
        let sink = if quiet {
            Sink::Nowhere
        } else {
            Sink::Stdout(out.lock())
        };
        Printer {
            out: BufWriter::with_capacity(BUFFER, sink),
            json,
            color,
            layout: Layout::of_stdout(),
        }
    }

    /// A printer that keeps what a command prints, for [`Printer::text`]:
    /// the MCP server's tools print exactly what the command line prints,
    /// without colour, whatever `--quiet` says.
    pub(crate) fn memory(json: bool) -> Printer {
        Printer {
            out: BufWriter::with_capacity(BUFFER, Sink::Memory(Vec::new())),
            json,
            color: false,
            layout: Layout::Piped,
        }
    }

    /// What a [`Printer::memory`] printer kept (lossy for invalid UTF-8,
    /// which only run output can hold and which JSON has escaped).
    pub(crate) fn text(self) -> std::io::Result<String> {
        match self.out.into_inner().map_err(|e| e.into_error())? {
            Sink::Memory(bytes) => Ok(String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())),
            Sink::Stdout(_) | Sink::Nowhere => Ok(String::new()),
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

    /// A line cut to the terminal's width with `…`, whole when piped
    /// (`daemon logs`), its control characters escaped as [`Printer::line`]
    /// escapes them.
    pub(crate) fn fitted_line(&mut self, text: &str) -> std::io::Result<()> {
        let text = escape_controls(text, &['\t']);
        let text = table::fit_line(&text, self.layout);
        writeln!(self.out, "{text}")
    }

    /// `mark` in `style` (when colour is on), a space, then `text` cut to
    /// what is left of the terminal's width with `…` (whole when piped),
    /// its control characters escaped: a card's header line (`status`).
    pub(crate) fn marked_line(
        &mut self,
        mark: &str,
        style: Style,
        text: &str,
    ) -> std::io::Result<()> {
        let text = escape_controls(text, &[]);
        let used = unicode_width::UnicodeWidthStr::width(mark) + 1;
        let layout = match self.layout {
            Layout::Terminal(width) => Layout::Terminal(width.saturating_sub(used).max(1)),
            Layout::Piped => Layout::Piped,
        };
        let text = table::fit_line(&text, layout);
        writeln!(self.out, "{} {text}", paint(mark, style, self.color))
    }

    /// A table whose lines start `indent` columns in, fitted to what is
    /// left of the terminal's width: a card's list (`status`'s runs).
    pub(crate) fn indented_table(&mut self, table: &Table, indent: usize) -> std::io::Result<()> {
        let layout = match self.layout {
            Layout::Terminal(width) => Layout::Terminal(width.saturating_sub(indent).max(1)),
            Layout::Piped => Layout::Piped,
        };
        let rendered = table.render(layout, self.color);
        let pad = " ".repeat(indent);
        for line in rendered.head.iter().chain(&rendered.rows) {
            writeln!(self.out, "{pad}{line}")?;
        }
        Ok(())
    }

    /// Whether tables fit a terminal or print whole.
    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// Writes out everything printed so far; for progress that should show
    /// before a long wait.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    /// A table; `after(i)` gives lines to print after row `i` (output
    /// blocks), which do not take part in the alignment. An empty table
    /// prints nothing, not even its header.
    pub(crate) fn table(
        &mut self,
        table: &Table,
        after: impl Fn(usize) -> Vec<String>,
    ) -> std::io::Result<()> {
        let rendered = table.render(self.layout, self.color);
        // Cells were escaped when added, so the lines (with their colour
        // codes) are written as they are.
        for line in &rendered.head {
            writeln!(self.out, "{line}")?;
        }
        for (i, line) in rendered.rows.iter().enumerate() {
            writeln!(self.out, "{line}")?;
            for extra in after(i) {
                self.line(&extra)?;
            }
        }
        Ok(())
    }
}

/// Prints `<label>: <text>` on stderr (`Context::note` leaves it out under
/// `--quiet`). A closed stderr leaves nobody to tell, so write errors are
/// ignored (where `eprintln!` would panic).
pub(crate) fn note(label: &str, text: &str) {
    let text = escape_controls(text, &['\n', '\t']);
    let _ = writeln!(std::io::stderr().lock(), "{label}: {text}");
}

/// Prints a hint or an empty state on stderr (`Context::hint` decides
/// whether).
pub(crate) fn hint(text: &str) {
    let text = escape_controls(text, &['\n', '\t']);
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// The colour of a loop, run or step status: green for success, red for
/// failures, cyan for what runs, yellow for what waits or was skipped, dim
/// for what has ended otherwise.
pub(crate) fn status_style(status: &str) -> Style {
    let color = match status {
        "succeeded" | "ok" => AnsiColor::Green,
        "failed" | "timed_out" | "fail" => AnsiColor::Red,
        "running" | "active" => AnsiColor::Cyan,
        "paused" | "skipped" | "pending" | "warn" => AnsiColor::Yellow,
        "stopped" | "done" | "expired" | "abandoned" | "cancelled" => return Style::new().dimmed(),
        _ => return Style::new(),
    };
    Style::new().fg_color(Some(color.into()))
}

/// The style of an overdue mark.
pub(crate) fn overdue_style() -> Style {
    Style::new().fg_color(Some(AnsiColor::Red.into())).bold()
}

/// `text` in `style` when `color` is on.
pub(crate) fn paint(text: &str, style: Style, color: bool) -> String {
    if color && style != Style::new() {
        format!("{style}{text}{style:#}")
    } else {
        text.to_owned()
    }
}

/// `text` with every character a terminal would not show as itself (C0,
/// DEL, C1, bidi and zero-width characters; `loops_core::hides_on_terminal`)
/// not in `keep` written as its Rust escape: `\n`, `\r`, `\t`, `\u{1b}`,
/// `\u{9b}`, `\u{202e}`. Borrowed when there is nothing to escape, which is
/// almost always.
pub(crate) fn escape_controls<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    match loops_core::escape_for_terminal(text, keep) {
        Some(escaped) => Cow::Owned(escaped),
        None => Cow::Borrowed(text),
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

/// The last `n` lines of `text` (a CRLF ending is a line ending; trailing
/// blank lines are left out), as they are: a printer expands their tabs
/// ([`expand_tabs`]) and escapes the rest. For a failed run's stderr tail
/// and `status`'s output tail.
pub(crate) fn last_lines(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = text
        .trim_end_matches(['\n', '\r', ' ', '\t'])
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    if lines.len() == 1 && lines[0].is_empty() {
        return Vec::new();
    }
    let skip = lines.len().saturating_sub(n);
    lines[skip..].iter().map(|l| (*l).to_owned()).collect()
}

/// How many lines of a failed run's stderr its error shows.
pub(crate) const STDERR_TAIL_LINES: usize = 5;

/// The last lines of a failed run's stderr (issue 28), as stored, so
/// scrubbed of the run's secrets by the runner: nothing for a run that did
/// not fail or printed nothing on stderr.
pub(crate) fn stderr_tail(run: &LoopRun) -> Vec<String> {
    if run.error.is_none() || !run.status.is_retryable() {
        return Vec::new();
    }
    run.stderr
        .as_deref()
        .map(|text| last_lines(text, STDERR_TAIL_LINES))
        .unwrap_or_default()
}

/// `line` with each tab replaced by the spaces up to the next multiple of
/// 8 columns, so that its width can be counted to fit a terminal.
pub(crate) fn expand_tabs(line: &str) -> String {
    if !line.contains('\t') {
        return line.to_owned();
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut column = 0;
    for c in line.chars() {
        if c == '\t' {
            let spaces = 8 - column % 8;
            out.push_str(&" ".repeat(spaces));
            column += spaces;
        } else {
            out.push(c);
            column += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        }
    }
    out
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
        assert_eq!(
            stream_blocks(Some("ok\r\n\u{1b}[31mred\tx\r\n"), None),
            ["  stdout:", "    ok", "    \\u{1b}[31mred\tx"]
        );
    }

    #[test]
    fn last_lines_keep_the_end_with_tabs_expanded() {
        assert_eq!(last_lines("a\nb\r\nc\n\n", 2), ["b", "c"]);
        assert_eq!(last_lines("one", 5), ["one"]);
        assert!(last_lines("\n \n", 5).is_empty());
        assert_eq!(last_lines("ab\tc", 1), ["ab\tc"]);
        assert_eq!(expand_tabs("ab\tc\t"), "ab      c       ");
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
