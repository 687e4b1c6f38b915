//! Reliability: flood (to be written).
