//! Secrets (issue 12 §2): an account run sees none of the runner's own
//! credentials, and no value `accounts env` printed, and no value of the
//! run's own `env`, reaches an error or the stored output.

use std::collections::BTreeMap;

use loops_core::{Account, AgentProvider, AgentTarget, ExecutorStatus, ProcessTarget};

use crate::support::*;

/// Every inherited variable an account run must not see: the SPEC §5.3
/// list and the documented auth variables of the providers and their
/// clouds. Written out here rather than taken from the crate, so a name
/// dropped from the crate's list fails this test.
const CREDENTIALS: &[&str] = &[
    // SPEC §5.3.
    "CLAUDE_CONFIG_DIR",
    "CODEWITH_HOME",
    "CODEX_HOME",
    "CURSOR_CONFIG_DIR",
    "OPENCODE_CONFIG_DIR",
    "AICOPILOT_CONFIG_DIR",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    // The ones issue 12 found getting through.
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    // Anthropic, Bedrock, Vertex, OpenAI, Azure OpenAI, Gemini, GitHub.
    "ANTHROPIC_CUSTOM_HEADERS",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
    "CLOUDSDK_CONFIG",
    "GOOGLE_GENAI_API_KEY",
    "CODEX_API_KEY",
    "CODEX_ACCESS_TOKEN",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
    "AZURE_API_KEY",
    "AZURE_CLIENT_ID",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_CLIENT_CERTIFICATE_PATH",
    "AZURE_CLIENT_CERTIFICATE_PASSWORD",
    "AZURE_USERNAME",
    "AZURE_PASSWORD",
    "AZURE_FEDERATED_TOKEN_FILE",
    "CURSOR_API_KEY",
    "CURSOR_AUTH_TOKEN",
    "COPILOT_GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "GH_CONFIG_DIR",
];

fn inherited(name: &str) -> String {
    format!("inherited-{name}")
}

fn with_account(mut target: ProcessTarget, tool: Option<&str>) -> ProcessTarget {
    let account = Some(Account {
        profile: "work".into(),
        tool: tool.map(str::to_owned),
    });
    match &mut target {
        ProcessTarget::Command(c) => c.account = account,
        ProcessTarget::Agent(a) => a.account = account,
    }
    target
}

