//! Reliability: crash (to be written).
