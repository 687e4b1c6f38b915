//! SQLite's encoding of an instant: the TEXT (`…T…Z`, to the
//! millisecond) that its statements compare and sort. The column lists
//! and row mappers are written once for both dialects in
//! [`crate::columns`]; the test here checks them against SQLite's
//! migrated schema.

use loops_core::Timestamp;

/// An instant as the TEXT SQL compares.
pub(crate) fn ts(t: Timestamp) -> String {
    t.to_string()
}

#[cfg(test)]
mod tests {
    use crate::columns::*;

    #[test]
    fn every_column_list_selects_from_the_migrated_schema() {
        let conn = crate::sqlite::open::open_memory().unwrap();
        for (table, sql, names) in [
            ("loops", loop_columns!(), LOOP_COLUMNS),
            ("loop_runs", run_columns!(), RUN_COLUMNS),
            ("workflow_specs", workflow_columns!(), WORKFLOW_COLUMNS),
            (
                "workflow_runs",
                workflow_run_columns!(),
                WORKFLOW_RUN_COLUMNS,
            ),
            ("workflow_step_runs", step_run_columns!(), STEP_RUN_COLUMNS),
            ("workflow_events", event_columns!(), EVENT_COLUMNS),
            ("daemon_lease", lease_columns!(), LEASE_COLUMNS),
        ] {
            let stmt = conn
                .prepare(&format!("SELECT {sql} FROM {table}"))
                .unwrap_or_else(|e| panic!("{table}: {e}"));
            assert_eq!(stmt.column_names().collect::<Vec<_>>(), names, "{table}");
        }
    }
}
