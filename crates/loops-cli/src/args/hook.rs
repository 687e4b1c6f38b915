//! The hook flags of `create` and `edit` (issue 17): `--on-failure`,
//! `--on-success` and `--hook-show-output` (`resolve::hooks` checks them).

use clap::Args;

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
}
