//! The hook flags of `create` and `edit` (issue 17), and their resolution:
//! `--on-failure`, `--on-success` and `--hook-show-output`.

use anyhow::{Result, bail};
use clap::Args;
use loops_core::Hooks;

// The hooks of `create command|agent|workflow` (a doc comment would
// become the help text of the commands that flatten it).
#[derive(Debug, Default, Args)]
pub(crate) struct HookOptions {
    /// Shell command run after a run's final failure or timeout (once its
    /// attempts are used up), with the run's JSON on stdin [default: none;
    /// `daemon run --on-failure` for the daemon's runs].
    #[arg(
        long,
        value_name = "COMMAND",
        allow_hyphen_values = true,
        help_heading = "Hooks"
    )]
    pub(crate) on_failure: Option<String>,

    /// Shell command run after a successful run, with the run's JSON on
    /// stdin [default: none].
    #[arg(
        long,
        value_name = "COMMAND",
        allow_hyphen_values = true,
        help_heading = "Hooks"
    )]
    pub(crate) on_success: Option<String>,

    /// Give hooks the run's stdout and stderr unredacted [default: their
    /// lengths only].
    #[arg(long, help_heading = "Hooks")]
    pub(crate) hook_show_output: bool,
}

// The hooks of `edit`: what is not given stays as stored.
#[derive(Debug, Default, Args)]
pub(crate) struct EditHookOptions {
    /// Shell command run after a final failure; '' removes it [default: as
    /// stored].
    #[arg(
        long,
        value_name = "COMMAND",
        allow_hyphen_values = true,
        help_heading = "Hooks"
    )]
    pub(crate) on_failure: Option<String>,

    /// Shell command run after a success; '' removes it [default: as
    /// stored].
    #[arg(
        long,
        value_name = "COMMAND",
        allow_hyphen_values = true,
        help_heading = "Hooks"
    )]
    pub(crate) on_success: Option<String>,

    /// Give hooks the run's output unredacted.
    #[arg(long, help_heading = "Hooks")]
    pub(crate) hook_show_output: bool,

    /// Give hooks the output's lengths only again.
    #[arg(long, conflicts_with = "hook_show_output", help_heading = "Hooks")]
    pub(crate) no_hook_show_output: bool,
}

impl EditHookOptions {
    /// Whether any hook flag is given.
    pub(crate) fn given(&self) -> bool {
        self.on_failure.is_some()
            || self.on_success.is_some()
            || self.hook_show_output
            || self.no_hook_show_output
    }

    /// Applies the given flags to `hooks`.
    pub(crate) fn apply(&self, hooks: &mut Hooks) -> Result<()> {
        for (value, flag, slot) in [
            (&self.on_failure, "--on-failure", &mut hooks.on_failure),
            (&self.on_success, "--on-success", &mut hooks.on_success),
        ] {
            if let Some(v) = value {
                *slot = if v.is_empty() {
                    None
                } else {
                    Some(command(v, flag)?)
                };
            }
        }
        if self.hook_show_output {
            hooks.hook_show_output = true;
        }
        if self.no_hook_show_output {
            hooks.hook_show_output = false;
        }
        Ok(())
    }
}

/// The hooks `create` stores.
pub(crate) fn resolve(opts: &HookOptions) -> Result<Hooks> {
    let command_of = |value: &Option<String>, flag| value.as_deref().map(|v| command(v, flag));
    Ok(Hooks {
        on_failure: command_of(&opts.on_failure, "--on-failure").transpose()?,
        on_success: command_of(&opts.on_success, "--on-success").transpose()?,
        hook_show_output: opts.hook_show_output,
    })
}

/// A hook's shell command: not blank, and without a NUL byte, which no
/// command line can carry.
pub(crate) fn command(value: &str, flag: &str) -> Result<String> {
    if value.trim().is_empty() {
        bail!("{flag} must be a shell command; leave the flag out for no hook");
    }
    if value.contains('\0') {
        bail!("{flag} must not contain a NUL character");
    }
    Ok(value.to_owned())
}
