//! `loops ui` (issue 29): a live terminal dashboard of every loop, drawn
//! with ratatui on crossterm.
//!
//! The main screen is a table of loops (name and labels, status in colour,
//! schedule, next run, last run, a sparkline of the last 20 runs, runs in
//! flight) under a header about the daemon. `Enter` opens a loop's status
//! card (the same text `loops status` prints), and `Enter` there follows
//! its latest run's output live; `p` pauses, `r` resumes,
//! `n` runs now and `c` cancels its running runs, each after a
//! confirmation; `e` edits its flags in `$EDITOR` (`edit.rs`); `/` filters by name or label; `f` cycles the
//! status filter; `?` shows the keys; `q` or `Esc` goes back or quits.
//!
//! What it shows comes from the same store and the same requests as the
//! commands: a pause is `loops pause`'s request. It reads the store again
//! when the store changed (`crate::watch`: the SQLite files, PostgreSQL's
//! `LISTEN`), after each key, and on a slow fallback.
//!
//! The terminal is restored on quit, on a panic (ratatui's hook) and on
//! SIGTERM or SIGHUP; Ctrl-C is a key in raw mode and quits too.

mod draw;
mod edit;
pub(crate) mod model;

use std::time::Duration;

use anyhow::Result;
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::crossterm;

use crate::context::Context;
use crate::exit::Outcome;
use model::{Board, Pending, View};

/// How long one wait for a key lasts, so a signal is seen promptly.
const KEY_WAIT: Duration = Duration::from_millis(100);

/// `loops ui`: runs the dashboard until `q`, Ctrl-C or a signal.
pub(crate) fn run(ctx: &Context) -> Result<Outcome> {
    // Nothing may write to the terminal the screen is drawn on: the hints
    // and notes the requests give are left out.
    let ctx = &ctx.quieted();
    // Fails before the terminal changes when the store cannot be opened.
    let mut board = Board::load(ctx)?;
    let mut watch = crate::watch::Watch::new(&ctx.open_store()?, "ui");
    let signals = loops_exec::SignalCancel::install()?;
    let mut terminal = ratatui::init();
    let result = serve(ctx, &mut board, &mut watch, &mut terminal, signals.token());
    ratatui::restore();
    result.map(|()| Outcome::Success)
}

fn serve(
    ctx: &Context,
    board: &mut Board,
    watch: &mut crate::watch::Watch,
    terminal: &mut ratatui::DefaultTerminal,
    stop: &loops_exec::CancelToken,
) -> Result<()> {
    loop {
        if stop.is_cancelled() {
            return Ok(());
        }
        if watch.due() {
            board.reload(ctx);
        }
        // A run's log grows without a commit: a followed run is read at
        // each turn.
        if board.following() {
            board.follow(ctx);
        }
        terminal.draw(|frame| draw::draw(frame, board))?;
        if !event::poll(KEY_WAIT)? {
            continue;
        }
        match event::read()? {
            Event::Key(key) if key.kind == KeyEventKind::Press => {
                match handle(ctx, board, key) {
                    Step::Quit => return Ok(()),
                    Step::Edit => edit::edit(ctx, board, terminal),
                    Step::Stay => {}
                }
                watch.poke();
            }
            // A resize is drawn at once, at the new size.
            _ => {}
        }
    }
}

/// What a key asks of the loop.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Stay,
    Quit,
    /// `e`: the selected loop's flags in the editor, which needs the
    /// terminal.
    Edit,
}

/// Carries out one key press.
fn handle(ctx: &Context, board: &mut Board, key: KeyEvent) -> Step {
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Step::Quit;
    }
    // A confirmation takes y (or Enter) and anything else says no.
    if let Some(pending) = board.pending.take() {
        if matches!(key.code, KeyCode::Char('y') | KeyCode::Enter) {
            board.apply(ctx, &pending);
        } else {
            board.message = Some(format!("{} cancelled", pending.verb()));
        }
        return Step::Stay;
    }
    if board.typing {
        match key.code {
            KeyCode::Enter | KeyCode::Esc => board.typing = false,
            KeyCode::Backspace => {
                board.filter.pop();
            }
            KeyCode::Char(c) => board.filter.push(c),
            _ => {}
        }
        board.clamp();
        return Step::Stay;
    }
    match (&board.view, key.code) {
        (View::Table, KeyCode::Char('q') | KeyCode::Esc) => return Step::Quit,
        (View::Output { .. }, KeyCode::Char('q') | KeyCode::Esc) => board.open(ctx),
        (View::Loop { .. }, KeyCode::Enter) => board.open_output(ctx),
        (_, KeyCode::Char('q') | KeyCode::Esc) => board.view = View::Table,
        (View::Table, KeyCode::Down | KeyCode::Char('j')) => board.move_by(1),
        (View::Table, KeyCode::Up | KeyCode::Char('k')) => board.move_by(-1),
        (View::Table, KeyCode::Enter) => board.open(ctx),
        (View::Table, KeyCode::Char('/')) => {
            board.typing = true;
            board.filter.clear();
        }
        (View::Table, KeyCode::Char('f')) => board.cycle_status(),
        (View::Table | View::Loop { .. }, KeyCode::Char('p')) => board.ask(Pending::Pause),
        (View::Table | View::Loop { .. }, KeyCode::Char('r')) => board.ask(Pending::Resume),
        (View::Table | View::Loop { .. }, KeyCode::Char('n')) => board.ask(Pending::RunNow),
        (View::Table | View::Loop { .. }, KeyCode::Char('c')) => board.ask(Pending::Cancel),
        (View::Table | View::Loop { .. }, KeyCode::Char('e')) => return Step::Edit,
        (View::Loop { .. }, KeyCode::Down | KeyCode::Char('j')) => board.scroll(1),
        (View::Loop { .. }, KeyCode::Up | KeyCode::Char('k')) => board.scroll(-1),
        (_, KeyCode::Char('?')) => board.view = View::Help,
        _ => {}
    }
    Step::Stay
}
