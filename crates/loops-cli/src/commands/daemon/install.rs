//! `daemon install [--enable]` and `daemon uninstall [--disable]` (SPEC
//! §7.6): the daemon as a systemd user unit or a launchd agent, through
//! `service::install`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::daemon_paths;
use crate::context::Context;
use crate::exit::Outcome;
use crate::render::Printer;
use crate::request::{Document, Request, Warnings};
use crate::service::install::{self, EnableResult, Installed, Platform, ServiceSpec, Uninstalled};

/// The password file `daemon install` writes in the data directory.
const PASSFILE: &str = "pgpass";

/// `--platform`, or the platform this runs on.
pub(super) fn platform(flag: Option<&str>) -> Result<Platform> {
    match flag {
        Some(name) => Platform::parse(name)
            .with_context(|| format!("--platform must be linux or macos, not {name}")),
        None => Platform::current().with_context(|| {
            format!(
                "startup install is not implemented for {}",
                std::env::consts::OS
            )
        }),
    }
}

fn home() -> Result<PathBuf> {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home)),
        None => bail!("HOME is not set; the service file goes under $HOME"),
    }
}

/// How an instruction run by `--enable` or `--disable` went.
fn enable_line(command: &str, status: i32) -> String {
    if status == 0 {
        format!("{command} -> ok")
    } else {
        format!("{command} -> exit {status}")
    }
}

/// Failure when an instruction that was run failed.
fn outcome_of<'a>(ran: impl IntoIterator<Item = &'a EnableResult>) -> Outcome {
    if ran.into_iter().any(|r| r.status != 0) {
        Outcome::Failure
    } else {
        Outcome::Success
    }
}

/// The typed request of `daemon install`: the service manager, the
/// `daemon run` command line the service runs (its tuning checked), and
/// whether to load it now.
pub(super) struct DaemonInstall {
    pub(super) platform: Platform,
    pub(super) command_line: Vec<String>,
    /// `--grace`: the daemon's grace period on stop.
    pub(super) grace: Duration,
    /// `--enable`.
    pub(super) enable: bool,
}

/// What `daemon install` returns: the file written, and with `--enable`
/// what each instruction did.
pub(super) struct ServiceInstalled {
    installed: Installed,
    /// The password file the URL's password was moved to.
    passfile: Option<PathBuf>,
    enabled: Option<Vec<EnableResult>>,
}

impl Request for DaemonInstall {
    type Document = ServiceInstalled;

    fn run(self, ctx: &Context, _: &mut Warnings) -> Result<ServiceInstalled> {
        let home = home()?;
        let paths = daemon_paths(ctx)?;
        let exe = std::env::current_exe().context("locating the loops executable")?;
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let spec = ServiceSpec {
            exe: exe.canonicalize().unwrap_or(exe),
            args: self.command_line,
            path_env: loops_exec::normalize_path(&env),
            data_dir: paths.data_dir.clone(),
            log_file: paths.log_file(),
            grace: self.grace,
            database_url: None,
        };
        // Checked before it is written into the service, and any password
        // moved into a password file of the data directory (issue 32).
        let (database_url, passfile) = match ctx.database_url_with_text()? {
            Some((text, _)) => service_url(&text, &paths.data_dir)?,
            None => (None, None),
        };
        let spec = ServiceSpec {
            database_url,
            ..spec
        };
        let installed = install::install_startup(self.platform, &home, &spec)
            .with_context(|| format!("writing the service file under {}", home.display()))?;
        let enabled = self
            .enable
            .then(|| install::enable_startup(&installed.instructions));
        Ok(ServiceInstalled {
            installed,
            passfile,
            enabled,
        })
    }
}

/// The URL the service carries: `text` itself, or, when it holds a
/// password, `text` without it and naming the password file `pgpass` of
/// `data_dir` (mode 0600), written here; then also that file's path.
fn service_url(text: &str, data_dir: &Path) -> Result<(Option<String>, Option<PathBuf>)> {
    let path = data_dir.join(PASSFILE);
    let Some(moved) = loops_store::move_password(text, &path)? else {
        return Ok((Some(text.to_owned()), None));
    };
    std::fs::create_dir_all(data_dir)
        .and_then(|()| moved.write_to(&path))
        .with_context(|| format!("writing the password file {}", path.display()))?;
    Ok((Some(moved.url), Some(path)))
}