fn with_env(mut target: ProcessTarget, vars: &[(&str, &str)]) -> ProcessTarget {
    if let ProcessTarget::Command(c) = &mut target {
        c.env = Some(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    target
}

/// A Claude profile directory and a fake `accounts` that resolves to it
/// and exports `ANTHROPIC_API_KEY=<key>`; the directory.
fn claude_account_with_key(fx: &Fixture, key: &str) -> String {
    let dir = fx.path_str("claude-home");
    std::fs::create_dir(&dir).unwrap();
    fx.fake(
        "accounts",
        &format!("echo 'export CLAUDE_CONFIG_DIR={dir}'\necho 'export ANTHROPIC_API_KEY={key}'"),
    );
    dir
}

/// The variables a dump written by `env > file` holds.
fn read_dump(path: &std::path::Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn inherited_credentials_never_reach_an_account_run() {
    // SPEC §10 item 64, widened to every documented auth variable.
    let fx = Fixture::new();
    let dir = claude_account_with_key(&fx, "key-of-work");
    // Issue 27: an agent that exits 0 must print something.
    fx.fake("claude", r#"env > "$MARKERS/agent.env"; echo done"#);
    let mut env = fx.env();
    for name in CREDENTIALS {
        env.insert((*name).to_owned(), inherited(name));
    }
    let agent = ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, "hi"));
    let r = run(
        &with_account(agent.clone(), None),
        &fx.opts_with(env.clone()),
    );
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    let seen = read_dump(&fx.path("agent.env"));
    let leaked: Vec<&str> = CREDENTIALS
        .iter()
        .copied()
        .filter(|name| seen.values().any(|v| v.contains(&inherited(name))))
        .collect();
    assert!(leaked.is_empty(), "an account run inherited {leaked:?}");
    assert_eq!(seen["CLAUDE_CONFIG_DIR"], dir);
    assert_eq!(seen["ANTHROPIC_API_KEY"], "key-of-work");

    // The control: without an account every one of them passes (SPEC
    // §5.3), so the check above would see a leak.
    let r = run(&agent, &fx.opts_with(env));
    assert_eq!(r.status, ExecutorStatus::Succeeded, "{r:?}");
    let seen = read_dump(&fx.path("agent.env"));
    for name in CREDENTIALS {
        assert_eq!(seen.get(*name), Some(&inherited(name)), "{name}");
    }
}

#[test]
fn only_the_tools_variable_names_the_profile_directory() {
    // Issue 12 §2: `--account-tool gh` with `export GH_TOKEN=…` first used
    // to take the token for the directory and print it in the error. A
    // departure from SPEC §10 item 64's first-export fallback.
    let fx = Fixture::new();
    fx.fake("claude", r#"touch "$MARKERS/provider-ran""#);
    let token = "ghp_0123456789abcdefABCDEF0123456789abcd";
    let existing = fx.path_str("some-dir");
    std::fs::create_dir(&existing).unwrap();
    let gh = with_account(shell(r#"touch "$MARKERS/provider-ran""#), Some("gh"));
    let claude = with_account(
        ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, "hi")),
        None,
    );
    let cases = [
        (
            &gh,
            format!("echo 'export GH_TOKEN={token}'\necho 'export GH_HOST=github.com'"),
            "accounts env returned no profile directory for work/gh: \
             expected GH_CONFIG_DIR in its exports"
                .to_owned(),
        ),
        (
            &gh,
            format!("echo 'export GH_TOKEN={token}'\necho 'export GH_CONFIG_DIR=/no/such/gh'"),
            "account profile directory does not exist for work/gh: /no/such/gh".to_owned(),
        ),
        // The first export names a directory that exists: it is still not
        // the profile directory.
        (
            &claude,
            format!("echo 'export OTHER_DIR={existing}'\necho 'export ANTHROPIC_API_KEY={token}'"),
            "accounts env returned no profile directory for work/claude: \
             expected CLAUDE_CONFIG_DIR in its exports"
                .to_owned(),
        ),
    ];
    for (target, accounts, expected) in cases {
        fx.fake("accounts", &accounts);
        let message = run_err(target, &fx.opts());
        assert_eq!(message, expected);
        assert!(!message.contains(token) && !message.contains(&existing));
        assert_eq!(preflight_err(target, &fx.opts()), expected);
    }
    assert!(!fx.path("provider-ran").exists());
}

#[test]
fn a_failing_accounts_stderr_is_scrubbed() {
    // SPEC §10 item 65 keeps the stderr in the message; issue 12 §2 masks
    // what `accounts env` exported and anything shaped like a token.
    let fx = Fixture::new();
    fx.fake("claude", r#"touch "$MARKERS/provider-ran""#);
    fx.fake(
        "accounts",
        r#"echo 'export CLAUDE_CONFIG_DIR=/profiles/work'
echo 'export ANTHROPIC_API_KEY="exported-key-1234"'
echo 'export SHORT=abc'
echo "refresh of exported-key-1234 in /profiles/work failed (abc):" >&2
echo "  GH_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a sk-ant-api03-AbCdEfGh1234567890abcd" >&2
echo "  xoxb-1234567890-abcdefghij 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" >&2
exit 1"#,
    );
    let claude = with_account(
        ProcessTarget::Agent(AgentTarget::new(AgentProvider::Claude, "hi")),
        None,
    );
    let expected = "accounts env failed for work/claude: refresh of [redacted] in [redacted] \
                    failed (abc):\n  GH_TOKEN=[redacted] [redacted]\n  [redacted] [redacted]";
    assert_eq!(run_err(&claude, &fx.opts()), expected);
    assert_eq!(preflight_err(&claude, &fx.opts()), expected);
    assert!(!fx.path("provider-ran").exists());
}

#[test]
fn stored_output_masks_env_and_account_values() {
    let fx = Fixture::new();
    claude_account_with_key(&fx, "account-key-42");
    // Prints both secrets, a token the run found somewhere, and a short
    // `env` value that is left alone, to both streams; then fails.
    let script = r#"for fd in 1 2; do
  echo "key=$ANTHROPIC_API_KEY token=$TOKEN dir=$CLAUDE_CONFIG_DIR mode=$MODE found=sk-proj-0123456789abcdefghij" >&$fd
done
exit 3"#;
    let target = with_env(
        with_account(shell(script), Some("claude")),
        &[("TOKEN", "env-token-value"), ("MODE", "fast")],
    );
    let r = run(&target, &fx.opts());
    assert_eq!(r.status, ExecutorStatus::Failed, "{r:?}");
    let masked = "key=[redacted] token=[redacted] dir=[redacted] mode=fast found=[redacted]\n";
    assert_eq!(r.stdout, masked);
    assert_eq!(r.stderr, masked);
    assert_eq!(r.error.as_deref(), Some("process exited with code 3"));

    // An error loops writes itself: the target's cwd holds an `env` value.
    let missing = fx.path_str("env-token-value");
    let target = with_cwd(
        with_env(shell("true"), &[("TOKEN", "env-token-value")]),
        &missing,
    );
    let r = run(&target, &fx.opts());
    let error = r.error.unwrap();
    assert!(!error.contains("env-token-value"), "{error}");
    assert!(error.ends_with("/[redacted]"), "{error}");
}

#[test]
fn a_secret_cut_by_the_output_cap_is_masked_and_the_marker_kept() {
    // SPEC §10 item 70: the marker still leads; the end of a secret that the
    // cap cut is masked as a whole secret would be.
    let fx = Fixture::new();
    let target = with_env(
        shell(r#"printf 'xxxxxxxxxx%s tail' "$TOKEN""#),
        &[("TOKEN", "env-token-value")],
    );
    let mut opts = fx.opts();
    opts.max_output_bytes = 15;
    let r = run(&target, &opts);
    // 10 + 15 + 5 = 30 bytes; the 15 kept are `oken-value tail`.
    assert_eq!(r.stdout, "[truncated 15 bytes]\n[redacted] tail");
}
