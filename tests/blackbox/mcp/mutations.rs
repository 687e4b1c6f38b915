//! Mutations: refused (with everything that may reveal or run something)
//! unless the server has `LOOPS_MCP_ALLOW_MUTATIONS=true`, and when allowed,
//! changes that reach the database, checked afterwards through the CLI.

use loops_tests::TestEnv;
use serde_json::{Value, json};

use super::reads::{deploy, populate};
use super::{ALLOW, Mcp, block_on, cli_json, mutable};
use crate::workflows::{create_workflow, shell_step};

/// A workflow whose agent step reads its prompt from `file`.
fn prompt_file_workflow(file: &str) -> Value {
    json!({
        "name": "agentic",
        "steps": [{"id": "ask", "target": {
            "type": "agent", "provider": "claude", "promptFile": file}}],
    })
}

#[test]
fn mutations_are_refused_without_the_variable_and_change_nothing() {
    let env = TestEnv::new();
    block_on(async {
        let f = populate(&env);
        let list = cli_json(&env, &["list"]);
        let runs = cli_json(&env, &["runs"]);
        let workflows = cli_json(&env, &["workflows", "list"]);
        let needs = format!("{ALLOW}=true");
        for allow in [
            None,
            Some("false"),
            Some("nonsense"),
            Some(""),
            Some("0"),
            Some("off"),
        ] {
            let mcp = Mcp::start(&env, allow).await;
            for (tool, args) in [
                (
                    "loops_create_command",
                    json!({"name": "new", "cmd": "true", "every": "1m"}),
                ),
                (
                    "loops_create_workflow",
                    json!({"name": "new", "workflow": "deploy", "every": "1m"}),
                ),
                ("loops_pause", json!({"loop": "tick"})),
                ("loops_resume", json!({"loop": "tick"})),
                ("loops_stop", json!({"loop": f.loop_id})),
                ("loops_cancel", json!({"target": f.loop_id})),
                ("loops_run_now", json!({"loop": "tick"})),
                // A dry run reads a file on the host.
                (
                    "loops_apply",
                    json!({"path": "/etc/hostname", "dryRun": true}),
                ),
                (
                    "loops_labels_update",
                    json!({"loop": "tick", "action": "clear"}),
                ),
                // Refused before the arguments are read: even a call that would
                // fail names the variable.
                ("loops_pause", json!({"loop": "nope"})),
                // What may reveal output, or read or run something on the host.
                ("loops_runs", json!({"showOutput": true})),
                (
                    "loops_workflow_run_inspect",
                    json!({"runId": f.workflow_run_id, "showOutput": true}),
                ),
                (
                    "loops_workflow_validate",
                    json!({"workflow": deploy(), "preflight": true}),
                ),
                (
                    "loops_workflow_validate",
                    json!({"workflow": prompt_file_workflow("/etc/hostname")}),
                ),
            ] {
                let message = mcp.err(tool, args.clone()).await;
                assert!(
                    message.contains(&needs),
                    "{allow:?} {tool} {args}: {message}"
                );
            }
            // Off is the default, not an error.
            let shown = mcp
                .ok("loops_runs", json!({"loop": "tick", "showOutput": false}))
                .await;
            assert_eq!(shown[0]["stdout"], "[redacted 3 chars]", "{shown}");
            mcp.close().await;
        }
        assert_eq!(cli_json(&env, &["list"]), list);
        assert_eq!(cli_json(&env, &["show", "tick"])["status"], "active");
        assert_eq!(cli_json(&env, &["runs"]), runs);
        assert_eq!(cli_json(&env, &["workflows", "list"]), workflows);
    });
}

