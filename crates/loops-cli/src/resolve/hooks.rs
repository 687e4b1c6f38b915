//! The hook flags of `create` and `edit` (issue 17) resolved into
//! [`Hooks`]: `--on-failure`, `--on-success` and `--hook-show-output`.

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

/// Applies the hook flags `edit` was given to `hooks`.
pub(crate) fn apply(opts: &EditHookOptions, hooks: &mut Hooks) -> Result<()> {
    for (value, flag, slot) in [
        (&opts.on_failure, "--on-failure", &mut hooks.on_failure),
        (&opts.on_success, "--on-success", &mut hooks.on_success),
    ] {
        if let Some(v) = value {
            *slot = if v.is_empty() {
                None
            } else {
                Some(command(v, flag)?)
            };
        }
    }
    if opts.hook_show_output {
        hooks.hook_show_output = true;
    }
    if opts.no_hook_show_output {
        hooks.hook_show_output = false;
    }
    Ok(())
}
