//! Account resolution through a fake `accounts` (SPEC §5.4; §10 items
//! 63–65; §9 item 30).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use loops_core::{Account, AgentProvider, AgentTarget, ExecutorStatus, ProcessTarget};
use loops_exec::{CancelToken, RunContext, RunMetadata, preflight_target};

use crate::support::*;

fn claude_with_account(profile: &str) -> ProcessTarget {
    let mut a = AgentTarget::new(AgentProvider::Claude, "hi");
    a.account = Some(Account {
        profile: profile.into(),
        tool: None,
    });
    ProcessTarget::Agent(a)
}

/// A fake provider that prints the variables an account run cares about,
/// to its stdout (which the run stores, scrubbed) and to
/// `$MARKERS/provider-saw` (which [`provider_saw`] reads, as the child saw
/// them).
const PRINT_ACCOUNT_ENV: &str = r#"touch "$MARKERS/provider-ran"
printf '%s\n' "dir=$CLAUDE_CONFIG_DIR" "anthropic=$ANTHROPIC_API_KEY" "openai=${OPENAI_API_KEY-unset}" \
  "xdg=${XDG_CONFIG_HOME-unset}" "profile=$LOOPS_ACCOUNT_PROFILE" "tool=$LOOPS_ACCOUNT_TOOL" \
  "num=$NUM" "quoted=$QUOTED" "escaped=$ESCAPED" | tee "$MARKERS/provider-saw""#;

/// What the fake provider saw.
fn provider_saw(fx: &Fixture) -> String {
    std::fs::read_to_string(fx.path("provider-saw")).unwrap()
}

#[test]
fn account_env_replaces_inherited_credentials() {
    // SPEC §10 items 63 and 64.
    let fx = Fixture::new();
    let profile_dir = fx.path_str("profiles/work");
    std::fs::create_dir_all(&profile_dir).unwrap();
    fx.fake(
        "accounts",
        &format!(
            r#"printf '%s\n' "$@" > "$MARKERS/accounts-args"
printf '%s\n' '# resolved' 'export CLAUDE_CONFIG_DIR="{profile_dir}"' \
  'export ANTHROPIC_API_KEY=account-key' 'export NUM=1e3' "export QUOTED='single'" \
  'export ESCAPED="a\"b"'"#
        ),
    );
    fx.fake("claude", PRINT_ACCOUNT_ENV);
    let mut env = fx.env();
    env.insert("ANTHROPIC_API_KEY".into(), "inherited".into());
    env.insert("OPENAI_API_KEY".into(), "inherited".into());
    env.insert("XDG_CONFIG_HOME".into(), "/inherited".into());
    env.insert("CLAUDE_CONFIG_DIR".into(), "/inherited".into());
    let r = run(&claude_with_account("work"), &fx.opts_with(env));
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert_eq!(
        provider_saw(&fx),
        format!(
            "dir={profile_dir}\nanthropic=account-key\nopenai=unset\nxdg=unset\nprofile=work\n\
             tool=claude\nnum=1e3\nquoted=single\nescaped=a\"b\n"
        )
    );
    // Issue 12 §2: the stored output masks the exported values of at least
    // 8 bytes.
    assert_eq!(
        r.stdout,
        "dir=[redacted]\nanthropic=[redacted]\nopenai=unset\nxdg=unset\nprofile=work\n\
         tool=claude\nnum=1e3\nquoted=single\nescaped=a\"b\n"
    );
    let args = std::fs::read_to_string(fx.path("accounts-args")).unwrap();
    assert_eq!(args, "env\nwork\n--tool\nclaude\n");
}

