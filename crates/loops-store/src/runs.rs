//! STUB: runs operations.
