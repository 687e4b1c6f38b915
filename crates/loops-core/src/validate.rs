//! Validation of user input (SPEC §6.1, §7.3). STUB: to be implemented.

use crate::model::{Account, NewLoop, NewWorkflow, ProcessTarget, Step, Target};

/// Input that does not validate; the message says what and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ValidationError {
    /// The message.
    pub message: String,
}

/// Validates a loop or workflow name.
pub fn validate_name(name: &str, label: &str) -> Result<(), ValidationError> {
    let _ = (name, label);
    Ok(())
}

/// Validates an account reference.
pub fn validate_account(account: &Account, label: &str) -> Result<(), ValidationError> {
    let _ = (account, label);
    Ok(())
}

/// Validates a command or agent target.
pub fn validate_process_target(target: &ProcessTarget, label: &str) -> Result<(), ValidationError> {
    let _ = (target, label);
    Ok(())
}

/// Validates a loop target.
pub fn validate_target(target: &Target, label: &str) -> Result<(), ValidationError> {
    let _ = (target, label);
    Ok(())
}

/// Validates loop creation input.
pub fn validate_new_loop(new: &NewLoop) -> Result<(), ValidationError> {
    let _ = new;
    Ok(())
}

/// Validates a workflow file body (SPEC §6.1).
pub fn workflow_from_json(value: &serde_json::Value, name_override: Option<&str>) -> Result<NewWorkflow, ValidationError> {
    let _ = (value, name_override);
    Err(ValidationError { message: "unimplemented".into() })
}

/// Execution order (SPEC §6.2).
pub fn workflow_execution_order(steps: &[Step]) -> Vec<&Step> {
    steps.iter().collect()
}
