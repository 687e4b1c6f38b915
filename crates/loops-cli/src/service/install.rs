//! `daemon install` and `daemon uninstall` (SPEC §7.6): a systemd user unit
//! on Linux, a launchd agent on macOS.
//!
//! SPEC §9 item 37: the original joins `ExecStart` with spaces and no
//! quoting, writes plist values without XML escaping, and leaves
//! `LOOPS_DATA_DIR` out, so a daemon started by the service manager may
//! schedule a different database than the one the user installed it for.
//! Here every `ExecStart` argument follows systemd's quoting rules, every
//! plist string is escaped, and both files carry `LOOPS_DATA_DIR` and the
//! normalized PATH. Stopping the service lets runs finish within the
//! daemon's grace period: the unit sends SIGTERM to the daemon alone
//! (`KillMode=mixed`) and both files allow the grace period plus a margin
//! before the service manager kills anything.
//!
//! Also departing from 0.3.1: the unit has no `After=default.target`, which
//! together with `WantedBy=default.target` is an ordering cycle that
//! systemd breaks by dropping a job; and on macOS the agent is loaded with
//! `launchctl enable` and `bootstrap gui/<uid>` (unloaded with `bootout`),
//! not the legacy `launchctl load -w` / `unload -w`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use loops_core::{CommandTarget, ExecutorStatus, ProcessTarget};
use loops_exec::{ExecOptions, RunContext, RunMetadata, execute_target};
use serde::Serialize;

/// The launchd label.
const LABEL: &str = "com.hasna.loops.daemon";
/// The systemd unit name.
const UNIT: &str = "loops-daemon.service";
/// What the service manager waits beyond the grace period before SIGKILL.
const STOP_MARGIN: Duration = Duration::from_secs(15);

/// A service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Platform {
    /// systemd user units.
    Linux,
    /// launchd agents.
    Macos,
}

impl Platform {
    /// Every platform, as `--platform` names them (shell completion offers
    /// them).
    pub(crate) const ALL: &'static [Platform] = &[Platform::Linux, Platform::Macos];

    /// This machine's, if loops can install there.
    pub(crate) fn current() -> Option<Platform> {
        match std::env::consts::OS {
            "linux" => Some(Platform::Linux),
            "macos" => Some(Platform::Macos),
            _ => None,
        }
    }

    /// `linux` or `macos` (`darwin` is accepted too).
    pub(crate) fn parse(name: &str) -> Option<Platform> {
        match name {
            "darwin" => Some(Platform::Macos),
            _ => Platform::ALL.iter().copied().find(|p| p.name() == name),
        }
    }

    /// The `--platform` spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Platform::Linux => "linux",
            Platform::Macos => "macos",
        }
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the service runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServiceSpec {
    /// The `loops` executable.
    pub(crate) exe: PathBuf,
    /// Its arguments (`daemon run`).
    pub(crate) args: Vec<String>,
    /// The PATH the daemon runs with, already normalized.
    pub(crate) path_env: String,
    /// The data directory, carried as `LOOPS_DATA_DIR`.
    pub(crate) data_dir: PathBuf,
    /// The log file (launchd's stdout and stderr).
    pub(crate) log_file: PathBuf,
    /// The daemon's grace period on stop.
    pub(crate) grace: Duration,
    /// The PostgreSQL database, carried as `LOOPS_DATABASE_URL`; it may
    /// hold a password, so the file is then written 0600 on every
    /// platform.
    pub(crate) database_url: Option<String>,
}

/// Where the service file of `platform` lives under `home`.
pub(crate) fn service_path(platform: Platform, home: &Path) -> PathBuf {
    match platform {
        Platform::Linux => home.join(".config/systemd/user").join(UNIT),
        Platform::Macos => home
            .join("Library/LaunchAgents")
            .join(format!("{LABEL}.plist")),
    }
}

/// The systemd user unit for `spec`.
pub(crate) fn systemd_unit(spec: &ServiceSpec) -> String {
    let exec: Vec<String> = std::iter::once(spec.exe.display().to_string())
        .chain(spec.args.iter().cloned())
        .map(|a| systemd_exec_arg(&a))
        .collect();
    let stop_secs = (spec.grace + STOP_MARGIN).as_secs();
    format!(
        "[Unit]\n\
         Description=Hasna OpenLoops daemon\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Restart=always\n\
         RestartSec=5\n\
         Environment={}\n\
         Environment={}\n\
         {}\
         KillMode=mixed\n\
         TimeoutStopSec={stop_secs}\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        exec.join(" "),
        systemd_env("PATH", &spec.path_env),
        systemd_env("LOOPS_DATA_DIR", &spec.data_dir.display().to_string()),
        spec.database_url
            .as_deref()
            .map_or_else(String::new, |url| format!(
                "Environment={}\n",
                systemd_env("LOOPS_DATABASE_URL", url)
            )),
    )
}

