//! Duration grammar (SPEC §2.1). STUB: to be implemented.

/// A duration string that does not parse, or is zero where zero is not allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// `invalid duration: <input>`.
    #[error("invalid duration: {input}")]
    Invalid {
        /// The rejected input.
        input: String,
    },
}

/// Parses `^(\d+(\.\d+)?)(ms|s|m|h|d)?$` into milliseconds.
pub fn parse_duration(input: &str) -> Result<u64, DurationError> {
    Err(DurationError::Invalid { input: input.to_owned() })
}

/// Like [`parse_duration`], but zero is rejected with `<what> must be greater than zero`.
pub fn parse_positive_duration(input: &str, what: &str) -> Result<u64, DurationError> {
    let _ = what;
    parse_duration(input)
}
