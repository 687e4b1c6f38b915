//! Turning targets into processes (SPEC §5). The full executor lands with
//! the executor issue; this crate already owns the production liveness probe.
//!
//! Architecture invariant: this is the only crate that spawns or signals
//! processes.