/// One `ExecStart` argument: `%` and `$` doubled (specifiers and variable
/// expansion), and double-quoted with `\` escapes when it holds
/// whitespace, quotes, backslashes, `;` or control characters, or is
/// empty.
fn systemd_exec_arg(arg: &str) -> String {
    let escaped = arg.replace('%', "%%").replace('$', "$$");
    let needs_quotes = escaped.is_empty()
        || escaped
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\' | ';'));
    if needs_quotes {
        quote_c(&escaped)
    } else {
        escaped
    }
}

/// `"NAME=value"`, quoted for `Environment=`: no `$` expansion happens
/// there, but `%` specifiers and C escapes do.
fn systemd_env(name: &str, value: &str) -> String {
    quote_c(&format!("{name}={}", value.replace('%', "%%")))
}

fn quote_c(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The launchd agent for `spec`.
pub(crate) fn launchd_plist(spec: &ServiceSpec) -> String {
    let string = |s: &str| format!("<string>{}</string>", xml_escape(s));
    let mut program = String::new();
    for arg in std::iter::once(spec.exe.display().to_string()).chain(spec.args.iter().cloned()) {
        program.push_str(&format!("    {}\n", string(&arg)));
    }
    let log = spec.log_file.display().to_string();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n\
         \x20 {label}\n\
         \x20 <key>ProgramArguments</key>\n\
         \x20 <array>\n\
         {program}\
         \x20 </array>\n\
         \x20 <key>RunAtLoad</key>\n\
         \x20 <true/>\n\
         \x20 <key>KeepAlive</key>\n\
         \x20 <true/>\n\
         \x20 <key>ExitTimeOut</key>\n\
         \x20 <integer>{exit}</integer>\n\
         \x20 <key>EnvironmentVariables</key>\n\
         \x20 <dict>\n\
         \x20   <key>PATH</key>\n\
         \x20   {path}\n\
         \x20   <key>LOOPS_DATA_DIR</key>\n\
         \x20   {data}\n\
         {database}\
         \x20 </dict>\n\
         \x20 <key>StandardOutPath</key>\n\
         \x20 {log}\n\
         \x20 <key>StandardErrorPath</key>\n\
         \x20 {log}\n\
         </dict>\n\
         </plist>\n",
        label = string(LABEL),
        exit = (spec.grace + STOP_MARGIN).as_secs(),
        path = string(&spec.path_env),
        data = string(&spec.data_dir.display().to_string()),
        database = spec
            .database_url
            .as_deref()
            .map_or_else(String::new, |url| format!(
                "\x20   <key>LOOPS_DATABASE_URL</key>\n\x20   {}\n",
                string(url)
            )),
        log = string(&log),
    )
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// What [`install_startup`] wrote (SPEC §7.6: `{platform, path,
/// instructions}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Installed {
    /// The service manager.
    pub(crate) platform: Platform,
    /// The file written.
    pub(crate) path: String,
    /// The commands that load it.
    pub(crate) instructions: Vec<String>,
}

/// Writes the service file of `platform` under `home` (SPEC §7.6 `daemon
/// install`). The plist is written with mode 0600.
pub(crate) fn install_startup(
    platform: Platform,
    home: &Path,
    spec: &ServiceSpec,
) -> std::io::Result<Installed> {
    let path = service_path(platform, home);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let (text, mode) = match platform {
        Platform::Linux if spec.database_url.is_some() => (systemd_unit(spec), 0o600),
        Platform::Linux => (systemd_unit(spec), 0o644),
        Platform::Macos => (launchd_plist(spec), 0o600),
    };
    write_with_mode(&path, &text, mode)?;
    let instructions = match platform {
        Platform::Linux => vec![
            "systemctl --user daemon-reload".to_owned(),
            format!("systemctl --user enable --now {UNIT}"),
            "loginctl enable-linger $USER".to_owned(),
        ],
        Platform::Macos => launchctl_load(gui_uid(home), &path),
    };
    Ok(Installed {
        platform,
        path: path.display().to_string(),
        instructions,
    })
}

pub(crate) fn write_with_mode(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(mode)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    // Through the descriptor: the mode goes to the file written, whatever
    // is at `path` by now.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// What [`uninstall_startup`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Uninstalled {
    /// The service manager.
    pub(crate) platform: Platform,
    /// The service file.
    pub(crate) path: String,
    /// Whether a file was removed.
    pub(crate) removed: bool,
    /// The commands to run after the removal.
    pub(crate) instructions: Vec<String>,
}

