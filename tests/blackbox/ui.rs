//! `loops ui` (issue 29), as a person uses it: in tmux, reading the screen
//! with `capture-pane` and typing with `send-keys`. It shows the loops,
//! filters them, pauses one after asking (the store changes), opens its
//! card, and gives the terminal back on quit. Without tmux the test skips,
//! saying so, unless `CI` is set (CI installs it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use loops_tests::{TestEnv, wait_for};

const DEADLINE: Duration = Duration::from_secs(30);

/// A tmux server of the test's own, on a socket in its temp dir, killed
/// when the test ends.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Starts a 100×30 session running `sh` in `env`'s environment, or
    /// `None` (saying why) without tmux.
    fn start(env: &TestEnv) -> Option<Tmux> {
        loops_tests::program_on_path("ui", "tmux")?;
        let tmux = Tmux {
            socket: env.home().join("tmux.sock"),
        };
        let base = env.cmd();
        let mut cmd = tmux.command();
        for (key, value) in base.get_envs() {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        cmd.env("TERM", "xterm-256color").env_remove("TMUX");
        let out = cmd
            .args([
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "100",
                "-y",
                "30",
                "sh",
            ])
            .output()
            .expect("tmux runs");
        assert!(out.status.success(), "{out:?}");
        Some(tmux)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self.command().args(args).output().expect("tmux runs");
        assert!(out.status.success(), "tmux {args:?}: {out:?}");
        out
    }

    /// Types `keys` (tmux key names) into the pane.
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend(keys);
        self.run(&args);
    }

    /// What the pane shows now.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    /// Waits until the screen shows `text`, and returns it.
    fn wait_for(&self, what: &str, text: &str) -> String {
        let started = std::time::Instant::now();
        wait_for(what, DEADLINE, || {
            let screen = self.screen();
            if started.elapsed() > DEADLINE - Duration::from_millis(500) {
                eprintln!("waiting for {what}: the screen shows\n{screen}");
            }
            screen.contains(text).then_some(screen)
        })
    }

    /// Whether the pane shows the alternate screen (a full-screen program).
    fn alternate(&self) -> bool {
        let out = self.run(&["display-message", "-p", "-t", "t", "#{alternate_on}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

fn status_of(env: &TestEnv, name: &str) -> String {
    let lp = env.loops(["--json", "show", name]).run().json();
    lp["status"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_dashboard_shows_filters_pauses_opens_and_gives_the_terminal_back() {
    let env = TestEnv::new();
    env.create_command("alpha-job", "true", &["--every", "1h"]);
    env.create_command("beta-job", "true", &["--every", "1h", "--label", "nightly"]);
    env.loops(["run-now", "beta-job"]).run();
    let Some(tmux) = Tmux::start(&env) else {
        return;
    };
    let bin: &Path = &loops_tests::loops_bin();
    tmux.keys(&[&format!("'{}' ui", bin.display()), "Enter"]);
    let screen = tmux.wait_for("the loops table", "beta-job [nightly]");
    assert!(screen.contains("alpha-job"), "{screen}");
    assert!(screen.contains("daemon: not running"), "{screen}");
    assert!(screen.contains("LAST 20"), "{screen}");
    assert!(tmux.alternate());
    // A change made elsewhere shows without a key: alpha's first run.
    let row = |screen: &str| {
        screen
            .lines()
            .find(|l| l.starts_with("alpha-job"))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(!row(&screen).contains("succeeded"), "{screen}");
    env.loops(["run-now", "alpha-job"]).run();
    wait_for("alpha's run on the screen", DEADLINE, || {
        row(&tmux.screen()).contains("succeeded").then_some(())
    });

    // Resized to 80×24, it redraws at once: the sparkline keeps 10 runs.
    tmux.run(&["resize-window", "-t", "t", "-x", "80", "-y", "24"]);
    let narrow = tmux.wait_for("the narrow table", "LAST 10");
    assert!(narrow.contains("beta-job"), "{narrow}");
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
    tmux.run(&["resize-window", "-t", "t", "-x", "100", "-y", "30"]);
    tmux.wait_for("the wide table", "LAST 20");

    // `/` filters by label: only beta is left.
    tmux.keys(&["/", "night", "Enter"]);
    wait_for("the filter", DEADLINE, || {
        let screen = tmux.screen();
        (!screen.contains("alpha-job") && screen.contains("beta-job")).then_some(())
    });

    // `p` asks first; `y` pauses it in the store.
    tmux.keys(&["p"]);
    tmux.wait_for("the question", "pause beta-job? y to confirm");
    assert_eq!(status_of(&env, "beta-job"), "active");
    tmux.keys(&["y"]);
    tmux.wait_for("the answer", "paused beta-job");
    assert_eq!(status_of(&env, "beta-job"), "paused");
    // Any other key says no.
    tmux.keys(&["r"]);
    tmux.wait_for("the question", "resume beta-job? y to confirm");
    tmux.keys(&["n"]);
    tmux.wait_for("the refusal", "resume cancelled");
    assert_eq!(status_of(&env, "beta-job"), "paused");

    // Enter opens its card, as `loops status` prints it.
    tmux.keys(&["Enter"]);
    let card = tmux.wait_for("the card", "State: paused");
    assert!(card.contains("● beta-job"), "{card}");
    assert!(card.contains("Labels: nightly"), "{card}");

    // q goes back, then quits, and the terminal is the shell's again.
    tmux.keys(&["q"]);
    tmux.wait_for("the table again", "LAST 20");
    tmux.keys(&["q"]);
    wait_for("the terminal back", DEADLINE, || {
        (!tmux.alternate()).then_some(())
    });
    let screen = tmux.screen();
    assert!(!screen.contains("LAST 20"), "{screen}");
    // The shell reads keys again, echoed as typed: the raw mode is gone.
    tmux.keys(&["echo back-$((40+2))", "Enter"]);
    tmux.wait_for("the shell", "back-42");
}

#[test]
fn run_now_and_cancel_from_the_dashboard_reach_the_store() {
    let env = TestEnv::new();
    env.write_script(
        "slow",
        "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo line-$i; sleep 0.1; done",
    );
    env.create_command("slow-job", "slow", &["--every", "1h"]);
    let Some(tmux) = Tmux::start(&env) else {
        return;
    };
    let bin: &Path = &loops_tests::loops_bin();
    tmux.keys(&[&format!("'{}' ui", bin.display()), "Enter"]);
    tmux.wait_for("the loops table", "slow-job");
    let runs = |status: &str| {
        let runs = env.loops(["--json", "runs", "slow-job"]).run().json();
        runs.as_array()
            .unwrap()
            .iter()
            .filter(|r| r["status"] == status)
            .count()
    };
    // `n` asks, then starts a run beside the dashboard; the table counts it.
    tmux.keys(&["n"]);
    tmux.wait_for("the question", "run now slow-job? y to confirm");
    tmux.keys(&["y"]);
    wait_for("the run", DEADLINE, || (runs("running") == 1).then_some(()));
    tmux.wait_for("the run in flight", "1 run in flight");
    // Enter opens the card, Enter there follows the run: new lines come.
    tmux.keys(&["Enter"]);
    let card = tmux.wait_for("the card", "● slow-job");
    // Nothing but the screen reaches the terminal: no "no daemon" hint.
    assert!(!card.contains("hint:"), "{card}");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the output", "output of run ");
    let last = |screen: &str| -> u32 {
        screen
            .lines()
            .filter_map(|l| l.trim().strip_prefix("line-")?.parse().ok())
            .max()
            .unwrap_or(0)
    };
    let first = wait_for("a first line", DEADLINE, || {
        let n = last(&tmux.screen());
        (n > 0).then_some(n)
    });
    wait_for("later lines, live", DEADLINE, || {
        (last(&tmux.screen()) > first + 3).then_some(())
    });
    // q goes back to the card, where c cancels as in the table.
    tmux.keys(&["q"]);
    tmux.wait_for("the card", "● slow-job");
    // `c` asks, then cancels it: recorded cancelled, the process gone.
    tmux.keys(&["c"]);
    tmux.wait_for(
        "the question",
        "cancel the running runs of slow-job? y to confirm",
    );
    tmux.keys(&["y"]);
    wait_for("the cancel", DEADLINE, || {
        (runs("cancelled") == 1).then_some(())
    });
    assert_eq!(runs("running"), 0);
    tmux.wait_for("no run in flight", "0 runs in flight");
    tmux.keys(&["q", "q"]);
    wait_for("the terminal back", DEADLINE, || {
        (!tmux.alternate()).then_some(())
    });
}

#[test]
fn the_header_names_the_running_daemons() {
    let env = TestEnv::new();
    env.create_command("watched", "true", &["--every", "1h"]);
    let _daemon = loops_tests::Daemon::start(&env, &[]);
    let Some(tmux) = Tmux::start(&env) else {
        return;
    };
    let bin: &Path = &loops_tests::loops_bin();
    tmux.keys(&[&format!("'{}' ui", bin.display()), "Enter"]);
    let screen = tmux.wait_for("the header", "daemon: running pid ");
    // On PostgreSQL, every live daemon of the database, with its host.
    if env.on_postgres() {
        let screen = tmux.wait_for("the daemons", "daemons: ");
        assert!(screen.contains(" up "), "{screen}");
    } else {
        assert!(!screen.contains("daemons: "), "{screen}");
    }
    tmux.keys(&["q"]);
    wait_for("the terminal back", DEADLINE, || {
        (!tmux.alternate()).then_some(())
    });
}

#[test]
fn e_edits_the_loops_flags_in_the_editor_and_applies_what_changed() {
    let env = TestEnv::new();
    env.create_command("edited-job", "true", &["--every", "1h", "--label", "ops"]);
    // The editor: rewrites one flag, and does nothing once it is done.
    let editor = env.write_script(
        "rewrite-flags",
        "sed 's/^--every 1h$/--every 2h/' \"$1\" > \"$1.new\" && mv \"$1.new\" \"$1\"",
    );
    let Some(tmux) = Tmux::start(&env) else {
        return;
    };
    let bin: &Path = &loops_tests::loops_bin();
    let line = format!("EDITOR='{}' '{}' ui", editor.display(), bin.display());
    tmux.keys(&[&line, "Enter"]);
    tmux.wait_for("the loops table", "edited-job [ops]");
    tmux.keys(&["e"]);
    let screen = tmux.wait_for("what changed", "edited edited-job: --every=2h");
    // The dashboard has the terminal again, redrawn.
    assert!(screen.contains("LAST 20"), "{screen}");
    assert!(tmux.alternate());
    let lp = env.loops(["--json", "show", "edited-job"]).run().json();
    assert_eq!(lp["schedule"]["everyMs"], 7_200_000, "{lp}");
    assert_eq!(lp["labels"], serde_json::json!(["ops"]), "{lp}");
    let updated = lp["updatedAt"].clone();
    // Saved as it was: nothing is done.
    tmux.keys(&["e"]);
    tmux.wait_for("no change", "edit edited-job: no change");
    let lp = env.loops(["--json", "show", "edited-job"]).run().json();
    assert_eq!(lp["updatedAt"], updated, "{lp}");
    tmux.keys(&["q"]);
    wait_for("the terminal back", DEADLINE, || {
        (!tmux.alternate()).then_some(())
    });
}
