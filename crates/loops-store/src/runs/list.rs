//! The listings of `loop_runs` (SPEC §4.3 `listRuns`): newest first, each
//! filter read down its own index in order, so the cost is the limit, not
//! the number of runs stored (issue 14; SQLite's plans are tested in
//! `sqlite/plans.rs`); a page further down (`offset`, issue 29) costs the
//! rows it skips too.
//!
//! The dialects tie-break rows created in the same millisecond differently
//! (SQLite by `rowid`, PostgreSQL by `id`), and SQLite binds the same four
//! parameters to every statement (a filter not given is `NULL` and its
//! test `?n IS NULL` is constant), so each filter has one statement per
//! dialect; [`list_statement`] picks it with its parameters.

use loops_core::{LoopId, RunStatus};

use crate::columns::run_columns;
use crate::runs::{DEFAULT_RUN_LIMIT, RunFilter};
use crate::sql::{Dialect, Value};

/// The newest runs of every loop: `idx_runs_created` (V5) gives them in
/// order, so the cost is the limit, not the number of runs stored.
pub(crate) const LIST_ALL_RUNS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE ?1 IS NULL AND ?2 IS NULL
     ORDER BY created_at DESC, rowid DESC LIMIT ?3 OFFSET ?4"
);

/// The newest runs of one loop: `idx_runs_loop` gives them in order.
pub(crate) const LIST_LOOP_RUNS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE loop_id = ?1 AND ?2 IS NULL
     ORDER BY created_at DESC, rowid DESC LIMIT ?3 OFFSET ?4"
);

/// The newest runs of one status: `idx_runs_status_created` (V6) gives
/// them in order.
pub(crate) const LIST_RUNS_BY_STATUS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE ?1 IS NULL AND status = ?2
     ORDER BY created_at DESC, rowid DESC LIMIT ?3 OFFSET ?4"
);

/// The newest runs of one status of one loop.
const LIST_LOOP_RUNS_BY_STATUS: &str = concat!(
    "SELECT ",
    run_columns!(),
    " FROM loop_runs WHERE loop_id = ?1 AND status = ?2
     ORDER BY created_at DESC, rowid DESC LIMIT ?3 OFFSET ?4"
);

/// The PostgreSQL statements, indexed by the filters given (1 for the
/// loop, plus 2 for the status): each binds only the filters it tests,
/// then the limit and the offset.
const PG_LISTS: [&str; 4] = [
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs ORDER BY created_at DESC, id DESC LIMIT ?1 OFFSET ?2"
    ),
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs WHERE loop_id = ?1
         ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3"
    ),
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs WHERE status = ?1
         ORDER BY created_at DESC, id DESC LIMIT ?2 OFFSET ?3"
    ),
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs WHERE loop_id = ?1 AND status = ?2
         ORDER BY created_at DESC, id DESC LIMIT ?3 OFFSET ?4"
    ),
];

/// The runs of loops that carry every wanted label (`?4`, a JSON array),
/// with the optional filters of [`RunFilter`]: SQLite compares the arrays
/// element by element, PostgreSQL with `jsonb` containment.
const LIST_LABELED_RUNS: [&str; 2] = [
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs
         WHERE loop_id IN (SELECT id FROM loops WHERE NOT EXISTS (SELECT 1 FROM json_each(?4) w
             WHERE NOT EXISTS (SELECT 1 FROM json_each(loops.labels) h WHERE h.value = w.value)))
           AND (?1 IS NULL OR loop_id = ?1) AND (?2 IS NULL OR status = ?2)
         ORDER BY created_at DESC, rowid DESC LIMIT ?3 OFFSET ?5"
    ),
    concat!(
        "SELECT ",
        run_columns!(),
        " FROM loop_runs
         WHERE loop_id IN (SELECT id FROM loops WHERE labels::jsonb @> ?4::text::jsonb)
           AND (?1::text IS NULL OR loop_id = ?1) AND (?2::text IS NULL OR status = ?2)
         ORDER BY created_at DESC, id DESC LIMIT ?3 OFFSET ?5"
    ),
];