/// The commands that stop and unload an installed service; they need its
/// file, so they come before [`uninstall_startup`].
pub(crate) fn unload_instructions(platform: Platform, home: &Path) -> Vec<String> {
    match platform {
        Platform::Linux => vec![format!("systemctl --user disable --now {UNIT}")],
        Platform::Macos => launchctl_unload(gui_uid(home)),
    }
}

/// The user whose launchd GUI domain an agent under `home` belongs to: the
/// owner of `home`. `None` when it cannot be read; the commands then ask
/// the shell (`$(id -u)`).
fn gui_uid(home: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(home).ok().map(|m| m.uid())
}

/// The launchd domain of user `uid`, as `launchctl` names it.
fn gui_domain(uid: Option<u32>) -> String {
    match uid {
        Some(uid) => format!("gui/{uid}"),
        None => "gui/$(id -u)".to_owned(),
    }
}

/// The commands that load the agent at `plist`: what the legacy
/// `launchctl load -w` did, in the `launchctl` of macOS 10.10 and later.
/// `enable` clears a disabled override (the `-w`), then `bootstrap` loads
/// the agent into the user's GUI domain and starts it.
fn launchctl_load(uid: Option<u32>, plist: &Path) -> Vec<String> {
    let domain = gui_domain(uid);
    vec![
        format!("launchctl enable {domain}/{LABEL}"),
        format!(
            "launchctl bootstrap {domain} {}",
            crate::render::shell_word(&plist.display().to_string())
        ),
    ]
}

/// The command that stops and unloads the agent: `launchctl bootout`,
/// by label, so it works whether or not the plist is still there.
fn launchctl_unload(uid: Option<u32>) -> Vec<String> {
    vec![format!("launchctl bootout {}/{LABEL}", gui_domain(uid))]
}

/// Removes the service file of `platform` under `home`; the instructions
/// returned are the ones to run after the removal.
pub(crate) fn uninstall_startup(platform: Platform, home: &Path) -> std::io::Result<Uninstalled> {
    let path = service_path(platform, home);
    let removed = match std::fs::remove_file(&path) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(e),
    };
    let instructions = match platform {
        Platform::Linux => vec!["systemctl --user daemon-reload".to_owned()],
        Platform::Macos => Vec::new(),
    };
    Ok(Uninstalled {
        platform,
        path: path.display().to_string(),
        removed,
        instructions,
    })
}

/// One instruction run by `--enable` (SPEC §7.6: `{command, status,
/// stdout, stderr}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct EnableResult {
    /// The command line.
    pub(crate) command: String,
    /// Its exit status; -1 when it could not run.
    pub(crate) status: i32,
    /// Its stdout.
    pub(crate) stdout: String,
    /// Its stderr.
    pub(crate) stderr: String,
}

/// Runs each instruction through `sh -c`, except `loginctl` (which needs a
/// human decision), and records what each did (SPEC §7.6 `--enable`).
pub(crate) fn enable_startup(instructions: &[String]) -> Vec<EnableResult> {
    instructions
        .iter()
        .filter(|i| !i.starts_with("loginctl "))
        .map(|command| run_shell(command))
        .collect()
}

