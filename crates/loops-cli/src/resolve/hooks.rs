//! The hook flags of `create` and `edit` (issue 17) resolved into
//! [`Hooks`], or for `edit` into a [`HooksChange`] to apply to the stored
//! ones: `--on-failure`, `--on-success` and `--hook-show-output`.

use anyhow::{Result, bail};
use loops_core::Hooks;

use crate::args::hook::{EditHookOptions, HookOptions};

/// The hooks `create` stores.
pub(crate) fn hooks(opts: &HookOptions) -> Result<Hooks> {
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

/// The hook flags `edit` was given, resolved: each field is `None` when
/// its flags are not given, and the stored value then stays.
#[derive(Debug, Default)]
pub(crate) struct HooksChange {
    /// `--on-failure`: `Some(None)` (from `''`) removes the hook.
    on_failure: Option<Option<String>>,
    /// `--on-success`, as `on_failure`.
    on_success: Option<Option<String>>,
    /// `--hook-show-output` or `--no-hook-show-output`.
    hook_show_output: Option<bool>,
}

/// Resolves the hook flags `edit` was given.
pub(crate) fn change(opts: &EditHookOptions) -> Result<HooksChange> {
    let command_of = |value: &Option<String>, flag| -> Result<Option<Option<String>>> {
        match value.as_deref() {
            None => Ok(None),
            Some("") => Ok(Some(None)),
            Some(v) => Ok(Some(Some(command(v, flag)?))),
        }
    };
    Ok(HooksChange {
        on_failure: command_of(&opts.on_failure, "--on-failure")?,
        on_success: command_of(&opts.on_success, "--on-success")?,
        // `--no-hook-show-output` wins, as it was applied last.
        hook_show_output: if opts.no_hook_show_output {
            Some(false)
        } else {
            opts.hook_show_output.then_some(true)
        },
    })
}

impl HooksChange {
    /// Applies the hook flags given to `hooks`.
    pub(crate) fn apply(self, hooks: &mut Hooks) {
        if let Some(command) = self.on_failure {
            hooks.on_failure = command;
        }
        if let Some(command) = self.on_success {
            hooks.on_success = command;
        }
        if let Some(show) = self.hook_show_output {
            hooks.hook_show_output = show;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_changes_only_the_hooks_given() {
        let stored = || Hooks {
            on_failure: Some("notify".into()),
            on_success: Some("log".into()),
            hook_show_output: true,
        };
        let mut hooks = stored();
        change(&EditHookOptions::default())
            .unwrap()
            .apply(&mut hooks);
        assert_eq!(hooks, stored());
        let opts = EditHookOptions {
            on_failure: Some(String::new()),
            on_success: Some("page".into()),
            no_hook_show_output: true,
            ..Default::default()
        };
        change(&opts).unwrap().apply(&mut hooks);
        assert_eq!(hooks.on_failure, None);
        assert_eq!(hooks.on_success.as_deref(), Some("page"));
        assert!(!hooks.hook_show_output);
        let blank = EditHookOptions {
            on_success: Some(" ".into()),
            ..Default::default()
        };
        assert!(change(&blank).is_err());
    }
}