/// The statement of [`RunFilter`] in `dialect` and its parameters.
pub(crate) fn list_statement(
    dialect: Dialect,
    filter: &RunFilter,
) -> (&'static str, Vec<Value<'_>>) {
    let loop_id = filter.loop_id.as_ref().map(LoopId::as_str);
    let status = filter.status.map(RunStatus::as_str);
    let limit = Value::from(filter.limit.unwrap_or(DEFAULT_RUN_LIMIT));
    let offset = Value::from(filter.offset.unwrap_or(0));
    match dialect {
        Dialect::Sqlite => {
            let sql = match (loop_id.is_some(), status.is_some()) {
                (false, false) => LIST_ALL_RUNS,
                (true, false) => LIST_LOOP_RUNS,
                (false, true) => LIST_RUNS_BY_STATUS,
                (true, true) => LIST_LOOP_RUNS_BY_STATUS,
            };
            (sql, vec![loop_id.into(), status.into(), limit, offset])
        }
        Dialect::Postgres => {
            let which = usize::from(loop_id.is_some()) + 2 * usize::from(status.is_some());
            let mut params: Vec<Value<'_>> = [loop_id, status]
                .into_iter()
                .flatten()
                .map(Value::from)
                .collect();
            params.extend([limit, offset]);
            (PG_LISTS[which], params)
        }
    }
}

/// The labeled listing of [`RunFilter`] in `dialect` and its parameters;
/// `labels` is the wanted labels as a JSON array.
pub(crate) fn labeled_statement<'a>(
    dialect: Dialect,
    filter: &'a RunFilter,
    labels: &'a str,
) -> (&'static str, [Value<'a>; 5]) {
    (
        dialect.pick(LIST_LABELED_RUNS[0], LIST_LABELED_RUNS[1]),
        [
            filter.loop_id.as_ref().map(LoopId::as_str).into(),
            filter.status.map(RunStatus::as_str).into(),
            filter.limit.unwrap_or(DEFAULT_RUN_LIMIT).into(),
            labels.into(),
            filter.offset.unwrap_or(0).into(),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The highest `?n` placeholder of `sql`.
    fn placeholders(sql: &str) -> usize {
        let mut highest = 0;
        let mut rest = sql;
        while let Some(at) = rest.find('?') {
            let digits: String = rest[at + 1..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            highest = highest.max(digits.parse().unwrap_or(0));
            rest = &rest[at + 1..];
        }
        highest
    }

    fn filters() -> Vec<RunFilter> {
        let loop_id = Some(LoopId::from_bytes([1, 2, 3, 4, 5, 6]));
        let status = Some(RunStatus::Failed);
        vec![
            RunFilter::default(),
            RunFilter {
                loop_id,
                ..RunFilter::default()
            },
            RunFilter {
                status,
                limit: Some(5),
                ..RunFilter::default()
            },
            RunFilter {
                loop_id,
                status,
                limit: None,
                offset: Some(40),
            },
        ]
    }

    #[test]
    fn each_statement_binds_as_many_values_as_it_names() {
        for filter in filters() {
            for dialect in [Dialect::Sqlite, Dialect::Postgres] {
                let (sql, params) = list_statement(dialect, &filter);
                assert_eq!(placeholders(sql), params.len(), "{dialect:?} {filter:?}");
                let (sql, params) = labeled_statement(dialect, &filter, "[\"a\"]");
                assert_eq!(placeholders(sql), params.len(), "{dialect:?} {filter:?}");
            }
        }
    }

    #[test]
    fn each_filter_reads_its_own_statement() {
        for dialect in [Dialect::Sqlite, Dialect::Postgres] {
            let sqls: Vec<&str> = filters()
                .iter()
                .map(|f| list_statement(dialect, f).0)
                .collect();
            for (i, a) in sqls.iter().enumerate() {
                assert!(!sqls[i + 1..].contains(a), "{dialect:?}: {a}");
            }
        }
        let none = RunFilter::default();
        let all = list_statement(Dialect::Sqlite, &none);
        assert_eq!(all.0, LIST_ALL_RUNS);
        assert_eq!(all.1[2], Value::Int(i64::from(DEFAULT_RUN_LIMIT)));
        let f = &filters()[2];
        let (sql, params) = list_statement(Dialect::Postgres, f);
        assert!(sql.contains("WHERE status = ?1"), "{sql}");
        assert_eq!(
            params,
            vec![Value::Text("failed"), Value::Int(5), Value::Int(0)]
        );
        let f = &filters()[1];
        assert_eq!(list_statement(Dialect::Sqlite, f).0, LIST_LOOP_RUNS);
        assert_eq!(
            list_statement(Dialect::Sqlite, &filters()[2]).0,
            LIST_RUNS_BY_STATUS
        );
    }
}
