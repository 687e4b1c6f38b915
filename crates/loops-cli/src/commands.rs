//! The commands, one module per group: `create`, loop management
//! (`manage`: list, show, pause, resume, stop, remove), `next`, `runs`, the
//! reports over runs (`health`, `cost`), and the runners (`execute`:
//! run-now, tick), `workflows`, `daemon`, `doctor`, `backup`, `gc`,
//! `transfer` (export, import), and `docs` (completions, man pages).

pub(crate) mod backup;
pub(crate) mod cost;
pub(crate) mod create;
pub(crate) mod daemon;
pub(crate) mod docs;
pub(crate) mod doctor;
pub(crate) mod edit;
pub(crate) mod execute;
pub(crate) mod gc;
pub(crate) mod health;
pub(crate) mod labels;
pub(crate) mod logs;
pub(crate) mod manage;
pub(crate) mod next;
pub(crate) mod runs;
pub(crate) mod transfer;
pub(crate) mod workflows;

use loops_core::{Clock, Timestamp};
use loops_exec::SystemClock;

/// The current instant, from the system clock.
fn now() -> Timestamp {
    SystemClock.now()
}
