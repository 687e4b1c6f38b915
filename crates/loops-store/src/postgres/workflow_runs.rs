//! The PostgreSQL side of [`crate::workflow_runs`]: the operations are
//! written once in [`crate::workflow_runs::ops`], and the run operations
//! close linked workflow runs with its helpers on their own connection.

pub(crate) use crate::workflow_runs::ops::{
    LinkedClose, close_linked_workflow_runs, fail_linked_workflow_runs,
};
