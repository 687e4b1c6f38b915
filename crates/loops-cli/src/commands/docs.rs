//! `loops completions <shell>` and `loops man --dir <dir>` (issue 16 §7):
//! shell completions and man pages, generated from the same clap
//! definitions the parser uses, so they cannot drift from it.

use std::io::Write;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;

/// `completions`: the script on stdout.
pub(crate) fn completions(
    _ctx: &Context,
    args: &CompletionsArgs,
    out: &mut Printer,
) -> Result<Outcome> {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "loops", &mut buf);
    let script = String::from_utf8(buf).context("the completion script is not UTF-8")?;
    out.line(script.trim_end_matches('\n'))?;
    Ok(Outcome::Success)
}

/// `man`: `loops.1` and one page per subcommand (`loops-create-command.1`)
/// in `--dir`, which is created if missing.
pub(crate) fn man(_ctx: &Context, args: &ManArgs, out: &mut Printer) -> Result<Outcome> {
    let dir = Path::new(&args.dir);
    if dir.exists() && !dir.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut command = Cli::command().disable_help_subcommand(true);
    command.build();
    let mut written = Vec::new();
    write_pages(command, dir, &mut written)?;
    if out.json {
        out.json(&serde_json::json!({ "dir": dir, "pages": written }))?;
    } else {
        out.line(&format!(
            "wrote {} man pages to {}",
            written.len(),
            dir.display()
        ))?;
    }
    Ok(Outcome::Success)
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
