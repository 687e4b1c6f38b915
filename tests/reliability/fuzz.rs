//! Reliability: fuzz (to be written).
