//! Reliability: secrets (to be written).
