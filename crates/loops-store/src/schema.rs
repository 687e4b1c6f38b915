//! The schema version both backends' migrations reach: `migrations/sqlite/`
//! and `migrations/postgres/` share their version numbers, and an export
//! document records the version it was written at.

/// The newest schema version this binary knows: the highest embedded
/// migration. Bump it with every new migration; a unit test checks that it
/// matches `migrations/`.
///
/// It is a constant so that a database already at this version is opened
/// without building refinery's runner, which compiles a regex for every
/// migration name (`docs/perf.md#process-start`).
pub const SCHEMA_VERSION: i64 = 15;

/// The newest schema version this binary knows ([`SCHEMA_VERSION`]).
pub fn schema_version() -> i64 {
    SCHEMA_VERSION
}
