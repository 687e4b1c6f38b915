//! Reliability: storage (to be written).
