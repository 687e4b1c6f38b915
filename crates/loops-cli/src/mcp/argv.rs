//! A tool's command line, built value by value: `loops --json <words>
//! <options> -- <positionals>`, where every option value is written
//! `--flag=value` and every positional follows `--`, so no value a client
//! sends can become a flag, whatever it starts with.

use anyhow::Result;

use crate::app::Captured;
use crate::context::Context;

/// A command line under construction: `loops --json <words> <options> --
/// <positionals>`.
pub(super) struct Argv {
    words: Vec<String>,
    options: Vec<String>,
    positionals: Vec<String>,
}

impl Argv {
    pub(super) fn new(words: &[&str]) -> Argv {
        Argv {
            words: words.iter().map(|w| (*w).to_owned()).collect(),
            options: Vec::new(),
            positionals: Vec::new(),
        }
    }

    /// `--flag=value` when given.
    pub(super) fn opt(&mut self, flag: &str, value: Option<&str>) -> &mut Argv {
        if let Some(value) = value {
            self.options.push(format!("--{flag}={value}"));
        }
        self
    }

    /// `--flag` when on.
    pub(super) fn flag(&mut self, flag: &str, on: bool) -> &mut Argv {
        if on {
            self.options.push(format!("--{flag}"));
        }
        self
    }

    /// `--flag=value` for each value.
    pub(super) fn each<'a>(
        &mut self,
        flag: &str,
        values: impl IntoIterator<Item = &'a str>,
    ) -> &mut Argv {
        for value in values {
            self.opt(flag, Some(value));
        }
        self
    }

    pub(super) fn positional(&mut self, value: &str) -> &mut Argv {
        self.positionals.push(value.to_owned());
        self
    }

    /// The command line.
    pub(super) fn argv(&mut self) -> Vec<String> {
        let mut argv = vec!["loops".to_owned(), "--json".to_owned()];
        argv.append(&mut self.words);
        argv.append(&mut self.options);
        if !self.positionals.is_empty() {
            argv.push("--".to_owned());
            argv.append(&mut self.positionals);
        }
        argv
    }

    /// Runs the command line, keeping what it prints.
    pub(super) fn run(&mut self, ctx: &Context) -> Result<Captured> {
        Ok(crate::app::run_captured(ctx, self.argv()))
    }
}
