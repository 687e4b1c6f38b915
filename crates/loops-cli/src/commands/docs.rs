//! `loops completions <shell>` and `loops man --dir <dir>` (issue 16 §7):
//! shell completions and man pages, generated from the same clap
//! definitions the parser uses, so they cannot drift from it. The
//! completion script is the dynamic one of `complete.rs` (issue 28), or
//! clap's static one with `--static`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::{Cli, CompletionsArgs, ManArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{self, Document, Request, Warnings};

/// `completions`: the script on stdout.
pub(crate) fn completions(
    ctx: &Context,
    args: &CompletionsArgs,
    out: &mut Printer,
) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Completions {
            shell: args.shell,
            static_script: args.static_script,
        })
    })
}

/// The typed request of `completions`: the script for one shell, the
/// dynamic registration (`complete.rs`) or clap's static script.
struct Completions {
    shell: Shell,
    static_script: bool,
}

/// What `completions` returns: the script, printed as it is in either
/// format.
struct Script(String);

impl Request for Completions {
    type Document = Script;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<Script> {
        let buf = if self.static_script {
            let mut buf = Vec::new();
            clap_complete::generate(self.shell, &mut Cli::command(), "loops", &mut buf);
            buf
        } else {
            crate::complete::registration(self.shell).context("writing the completion script")?
        };
        let script = String::from_utf8(buf).context("the completion script is not UTF-8")?;
        Ok(Script(script))
    }
}

impl Document for Script {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.line(self.0.trim_end_matches('\n'))?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        self.json(out)
    }
}

/// `man`: `loops.1` and one page per subcommand (`loops-create-command.1`)
/// in `--dir`, which is created if missing.
pub(crate) fn man(ctx: &Context, args: &ManArgs, out: &mut Printer) -> Result<Outcome> {
    request::serve(ctx, out, |_| {
        Ok(Man {
            dir: PathBuf::from(&args.dir),
        })
    })
}

/// The typed request of `man`: the directory to write the pages into.
struct Man {
    dir: PathBuf,
}

/// What `man` returns: the directory, and the pages written in it.
struct ManPages {
    dir: PathBuf,
    pages: Vec<String>,
}

impl Request for Man {
    type Document = ManPages;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<ManPages> {
        let dir = self.dir;
        if dir.exists() && !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut command = Cli::command().disable_help_subcommand(true);
        command.build();
        let mut pages = Vec::new();
        write_pages(command, &dir, &mut pages)?;
        Ok(ManPages { dir, pages })
    }
}

impl Document for ManPages {
    fn json(&self, out: &mut Printer) -> Result<()> {
        Ok(out.json(&serde_json::json!({ "dir": self.dir, "pages": self.pages }))?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        Ok(out.line(&format!(
            "wrote {} man pages to {}",
            self.pages.len(),
            self.dir.display()
        ))?)
    }
}

/// Writes the page of `command` (named by its path, such as
/// `loops-create-command.1`) and of each visible subcommand under it.
fn write_pages(command: clap::Command, dir: &Path, written: &mut Vec<String>) -> Result<()> {
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir, written)?;
    }
    let man = clap_mangen::Man::new(command);
    let file = man.get_filename();
    let mut text = Vec::new();
    man.render(&mut text)
        .with_context(|| format!("rendering {file}"))?;
    let path = dir.join(&file);
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&text))
        .with_context(|| format!("writing {}", path.display()))?;
    written.push(file);
    Ok(())
}
