//! Workflow runs, the scheduler tick and the daemon loop. They land with the
//! scheduler and workflow issues; the crate builds so the workspace shape is
//! in place.
