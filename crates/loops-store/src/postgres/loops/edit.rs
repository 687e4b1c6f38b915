//! The loop writes and reads of `postgres/loops.rs` that carry a loop's
//! settings and policies (issue 16's edit, issue 17's label filter).

use std::ops::ControlFlow;

use loops_core::{Loop, LoopStatus};

use super::{big, encode, loop_returning};
use crate::error::{Result, StoreError};
use crate::loops::{DEFAULT_LOOP_LIMIT, LoopFilter, LoopUpdate, PolicyColumns};
use crate::postgres::Postgres;
use crate::postgres::rows::{self, Json, ts, ts_opt};
use crate::sqlite::rows::loop_columns;

pub(super) fn update_loop(pg: &Postgres, update: &LoopUpdate<'_>) -> Result<Loop> {
    let s = update.settings;
    let (reschedule, next) = match update.reschedule {
        Some(next) => (true, next),
        None => (false, None),
    };
    let schedule = encode(&s.schedule, "loop schedule")?;
    let target = encode(&s.target, "loop target")?;
    let p = PolicyColumns::of(&s.policy)?;
    // Both callers (`Store::edit_loop`, `Store::replace_workflow`) hold
    // the loop's row lock in their transaction already.
    pg.write_tx(|c| {
        let lp = loop_returning(
            c,
            concat!(
                "UPDATE loops SET name = $3, description = $4, schedule_json = $5,
                   target_json = $6, catch_up = $7, catch_up_limit = $8, overlap = $9,
                   max_attempts = $10, retry_delay_ms = $11, lease_ms = $12, expires_at = $13,
                   next_run_at = CASE WHEN $14 THEN $15 ELSE next_run_at END,
                   retry_scheduled_for = CASE WHEN $14 THEN NULL ELSE retry_scheduled_for END,
                   updated_at = $16, labels = $17::text::json, expires_after_runs = $18,
                   pause_after_failures = $19, backoff = $20, max_retry_delay_ms = $21,
                   skip_exit_codes = $22::text::json, on_failure = $23, on_success = $24,
                   hook_show_output = $25
                 WHERE id = $1 AND status = $2 RETURNING ",
                loop_columns!()
            ),
            &[
                &update.id.as_str(),
                &update.status.as_str(),
                &s.name,
                &s.description,
                &Json(&schedule),
                &Json(&target),
                &s.catch_up.as_str(),
                &i64::from(s.catch_up_limit),
                &s.overlap.as_str(),
                &i64::from(s.max_attempts),
                &big(s.retry_delay_ms, "retryDelayMs")?,
                &big(s.lease_ms, "leaseMs")?,
                &ts_opt(s.expires_at),
                &reschedule,
                &ts_opt(next),
                &ts(update.now),
                &p.labels,
                &p.expires_after_runs,
                &p.pause_after_failures,
                &p.backoff,
                &p.max_retry_delay_ms,
                &p.skip_exit_codes,
                &s.hooks.on_failure,
                &s.hooks.on_success,
                &i64::from(s.hooks.hook_show_output),
            ],
            "editing a loop",
        )?
        // The row is locked since the read, so the guard matches.
        .ok_or_else(|| StoreError::Vanished {
            kind: "loop",
            op: "edit",
            id: update.id.to_string(),
        })?;
        c.notify(update.id.as_str())?;
        Ok(lp)
    })
}

pub(super) fn for_each_labeled_loop(
    pg: &Postgres,
    filter: &LoopFilter,
    labels: &str,
    each: &mut dyn FnMut(Loop) -> ControlFlow<()>,
) -> Result<()> {
    let limit = i64::from(filter.limit.unwrap_or(DEFAULT_LOOP_LIMIT));
    let status = filter.status.map(LoopStatus::as_str);
    pg.with(|c| {
        c.query_each(
            concat!(
                "SELECT ",
                loop_columns!(),
                " FROM loops WHERE ($1::text IS NULL OR status = $1)
                   AND labels::jsonb @> $3::text::jsonb
                 ORDER BY status, next_run_at NULLS FIRST, id LIMIT $2"
            ),
            &[&status, &limit, &labels],
            ("loops", "listing loops"),
            rows::loop_row,
            &mut *each,
        )
    })
}
