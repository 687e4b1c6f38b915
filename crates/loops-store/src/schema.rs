//! The schema version both backends' migrations reach: `migrations/sqlite/`
//! and `migrations/postgres/` share their version numbers, and an export
//! document records the version it was written at.

/// The newest schema version this binary knows: the highest embedded
/// migration. Bump it with every new migration; a unit test checks that it
/// matches `migrations/` and the lists in `migrations.rs`.
///
/// A database already at this version is opened with one read of it and
/// nothing else.
pub const SCHEMA_VERSION: i64 = 15;

/// The newest schema version this binary knows ([`SCHEMA_VERSION`]).
pub fn schema_version() -> i64 {
    SCHEMA_VERSION
}
