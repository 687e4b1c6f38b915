//! Reliability: races (to be written).
