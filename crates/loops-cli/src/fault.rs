//! What kind of error a request met, for the HTTP status `loops serve`
//! answers with: the message stays the command line's, the kind says whose
//! fault it was. Its own module, since `app` (which sees the error) and
//! `serve` (which answers) both use it.

use loops_store::{OpenError, StoreError};

/// The kinds of error a route can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Nothing has that id or name (404).
    NotFound,
    /// The input is not valid (400).
    BadInput,
    /// The request conflicts with what is stored: a name several loops
    /// share, a workflow name in use (409).
    Conflict,
    /// The store or the machine failed (500).
    Internal,
}

impl Fault {
    /// The kind of `err`, from the store's error in its chain; an error
    /// with none is the request's input, found wrong before the store.
    pub(crate) fn of(err: &anyhow::Error) -> Fault {
        for cause in err.chain() {
            if let Some(store) = cause.downcast_ref::<StoreError>() {
                return match store {
                    StoreError::NotFound { .. } | StoreError::StepNotFound { .. } => {
                        Fault::NotFound
                    }
                    StoreError::AmbiguousName { .. }
                    | StoreError::DuplicateWorkflowName { .. }
                    | StoreError::StepNotClaimable { .. }
                    | StoreError::StepsAlive { .. }
                    | StoreError::InvalidTransition { .. } => Fault::Conflict,
                    StoreError::Invalid(_) | StoreError::Schedule(_) => Fault::BadInput,
                    _ => Fault::Internal,
                };
            }
            if cause.is::<OpenError>() || cause.is::<std::io::Error>() {
                return Fault::Internal;
            }
        }
        Fault::BadInput
    }

    /// The HTTP status and the `code` of the error document.
    pub(crate) fn status(self) -> (u16, &'static str) {
        match self {
            Fault::NotFound => (404, "not_found"),
            Fault::BadInput => (400, "bad_request"),
            Fault::Conflict => (409, "conflict"),
            Fault::Internal => (500, "internal"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_decides_the_kind() {
        let missing = anyhow::Error::from(StoreError::NotFound {
            kind: "loop",
            key: "x".into(),
        })
        .context("pausing");
        assert_eq!(Fault::of(&missing), Fault::NotFound);
        let io = anyhow::Error::from(std::io::Error::other("disk"));
        assert_eq!(Fault::of(&io), Fault::Internal);
        assert_eq!(Fault::of(&anyhow::anyhow!("bad --limit")), Fault::BadInput);
    }
}
