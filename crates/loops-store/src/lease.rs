//! STUB: lease operations.