#[test]
fn allowed_mutations_reach_the_database() {
    let env = TestEnv::new();
    block_on(async {
        let mcp = mutable(&env).await;
        let cwd = env.home().display().to_string();
        let created = mcp
            .ok(
                "loops_create_command",
                json!({
                    "name": "build", "cmd": "printf built", "every": "5m", "cwd": cwd,
                    "label": ["ci", "nightly"], "env": {"TOKEN": "s3cret"},
                    "description": "builds it",
                }),
            )
            .await;
        let id = created["id"].as_str().expect("an id").to_owned();
        assert_eq!(created["target"]["env"]["TOKEN"], "[redacted]", "{created}");
        assert!(!created.to_string().contains("s3cret"), "{created}");
        let shown = cli_json(&env, &["show", &id]);
        assert_eq!(shown, created);
        assert_eq!(shown["name"], "build");
        assert_eq!(shown["schedule"]["everyMs"], 300_000);
        assert_eq!(shown["target"]["cwd"], cwd.as_str());
        assert_eq!(shown["labels"], json!(["ci", "nightly"]));
        assert_eq!(shown["description"], "builds it");

        let status = |env: &TestEnv| cli_json(env, &["show", &id])["status"].clone();
        let paused = mcp.ok("loops_pause", json!({"loop": "build"})).await;
        assert_eq!(paused["status"], "paused", "{paused}");
        assert_eq!(status(&env), "paused");
        let resumed = mcp.ok("loops_resume", json!({"loop": id})).await;
        assert_eq!(resumed["status"], "active", "{resumed}");
        assert_eq!(status(&env), "active");
        let stopped = mcp.ok("loops_stop", json!({"loop": "build"})).await;
        assert_eq!(stopped["status"], "stopped", "{stopped}");
        let shown = cli_json(&env, &["show", &id]);
        assert_eq!(shown["status"], "stopped");
        assert!(shown.get("nextRunAt").is_none(), "{shown}");
        mcp.ok("loops_resume", json!({"loop": "build"})).await;
        assert_eq!(status(&env), "active");

        // A loops file, planned and then applied.
        let file = env.home().join("loops.toml");
        std::fs::write(
            &file,
            "[[loop]]\nname = \"nightly\"\nkind = \"command\"\nevery = \"1d\"\ncmd = \"true\"\n",
        )
        .expect("the loops file");
        let path = file.display().to_string();
        let plan = mcp
            .ok("loops_apply", json!({"path": path, "dryRun": true}))
            .await;
        assert_eq!(plan["steps"][0]["action"], "create", "{plan}");
        let names = |env: &TestEnv| -> Vec<String> {
            let listed = cli_json(env, &["list"]);
            let listed = listed.as_array().cloned().unwrap_or_default();
            listed
                .iter()
                .filter_map(|l| l["name"].as_str().map(str::to_owned))
                .collect()
        };
        assert_eq!(names(&env), ["build"], "a dry run writes nothing");
        let applied = mcp.ok("loops_apply", json!({"path": path})).await;
        assert_eq!(applied["dryRun"], false, "{applied}");
        assert_eq!(
            cli_json(&env, &["show", "nightly"])["schedule"]["everyMs"],
            86_400_000
        );

        let labels = |env: &TestEnv| cli_json(env, &["show", &id])["labels"].clone();
        mcp.ok(
            "loops_labels_update",
            json!({"loop": "build", "action": "add", "labels": ["extra"]}),
        )
        .await;
        assert_eq!(labels(&env), json!(["ci", "nightly", "extra"]));
        mcp.ok(
            "loops_labels_update",
            json!({"loop": "build", "action": "remove", "labels": "ci"}),
        )
        .await;
        assert_eq!(labels(&env), json!(["nightly", "extra"]));
        mcp.ok(
            "loops_labels_update",
            json!({"loop": "build", "action": "set", "labels": ["only"]}),
        )
        .await;
        assert_eq!(labels(&env), json!(["only"]));
        mcp.ok(
            "loops_labels_update",
            json!({"loop": "build", "action": "clear"}),
        )
        .await;
        assert!(
            labels(&env).as_array().is_none_or(Vec::is_empty),
            "{}",
            labels(&env)
        );
        let message = mcp
            .err(
                "loops_labels_update",
                json!({"loop": "build", "action": "rename", "labels": ["x"]}),
            )
            .await;
        assert!(message.contains("set, add, remove or clear"), "{message}");

        let run = mcp.ok("loops_run_now", json!({"loop": "build"})).await;
        assert_eq!(run["status"], "succeeded", "{run}");
        assert_eq!(run["exitCode"], 0, "{run}");
        assert_eq!(run["stdout"], "[redacted 5 chars]", "{run}");
        let shown_run = mcp
            .ok("loops_run_now", json!({"loop": id, "showOutput": true}))
            .await;
        assert_eq!(shown_run["stdout"], "built", "{shown_run}");
        let runs = cli_json(&env, &["runs", "build"]);
        let ids: Vec<&Value> = runs
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| &r["id"])
            .collect();
        assert_eq!(ids, [&shown_run["id"], &run["id"]]);
        assert!(
            runs.as_array()
                .expect("runs")
                .iter()
                .all(|r| r["status"] == "succeeded")
        );
        // Allowed mutations allow the output too.
        let with_output = mcp
            .ok("loops_runs", json!({"loop": "build", "showOutput": true}))
            .await;
        assert_eq!(
            with_output,
            cli_json(&env, &["runs", "build", "--show-output"])
        );
        assert_eq!(with_output[0]["stdout"], "built");

        let workflow_id = create_workflow(&env, &deploy());
        let looped = mcp
            .ok(
                "loops_create_workflow",
                json!({"name": "ship", "workflow": "deploy", "cron": "0 9 * * 1", "tz": "UTC"}),
            )
            .await;
        let shown = cli_json(&env, &["show", "ship"]);
        assert_eq!(shown, looped);
        assert_eq!(shown["target"]["type"], "workflow", "{shown}");
        assert_eq!(
            shown["target"]["workflowId"],
            workflow_id.as_str(),
            "{shown}"
        );
        assert_eq!(shown["schedule"]["type"], "cron", "{shown}");
        mcp.close().await;
        // build, nightly (applied) and ship.
        assert_eq!(cli_json(&env, &["list"]).as_array().map(Vec::len), Some(3));
    });
}