#[test]
fn the_tool_variable_wins_over_the_first_export() {
    // SPEC §10 item 64: the first export names a directory that does not
    // exist; only the tool's own variable is checked.
    let fx = Fixture::new();
    let dir = fx.path_str("claude-home");
    std::fs::create_dir(&dir).unwrap();
    fx.fake(
        "accounts",
        &format!("echo 'export OTHER_DIR=/no/such/dir'\necho 'export CLAUDE_CONFIG_DIR={dir}'"),
    );
    fx.fake("claude", PRINT_ACCOUNT_ENV);
    let r = run(&claude_with_account("work"), &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    assert!(provider_saw(&fx).starts_with(&format!("dir={dir}\n")));
}

#[test]
fn an_unknown_tool_uses_its_config_dir_variable() {
    // Issue 12 §2: a tool without a documented profile variable uses
    // `<TOOL>_CONFIG_DIR`, wherever it is in the output.
    let fx = Fixture::new();
    let dir = fx.path_str("gh-home");
    std::fs::create_dir(&dir).unwrap();
    fx.fake(
        "accounts",
        &format!("echo 'export GH_TOKEN=account-token'\necho 'export GH_CONFIG_DIR={dir}'"),
    );
    let mut target = command(
        "sh",
        &[
            "-c",
            r#"printf '%s %s %s' "$GH_CONFIG_DIR" "$GH_TOKEN" "$LOOPS_ACCOUNT_TOOL" | tee "$MARKERS/gh-saw""#,
        ],
    );
    if let ProcessTarget::Command(c) = &mut target {
        c.account = Some(Account {
            profile: "work".into(),
            tool: Some("gh".into()),
        });
    }
    let mut env = fx.env();
    env.insert("GH_TOKEN".into(), "inherited".into());
    let r = run(&target, &fx.opts_with(env));
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    let saw = std::fs::read_to_string(fx.path("gh-saw")).unwrap();
    assert_eq!(saw, format!("{dir} account-token gh"));
    // The stored output masks the token and the directory, both exported
    // by `accounts env`.
    assert_eq!(r.stdout, "[redacted] [redacted] gh", "{r:?}");
}

#[test]
fn accounts_runs_with_the_normalized_path() {
    // SPEC §9 item 30: `accounts` in ~/.local/bin is found although the base
    // PATH lacks it, and it sees the normalized PATH itself.
    let fx = Fixture::new();
    let dir = fx.path_str("claude-home");
    std::fs::create_dir(&dir).unwrap();
    fx.script(
        "home/.local/bin/accounts",
        &format!("printf %s \"$PATH\" > \"$MARKERS/accounts-path\"\necho 'export CLAUDE_CONFIG_DIR={dir}'"),
    );
    fx.script("home/.local/bin/claude", "echo ok");
    let env = BTreeMap::from([
        ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
        ("HOME".to_owned(), fx.home().display().to_string()),
        ("MARKERS".to_owned(), fx.dir.path().display().to_string()),
    ]);
    let r = run(&claude_with_account("work"), &fx.opts_with(env));
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    let path = std::fs::read_to_string(fx.path("accounts-path")).unwrap();
    assert!(
        path.starts_with(&format!(
            "/usr/bin:/bin:{}/.local/bin:",
            fx.home().display()
        )),
        "{path}"
    );
}

#[test]
fn account_errors_are_raised_and_the_provider_never_runs() {
    // SPEC §10 item 65, plus the other §5.4 errors.
    let fx = Fixture::new();
    fx.fake("claude", PRINT_ACCOUNT_ENV);
    let cases = [
        (
            "echo 'no such profile' >&2; exit 1",
            "accounts env failed for work/claude: no such profile",
        ),
        ("exit 4", "accounts env failed for work/claude"),
        (
            "echo 'export CLAUDE_CONFIG_DIR=/no/such/profile'",
            "account profile directory does not exist for work/claude: /no/such/profile",
        ),
        (
            "echo 'nothing to export'",
            "accounts env returned no profile directory for work/claude: \
             expected CLAUDE_CONFIG_DIR in its exports",
        ),
        (
            "echo 'export CLAUDE_CONFIG_DIR='",
            "accounts env returned no profile directory for work/claude: \
             expected CLAUDE_CONFIG_DIR in its exports",
        ),
    ];
    for (accounts, expected) in cases {
        fx.fake("accounts", accounts);
        assert_eq!(run_err(&claude_with_account("work"), &fx.opts()), expected);
        assert_eq!(
            preflight_err(&claude_with_account("work"), &fx.opts()),
            expected
        );
    }
    assert!(!fx.path("provider-ran").exists());
}

#[test]
fn a_command_account_needs_a_tool() {
    let fx = Fixture::new();
    fx.fake("accounts", r#"touch "$MARKERS/accounts-ran""#);
    let mut target = shell(r#"touch "$MARKERS/provider-ran""#);
    if let ProcessTarget::Command(c) = &mut target {
        c.account = Some(Account {
            profile: "work".into(),
            tool: None,
        });
    }
    assert_eq!(
        run_err(&target, &fx.opts()),
        "account.tool is required when no provider tool can be inferred"
    );
    assert!(!fx.path("accounts-ran").exists());
    assert!(!fx.path("provider-ran").exists());
}

#[test]
fn a_missing_accounts_binary_is_an_account_error() {
    let fx = Fixture::new();
    let message = run_err(&claude_with_account("work"), &fx.opts());
    assert!(
        message.starts_with(
            "failed to run accounts env for work/claude: Executable not found in PATH: accounts."
        ),
        "{message}"
    );
}

#[test]
fn a_hung_accounts_call_times_out() {
    let fx = Fixture::new();
    fx.fake("accounts", "sleep 10");
    let mut opts = fx.opts();
    opts.accounts_timeout = Duration::from_millis(200);
    let start = Instant::now();
    let message = run_err(&claude_with_account("work"), &opts);
    assert_eq!(
        message,
        "failed to run accounts env for work/claude: timed out after 200ms"
    );
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_cancel_during_accounts_env_is_reported_as_data() {
    let fx = Fixture::new();
    fx.fake("accounts", r#"touch "$MARKERS/accounts-started"; sleep 10"#);
    fx.fake("claude", PRINT_ACCOUNT_ENV);
    let token = CancelToken::new();
    let ctx = RunContext {
        cancel: Some(&token),
        ..RunContext::default()
    };
    let started = fx.path("accounts-started");
    let canceller = std::thread::spawn({
        let token = token.clone();
        move || {
            assert!(eventually(Duration::from_secs(5), || started.exists()));
            token.cancel("cancelled by user");
        }
    });
    let target = claude_with_account("work");
    let (result, spawned) = run_in(&target, &RunMetadata::default(), &fx.opts(), &ctx);
    canceller.join().unwrap();
    let r = result.unwrap();
    assert_eq!(spawned, None);
    assert_eq!(r.status, ExecutorStatus::Failed);
    assert_eq!(r.error.as_deref(), Some("cancelled by user"));
    assert!(!fx.path("provider-ran").exists());
}

#[test]
fn preflight_reports_the_account() {
    let fx = Fixture::new();
    let dir = fx.path_str("claude-home");
    std::fs::create_dir(&dir).unwrap();
    fx.fake(
        "accounts",
        &format!("echo 'export CLAUDE_CONFIG_DIR={dir}'"),
    );
    fx.fake("claude", PRINT_ACCOUNT_ENV);
    let p = preflight_target(
        &claude_with_account("work"),
        &RunMetadata::default(),
        &fx.opts(),
    )
    .unwrap();
    assert_eq!(p.account_profile.as_deref(), Some("work"));
    assert_eq!(p.account_tool.as_deref(), Some("claude"));
    assert!(!fx.path("provider-ran").exists());
}
