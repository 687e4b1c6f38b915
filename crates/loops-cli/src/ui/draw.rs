//! Drawing `loops ui`'s screens: the header, the loops table with its
//! sparklines, a loop's card, the help, and the line at the bottom that
//! asks, says what a key did, or shows the filter being typed.
//!
//! Colour follows `NO_COLOR`, `CLICOLOR` and `CLICOLOR_FORCE`, as the
//! rest of the human output does; without it, the selection is reversed
//! video and statuses are words.

use loops_core::RunStatus;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, TableState};

use super::model::{Board, View};
use crate::render::escape_controls;

/// The keys, as `?` shows them.
const HELP: &[&str] = &[
    "loops ui: every loop, live",
    "",
    "  ↑ ↓ / j k   move",
    "  Enter       open the loop: its status card; there, follow its latest run",
    "  p           pause the loop (asks first)",
    "  r           resume the loop (asks first)",
    "  n           run the loop now, beside the dashboard (asks first)",
    "  c           cancel the loop's running runs (asks first)",
    "  e           edit the loop's flags in $EDITOR; saving applies what changed",
    "  /           filter by name or label (Enter keeps it, Esc ends typing)",
    "  f           cycle the status filter: all, active, paused, stopped",
    "  ?           this help",
    "  q, Esc      back, or quit",
];

/// The runs the sparkline shows on a narrow screen.
const NARROW_SPARK: usize = 10;

/// Draws the whole screen.
pub(super) fn draw(frame: &mut Frame<'_>, board: &Board) {
    let color = anstream::ColorChoice::global() != anstream::ColorChoice::Never
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(u16::try_from(board.header.len()).unwrap_or(1)),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let header: Vec<Line<'_>> = board.header.iter().map(|l| Line::raw(l.clone())).collect();
    frame.render_widget(Paragraph::new(header), top);
    match &board.view {
        View::Table => table(frame, board, body, color),
        View::Loop { lines, scroll, .. } => {
            let text: Vec<Line<'_>> = lines.iter().map(|l| Line::raw(l.clone())).collect();
            frame.render_widget(Paragraph::new(text).scroll((*scroll, 0)), body);
        }
        View::Output { title, lines, .. } => {
            // The newest lines, as `tail -f` shows them.
            let room = usize::from(body.height.saturating_sub(1));
            let from = lines.len().saturating_sub(room);
            let mut text = vec![Line::styled(
                title.clone(),
                Style::default().add_modifier(Modifier::BOLD),
            )];
            text.extend(lines[from..].iter().map(|l| Line::raw(l.clone())));
            frame.render_widget(Paragraph::new(text), body);
        }
        View::Help => {
            let text: Vec<Line<'_>> = HELP.iter().map(|l| Line::raw(*l)).collect();
            frame.render_widget(Paragraph::new(text), body);
        }
    }
    frame.render_widget(Paragraph::new(status_line(board)), bottom);
}

/// The bottom line: a question, the filter being typed, what the last key
/// did, or the keys.
fn status_line(board: &Board) -> String {
    if let Some(asked) = &board.pending {
        return format!(
            "{} {}? y to confirm, any other key to cancel",
            asked.verb(),
            escape_controls(&asked.name, &[])
        );
    }
    if board.typing {
        return format!("filter: {}▏", escape_controls(&board.filter, &[]));
    }
    if let Some(message) = &board.message {
        return escape_controls(message, &[]).into_owned();
    }
    let status = board
        .status_filter()
        .map_or_else(|| "all".to_owned(), |s| s.to_string());
    let filter = if board.filter.is_empty() {
        String::new()
    } else {
        format!(" · filter {}", escape_controls(&board.filter, &[]))
    };
    format!(
        "showing {status}{filter} · Enter open · p pause · r resume · n run · c cancel · / filter · f status · ? help · q quit"
    )
}

fn table(frame: &mut Frame<'_>, board: &Board, area: ratatui::layout::Rect, color: bool) {
    let shown = board.shown();
    if shown.is_empty() {
        let text = if board.rows.is_empty() {
            "no loops yet: create one with `loops create command <name> --every 1h --cmd '…'`"
        } else {
            "no loop matches the filters"
        };
        frame.render_widget(Paragraph::new(text), area);
        return;
    }
    // Below 100 columns the sparkline keeps the last 10 runs, for the text.
    let spark = if area.width < 100 {
        NARROW_SPARK
    } else {
        super::model::SPARK_RUNS as usize
    };
    let rows: Vec<Row<'_>> = shown
        .iter()
        .map(|row| {
            let mut name = escape_controls(&row.name, &[]).into_owned();
            if !row.labels.is_empty() {
                name.push_str(&format!(
                    " [{}]",
                    escape_controls(&row.labels.join(","), &[])
                ));
            }
            let status_style = if color {
                Style::default().fg(status_color(row.status))
            } else {
                Style::default()
            };
            Row::new(vec![
                Cell::from(name),
                Cell::from(Span::styled(row.status, status_style)),
                Cell::from(escape_controls(&row.schedule, &[]).into_owned()),
                Cell::from(row.next.clone()),
                Cell::from(escape_controls(&row.last, &[]).into_owned()),
                Cell::from(sparkline(
                    &row.spark[row.spark.len().saturating_sub(spark)..],
                    color,
                )),
                Cell::from(if row.running == 0 {
                    "-".to_owned()
                } else {
                    row.running.to_string()
                }),
            ])
        })
        .collect();
    let header = Row::new([
        "NAME",
        "STATUS",
        "SCHEDULE",
        "NEXT RUN",
        "LAST RUN",
        if spark == NARROW_SPARK {
            "LAST 10"
        } else {
            "LAST 20"
        },
        "RUNNING",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let widths = [
        Constraint::Fill(3),
        Constraint::Length(8),
        Constraint::Fill(2),
        Constraint::Fill(2),
        Constraint::Fill(2),
        Constraint::Length(u16::try_from(spark).unwrap_or(20)),
        Constraint::Length(7),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = TableState::default().with_selected(Some(board.selected));
    frame.render_stateful_widget(table, area, &mut state);
}

/// The last runs as one cell each: `▇` succeeded, `▁` failed, timed out or
/// abandoned, `·` skipped, `x` cancelled, `▶` running.
fn sparkline(runs: &[RunStatus], color: bool) -> Line<'static> {
    let spans: Vec<Span<'_>> = runs
        .iter()
        .map(|status| {
            let (mark, tint) = match status {
                RunStatus::Succeeded => ("▇", Color::Green),
                RunStatus::Running => ("▶", Color::Cyan),
                RunStatus::Skipped => ("·", Color::Yellow),
                RunStatus::Failed | RunStatus::TimedOut | RunStatus::Abandoned => ("▁", Color::Red),
                _ => ("x", Color::DarkGray),
            };
            let style = if color {
                Style::default().fg(tint)
            } else {
                Style::default()
            };
            Span::styled(mark, style)
        })
        .collect();
    Line::from(spans)
}

/// The colour of a loop's shown status, as `list` colours it.
fn status_color(status: &str) -> Color {
    match status {
        "active" => Color::Green,
        "paused" => Color::Yellow,
        "failing" => Color::Red,
        _ => Color::DarkGray,
    }
}