impl Document for ServiceInstalled {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let mut value = serde_json::to_value(&self.installed)?;
        if let (Some(passfile), Value::Object(map)) = (&self.passfile, &mut value) {
            map.insert("passfile".to_owned(), json!(passfile.display().to_string()));
        }
        if let (Some(results), Value::Object(map)) = (&self.enabled, &mut value) {
            map.insert("enableResults".to_owned(), serde_json::to_value(results)?);
        }
        Ok(out.json(&value)?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        out.line(&format!("wrote {}", self.installed.path))?;
        if let Some(passfile) = &self.passfile {
            out.line(&format!(
                "note: the database password is in {} (mode 0600); the service file names it \
                 with passfile= and holds no password",
                passfile.display()
            ))?;
        }
        for instruction in &self.installed.instructions {
            out.line(&format!("  {instruction}"))?;
        }
        for result in self.enabled.iter().flatten() {
            out.line(&enable_line(&result.command, result.status))?;
        }
        Ok(())
    }

    fn outcome(&self) -> Outcome {
        outcome_of(self.enabled.iter().flatten())
    }
}

/// The typed request of `daemon uninstall`: the service manager, and
/// whether to unload the service first.
pub(super) struct DaemonUninstall {
    pub(super) platform: Platform,
    /// `--disable`.
    pub(super) disable: bool,
}

/// What `daemon uninstall` returns: the removal, the instructions left to
/// run (none with `--disable`), and those `--disable` ran.
pub(super) struct ServiceRemoved {
    removed: Uninstalled,
    instructions: Vec<String>,
    disable: bool,
    ran: Vec<EnableResult>,
}

impl Request for DaemonUninstall {
    type Document = ServiceRemoved;

    fn run(self, _: &Context, _: &mut Warnings) -> Result<ServiceRemoved> {
        let platform = self.platform;
        let home = home()?;
        let mut ran = Vec::new();
        let present = install::service_path(platform, &home).exists();
        if self.disable && present {
            ran.extend(install::enable_startup(&install::unload_instructions(
                platform, &home,
            )));
        }
        let removed = install::uninstall_startup(platform, &home)
            .with_context(|| format!("removing the service file under {}", home.display()))?;
        if self.disable && removed.removed {
            ran.extend(install::enable_startup(&removed.instructions));
        }
        let instructions = if self.disable {
            Vec::new()
        } else {
            unload_then(platform, &home, &removed.instructions)
        };
        Ok(ServiceRemoved {
            removed,
            instructions,
            disable: self.disable,
            ran,
        })
    }
}

impl Document for ServiceRemoved {
    fn json(&self, out: &mut Printer) -> Result<()> {
        let mut value = serde_json::to_value(&self.removed)?;
        if let Value::Object(map) = &mut value {
            map.insert("instructions".to_owned(), json!(self.instructions));
            if self.disable {
                map.insert(
                    "disableResults".to_owned(),
                    serde_json::to_value(&self.ran)?,
                );
            }
        }
        Ok(out.json(&value)?)
    }

    fn human(&self, _: &Context, out: &mut Printer) -> Result<()> {
        let removed = &self.removed;
        if removed.removed {
            out.line(&format!("removed {}", removed.path))?;
        } else {
            out.line(&format!("nothing to remove at {}", removed.path))?;
        }
        if removed.removed && !self.instructions.is_empty() {
            out.line("if the service is still loaded, unload it:")?;
            for instruction in &self.instructions {
                out.line(&format!("  {instruction}"))?;
            }
        }
        for result in &self.ran {
            out.line(&enable_line(&result.command, result.status))?;
        }
        Ok(())
    }

    fn outcome(&self) -> Outcome {
        outcome_of(&self.ran)
    }
}

fn unload_then(platform: Platform, home: &Path, after: &[String]) -> Vec<String> {
    let mut all = install::unload_instructions(platform, home);
    all.extend(after.iter().cloned());
    all
}