fn run_shell(command: &str) -> EnableResult {
    let mut target = CommandTarget::new(command);
    target.shell = Some(true);
    target.timeout_ms = Some(60_000);
    let outcome = execute_target(
        &ProcessTarget::Command(target),
        &RunMetadata::default(),
        &ExecOptions::default(),
        &RunContext::default(),
        &mut |_| {},
    );
    match outcome {
        Ok(r) => EnableResult {
            command: command.to_owned(),
            status: match r.status {
                ExecutorStatus::Succeeded => 0,
                _ => r.exit_code.unwrap_or(-1),
            },
            stdout: r.stdout,
            stderr: if r.stderr.is_empty() {
                r.error.unwrap_or_default()
            } else {
                r.stderr
            },
        },
        Err(e) => EnableResult {
            command: command.to_owned(),
            status: -1,
            stdout: String::new(),
            stderr: e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_arguments_follow_systemd_quoting() {
        let cases = [
            ("/usr/bin/loops", "/usr/bin/loops"),
            ("run", "run"),
            ("/opt/my loops/bin", "\"/opt/my loops/bin\""),
            ("100%", "100%%"),
            ("$HOME", "$$HOME"),
            ("a\"b", "\"a\\\"b\""),
            ("back\\slash", "\"back\\\\slash\""),
            ("", "\"\""),
        ];
        for (arg, want) in cases {
            assert_eq!(systemd_exec_arg(arg), want, "{arg:?}");
        }
        assert_eq!(
            systemd_env("LOOPS_DATA_DIR", "/d/50% \"x\""),
            "\"LOOPS_DATA_DIR=/d/50%% \\\"x\\\"\""
        );
    }

    fn spec() -> ServiceSpec {
        ServiceSpec {
            exe: PathBuf::from("/usr/local/bin/loops-daemon"),
            args: vec!["run".to_owned()],
            path_env: "/usr/bin:/bin".to_owned(),
            data_dir: PathBuf::from("/home/u/.hasna/loops"),
            log_file: PathBuf::from("/home/u/.hasna/loops/daemon.log"),
            grace: Duration::from_secs(30),
            database_url: None,
        }
    }

    #[test]
    fn a_database_url_is_carried_into_the_service_and_the_unit_is_private() {
        let spec = ServiceSpec {
            database_url: Some("postgresql://u:pw@h/loops".to_owned()),
            ..spec()
        };
        let unit = systemd_unit(&spec);
        assert!(
            unit.contains("Environment=\"LOOPS_DATABASE_URL=postgresql://u:pw@h/loops\"\n"),
            "{unit}"
        );
        let plist = launchd_plist(&spec);
        assert!(
            plist.contains(
                "<key>LOOPS_DATABASE_URL</key>\n    <string>postgresql://u:pw@h/loops</string>"
            ),
            "{plist}"
        );
        assert!(!systemd_unit(&super::tests::spec()).contains("LOOPS_DATABASE_URL"));
        let home = tempfile::tempdir().unwrap();
        let installed = install_startup(Platform::Linux, home.path(), &spec).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&installed.path).unwrap().permissions(),
        ) & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn the_unit_starts_with_the_user_session_without_an_ordering_cycle() {
        let unit = systemd_unit(&spec());
        // `After=default.target` with `WantedBy=default.target` is an
        // ordering cycle: systemd drops a job to break it.
        assert!(!unit.contains("After="), "{unit}");
        assert!(
            unit.ends_with("[Install]\nWantedBy=default.target\n"),
            "{unit}"
        );
        // SPEC §10 item 100, with `loops-daemon install`'s command line.
        for line in [
            "Description=Hasna OpenLoops daemon\n",
            "\nExecStart=/usr/local/bin/loops-daemon run\n",
            "\nRestart=always\n",
            "\nRestartSec=5\n",
            "\nEnvironment=\"PATH=/usr/bin:/bin\"\n",
        ] {
            assert!(unit.contains(line), "{line:?} in {unit}");
        }
    }

    #[test]
    fn launchctl_commands_use_the_users_gui_domain() {
        let plist = Path::new("/Users/u/Library/LaunchAgents/com.hasna.loops.daemon.plist");
        assert_eq!(
            launchctl_load(Some(501), plist),
            [
                "launchctl enable gui/501/com.hasna.loops.daemon",
                "launchctl bootstrap gui/501 /Users/u/Library/LaunchAgents/com.hasna.loops.daemon.plist",
            ]
        );
        assert_eq!(
            launchctl_unload(Some(501)),
            ["launchctl bootout gui/501/com.hasna.loops.daemon"]
        );
        // Without a uid, the shell that runs the command supplies it.
        assert_eq!(
            launchctl_load(None, Path::new("/Users/my agents/x.plist"))[1],
            "launchctl bootstrap gui/$(id -u) '/Users/my agents/x.plist'"
        );
        assert_eq!(
            launchctl_unload(None),
            ["launchctl bootout gui/$(id -u)/com.hasna.loops.daemon"]
        );
    }

    #[test]
    fn installing_on_macos_bootstraps_into_the_home_owners_domain() {
        use std::os::unix::fs::MetadataExt;
        let home = tempfile::tempdir().unwrap();
        let uid = std::fs::metadata(home.path()).unwrap().uid();
        let installed = install_startup(Platform::Macos, home.path(), &spec()).unwrap();
        assert_eq!(
            installed.instructions,
            [
                format!("launchctl enable gui/{uid}/{LABEL}"),
                format!("launchctl bootstrap gui/{uid} {}", installed.path),
            ]
        );
        assert!(installed.instructions.iter().all(|i| !i.contains(" load ")));
        assert_eq!(
            unload_instructions(Platform::Macos, home.path()),
            [format!("launchctl bootout gui/{uid}/{LABEL}")]
        );
    }

    #[test]
    fn plist_strings_are_escaped() {
        assert_eq!(xml_escape("a<b>&'\""), "a&lt;b&gt;&amp;&apos;&quot;");
    }
}
