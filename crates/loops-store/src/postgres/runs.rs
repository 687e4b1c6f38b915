//! The PostgreSQL side of [`crate::runs`]: the operations are written
//! once in `runs/ops.rs` and `runs/release.rs`; what PostgreSQL adds to
//! them ([`RunHost`](crate::runs::ops::RunHost)) is in `outcome.rs`: a
//! write whose COMMIT was cut off by a lost connection is resolved by
//! re-reading what it wrote, and only this host's runs have processes the
//! liveness probe can judge. Claims, takeovers and recovery live in
//! `runs/`.

mod claim;
mod outcome;
mod takeover;