#[test]
fn allowed_mutations_allow_output_preflight_and_prompt_files() {
    let env = TestEnv::new();
    block_on(async {
        let prompt = env.home().join("prompt.md");
        std::fs::write(&prompt, "say hi").expect("a prompt file");
        let id = create_workflow(
            &env,
            &json!({"name": "echo", "steps": [shell_step("say", "echo hello", &[])]}),
        );
        let ran = cli_json(&env, &["workflows", "run", &id]);
        let run_id = ran["workflowRun"]["id"].as_str().expect("a run id");
        for value in ["true", "1", "yes", "ON"] {
            let mcp = Mcp::start(&env, Some(value)).await;
            let inspect = mcp
                .ok(
                    "loops_workflow_run_inspect",
                    json!({"runId": run_id, "showOutput": true}),
                )
                .await;
            assert_eq!(
                inspect,
                cli_json(&env, &["workflows", "inspect", run_id, "--show-output"])
            );
            assert!(inspect.to_string().contains("hello"), "{inspect}");
            let checked = mcp
                .ok(
                    "loops_workflow_validate",
                    json!({"workflow": deploy(), "preflight": true}),
                )
                .await;
            assert_eq!(checked["valid"], true, "{checked}");
            let prompted = mcp
                .ok(
                    "loops_workflow_validate",
                    json!({"workflow": prompt_file_workflow(&prompt.display().to_string())}),
                )
                .await;
            assert_eq!(prompted["valid"], true, "{prompted}");
            mcp.close().await;
        }
    });
}

#[test]
fn a_name_or_value_that_looks_like_a_flag_is_created_as_given() {
    let env = TestEnv::new();
    block_on(async {
        // The command line takes such a name after `--`.
        let cli = cli_json(
            &env,
            &[
                "create", "command", "--cmd", "true", "--every", "1m", "--", "-x",
            ],
        );
        assert_eq!(cli["name"], "-x");
        let mcp = mutable(&env).await;
        let weird = mcp
            .ok(
                "loops_create_command",
                json!({"name": "--weird", "cmd": "--version", "noShell": true,
                       "arg": ["-x", "--help"], "every": "1m", "description": "--all"}),
            )
            .await;
        assert_eq!(weird["name"], "--weird", "{weird}");
        assert_eq!(weird["target"]["command"], "--version", "{weird}");
        assert_eq!(weird["target"]["args"], json!(["-x", "--help"]), "{weird}");
        assert_eq!(weird["description"], "--all", "{weird}");
        let shown = mcp.ok("loops_show", json!({"loop": "--weird"})).await;
        assert_eq!(shown, cli_json(&env, &["show", "--", "--weird"]));
        let paused = mcp.ok("loops_pause", json!({"loop": "--weird"})).await;
        assert_eq!(paused["status"], "paused");
        let paused = mcp.ok("loops_pause", json!({"loop": "-x"})).await;
        assert_eq!(paused["name"], "-x");
        mcp.ok(
            "loops_labels_update",
            json!({"loop": "--weird", "action": "add", "labels": ["--all"]}),
        )
        .await;
        assert_eq!(
            cli_json(&env, &["show", "--", "--weird"])["labels"],
            json!(["--all"])
        );
        mcp.close().await;
        let names: Vec<Value> = cli_json(&env, &["list"])
            .as_array()
            .expect("a list")
            .iter()
            .map(|l| l["name"].clone())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    });
}

#[test]
fn an_env_name_that_create_refuses_is_refused_and_nothing_is_created() {
    let env = TestEnv::new();
    block_on(async {
        let mcp = mutable(&env).await;
        // What `create` says of an empty name.
        let cli = super::cli_error(
            &env,
            &[
                "create", "command", "cli", "--cmd", "true", "--every", "1h", "--env", "=v",
            ],
        );
        for (name, quoted) in [("", "\"\""), ("A=B", "\"A=B\""), ("=B", "\"=B\"")] {
            let message = mcp
                .err(
                    "loops_create_command",
                    json!({"name": "split", "cmd": "true", "every": "1h", "env": {name: "v"}}),
                )
                .await;
            assert_eq!(message, cli.replace("\"\"", quoted), "{name:?}");
        }
        // With a valid name beside it, too.
        let message = mcp
            .err(
                "loops_create_command",
                json!({"name": "split", "cmd": "true", "every": "1h",
                       "env": {"GOOD": "v", "A=B": "v"}}),
            )
            .await;
        assert!(message.contains("\"A=B\""), "{message}");
        mcp.close().await;
        assert_eq!(cli_json(&env, &["list"]), json!([]));
    });
}
