//! Reliability: trees (to be written).
