//! Secrets written into commands, hooks and URLs (issue 25 item 4): the
//! tools' results mask them as the output scrubber masks run output, unless
//! a server that allows mutations is asked for them with `showOutput`; the
//! CLI, run by the owner, keeps showing them.

use loops_tests::TestEnv;
use serde_json::{Value, json};

use super::{ALLOW, block_on, cli_json, mutable, read_only};
use crate::workflows::{create_workflow, shell_step};

/// A GitHub token: `ghp_` and 36 characters.
const TOKEN: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";

/// The secret part of a Slack incoming webhook's URL.
const SLACK: &str = "T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX";

/// The secret part of a Discord webhook's URL.
const DISCORD: &str = "123456789012345678/aBcDeFgHiJkLmNoPqRsTuVwXyZ_0123456789";

/// The command and hook of [`secret_loop`], and what the tools show of
/// them.
fn command() -> String {
    format!("curl -H \"Authorization: token {TOKEN}\" https://api.github.com/user")
}

fn hook() -> String {
    format!("curl -d ok https://hooks.slack.com/services/{SLACK}")
}

const MASKED_COMMAND: &str =
    "curl -H \"Authorization: token [redacted]\" https://api.github.com/user";
const MASKED_HOOK: &str = "curl -d ok https://hooks.slack.com/services/[redacted]";

/// A loop `notify` whose command holds [`TOKEN`] and whose failure hook
/// posts to a Slack webhook; and a workflow `announce` whose step posts to a
/// Discord webhook, run once.
fn populate(env: &TestEnv) -> String {
    env.create_command(
        "notify",
        &command(),
        &["--every", "1h", "--on-failure", &hook()],
    );
    let step = format!(": https://discord.com/api/webhooks/{DISCORD} {TOKEN}");
    create_workflow(
        env,
        &json!({"name": "announce", "steps": [shell_step("post", &step, &[])]}),
    );
    let ran = cli_json(env, &["workflows", "run", "announce"]);
    assert_eq!(ran["workflowRun"]["status"], "succeeded", "{ran}");
    ran["workflowRun"]["id"]
        .as_str()
        .expect("a workflow run id")
        .to_owned()
}

/// Whether `value` holds any of the secrets.
fn leaks(value: &Value) -> bool {
    let text = value.to_string();
    text.contains(TOKEN) || text.contains("B0001/XXXX") || text.contains("aBcDeFgHiJ")
}

/// What the CLI prints of `notify`, with its command and hook as the tools
/// show them.
fn masked(mut shown: Value) -> Value {
    assert_eq!(shown["target"]["command"], command().as_str(), "{shown}");
    assert_eq!(shown["onFailure"], hook().as_str(), "{shown}");
    shown["target"]["command"] = MASKED_COMMAND.into();
    shown["onFailure"] = MASKED_HOOK.into();
    shown
}

#[test]
fn read_tools_mask_tokens_and_webhook_urls_and_the_cli_keeps_them() {
    let env = TestEnv::new();
    block_on(async {
        let run_id = populate(&env);
        let mcp = read_only(&env).await;

        let show = mcp.ok("loops_show", json!({"loop": "notify"})).await;
        assert!(!leaks(&show), "{show}");
        // Everything else is what the CLI prints.
        let cli = cli_json(&env, &["show", "notify"]);
        assert!(leaks(&cli), "the CLI shows the owner the command: {cli}");
        assert_eq!(show, masked(cli));

        let list = mcp.ok("loops_list", json!({})).await;
        assert!(!leaks(&list), "{list}");
        let mut cli = cli_json(&env, &["list"]);
        cli[0] = masked(cli[0].take());
        assert_eq!(list, cli);

        let runs = mcp.ok("loops_runs", json!({})).await;
        assert!(!leaks(&runs), "{runs}");
        let inspect = mcp
            .ok("loops_workflow_run_inspect", json!({"runId": run_id}))
            .await;
        assert_eq!(inspect, cli_json(&env, &["workflows", "inspect", &run_id]));
        for (tool, args) in [
            ("loops_workflows_list", json!({})),
            ("loops_workflow_read", json!({"workflow": "announce"})),
        ] {
            let read = mcp.ok(tool, args).await;
            assert!(!leaks(&read), "{tool}: {read}");
            assert!(
                read.to_string()
                    .contains("https://discord.com/api/webhooks/[redacted]"),
                "{tool}: {read}"
            );
        }
        // Asking for them needs mutations allowed.
        for tool in ["loops_show", "loops_workflow_read"] {
            let args = if tool == "loops_show" {
                json!({"loop": "notify", "showOutput": true})
            } else {
                json!({"workflow": "announce", "showOutput": true})
            };
            let message = mcp.err(tool, args).await;
            assert!(message.contains(&format!("{ALLOW}=true")), "{message}");
        }
        let message = mcp.err("loops_list", json!({"showOutput": true})).await;
        assert!(message.contains(&format!("{ALLOW}=true")), "{message}");
        mcp.close().await;
    });
}

#[test]
fn a_server_that_allows_mutations_shows_secrets_only_with_show_output() {
    let env = TestEnv::new();
    block_on(async {
        let run_id = populate(&env);
        let mcp = mutable(&env).await;

        let show = mcp.ok("loops_show", json!({"loop": "notify"})).await;
        assert!(!leaks(&show), "{show}");
        let shown = mcp
            .ok("loops_show", json!({"loop": "notify", "showOutput": true}))
            .await;
        assert_eq!(shown, cli_json(&env, &["show", "notify"]));
        assert!(leaks(&shown), "{shown}");

        assert!(!leaks(&mcp.ok("loops_list", json!({})).await));
        let listed = mcp.ok("loops_list", json!({"showOutput": true})).await;
        assert_eq!(listed, cli_json(&env, &["list"]));

        let read = mcp
            .ok(
                "loops_workflow_read",
                json!({"workflow": "announce", "showOutput": true}),
            )
            .await;
        assert_eq!(read, cli_json(&env, &["workflows", "show", "announce"]));
        assert!(leaks(&read), "{read}");
        let inspect = mcp
            .ok(
                "loops_workflow_run_inspect",
                json!({"runId": run_id, "showOutput": true}),
            )
            .await;
        assert_eq!(
            inspect,
            cli_json(&env, &["workflows", "inspect", &run_id, "--show-output"])
        );

        // A loop created here is shown as any other: masked.
        let created = mcp
            .ok(
                "loops_create_command",
                json!({"name": "again", "cmd": command(), "every": "1h", "onSuccess": hook()}),
            )
            .await;
        assert!(!leaks(&created), "{created}");
        assert!(leaks(&cli_json(&env, &["show", "again"])));
        mcp.close().await;
    });
}
