//! The tool list, the read tools against a database with a loop, a run, a
//! stored workflow and a workflow run, and errors: each result equals what
//! the CLI prints with `--json`, each error the CLI's message.

use loops_tests::TestEnv;
use serde_json::{Value, json};

use super::{ALLOW, TOOLS, block_on, cli_error, cli_json, read_only};
use crate::workflows::{create_workflow, exec_step, workflow_file};

/// The read tools (the first ten).
const READ_TOOLS: usize = 10;

/// What a test database holds: a loop with one run, a stored workflow and
/// one run of it.
pub(crate) struct Fixture {
    pub(crate) loop_id: String,
    pub(crate) run_id: String,
    pub(crate) workflow_id: String,
    pub(crate) workflow_run_id: String,
}

/// A loop `tick` (label `team`) run once, and a workflow `deploy` run once,
/// created through the CLI.
pub(crate) fn populate(env: &TestEnv) -> Fixture {
    let loop_id = env.create_command("tick", "echo hi", &["--every", "1h", "--label", "team"]);
    let run = cli_json(env, &["run-now", "tick"]);
    assert_eq!(run["status"], "succeeded", "{run}");
    let workflow_id = create_workflow(env, &deploy());
    let ran = cli_json(env, &["workflows", "run", "deploy"]);
    assert_eq!(ran["workflowRun"]["status"], "succeeded", "{ran}");
    Fixture {
        loop_id,
        run_id: run["id"].as_str().expect("a run id").to_owned(),
        workflow_id,
        workflow_run_id: ran["workflowRun"]["id"]
            .as_str()
            .expect("a workflow run id")
            .to_owned(),
    }
}

/// A workflow of two command steps.
pub(crate) fn deploy() -> Value {
    json!({
        "name": "deploy",
        "steps": [exec_step("build", "true", &[]), exec_step("test", "true", &["build"])],
    })
}

#[test]
fn tools_list_names_seventeen_tools_with_their_schemas_and_gates() {
    let env = TestEnv::new();
    block_on(async {
        let mcp = read_only(&env).await;
        let tools = super::within("tools/list", mcp.client().list_all_tools())
            .await
            .expect("tools/list answers");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, TOOLS);
        for (i, tool) in tools.iter().enumerate() {
            let schema = &tool.input_schema;
            assert_eq!(schema.get("type"), Some(&json!("object")), "{}", tool.name);
            let description = tool.description.as_deref().unwrap_or_default();
            assert!(!description.is_empty(), "{}", tool.name);
            let annotations = tool.annotations.as_ref().expect("annotations");
            let mutation = i >= READ_TOOLS;
            assert_eq!(annotations.read_only_hint, Some(!mutation), "{}", tool.name);
            if mutation {
                assert!(
                    description.contains(&format!("{ALLOW}=true")),
                    "{}: {description}",
                    tool.name
                );
            }
        }
        let properties = |name: &str| -> Vec<String> {
            let tool = tools.iter().find(|t| t.name == name).expect("listed");
            let mut keys: Vec<String> = tool
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            keys.sort();
            keys
        };
        let required = |name: &str| -> Value {
            let tool = tools.iter().find(|t| t.name == name).expect("listed");
            tool.input_schema
                .get("required")
                .cloned()
                .unwrap_or(json!([]))
        };
        assert_eq!(
            properties("loops_list"),
            ["label", "limit", "showOutput", "status"]
        );
        assert_eq!(required("loops_list"), json!([]));
        assert_eq!(properties("loops_show"), ["loop", "showOutput"]);
        assert_eq!(required("loops_show"), json!(["loop"]));
        assert_eq!(
            properties("loops_runs"),
            ["label", "limit", "loop", "showOutput", "status"]
        );
        assert_eq!(properties("loops_health"), ["since"]);
        assert_eq!(required("loops_health"), json!([]));
        assert!(properties("loops_doctor").is_empty());
        assert!(properties("loops_daemon_status").is_empty());
        assert_eq!(
            properties("loops_workflows_list"),
            ["limit", "showOutput", "status"]
        );
        assert_eq!(
            properties("loops_workflow_read"),
            ["showOutput", "workflow"]
        );
        assert_eq!(required("loops_workflow_read"), json!(["workflow"]));
        assert_eq!(
            properties("loops_workflow_run_inspect"),
            ["runId", "showOutput"]
        );
        assert_eq!(
            properties("loops_workflow_validate"),
            ["name", "preflight", "workflow"]
        );
        let create = properties("loops_create_command");
        for key in [
            "name", "cmd", "arg", "noShell", "cwd", "env", "every", "cron", "label",
        ] {
            assert!(create.iter().any(|k| k == key), "{key} in {create:?}");
        }
        let mut create_required: Vec<Value> = required("loops_create_command")
            .as_array()
            .expect("a list")
            .clone();
        create_required.sort_by_key(ToString::to_string);
        assert_eq!(create_required, [json!("cmd"), json!("name")]);
        assert!(properties("loops_create_workflow").contains(&"workflow".to_owned()));
        assert_eq!(
            properties("loops_run_now"),
            ["anywhere", "ignorePool", "loop", "showOutput"]
        );
        assert_eq!(
            properties("loops_labels_update"),
            ["action", "labels", "loop"]
        );
        mcp.close().await;
    });
}

#[test]
fn each_read_tool_returns_what_the_cli_prints_with_json() {
    let env = TestEnv::new();
    block_on(async {
        let f = populate(&env);
        let mcp = read_only(&env).await;

        let list = mcp.ok("loops_list", json!({})).await;
        assert_eq!(list, cli_json(&env, &["list"]));
        assert_eq!(list[0]["id"], f.loop_id.as_str());
        let filtered = json!({"status": "active", "label": "team", "limit": 1});
        assert_eq!(
            mcp.ok("loops_list", filtered).await,
            cli_json(
                &env,
                &[
                    "list", "--status", "active", "--label", "team", "--limit", "1"
                ]
            )
        );
        assert_eq!(
            mcp.ok("loops_list", json!({"label": ["nobody"]})).await,
            json!([])
        );

        let show = mcp.ok("loops_show", json!({"loop": f.loop_id})).await;
        assert_eq!(show, cli_json(&env, &["show", &f.loop_id]));
        assert_eq!(mcp.ok("loops_show", json!({"loop": "tick"})).await, show);

        let runs = mcp.ok("loops_runs", json!({})).await;
        assert_eq!(runs, cli_json(&env, &["runs"]));
        assert_eq!(runs[0]["id"], f.run_id.as_str());
        assert_eq!(runs[0]["stdout"], "[redacted 3 chars]", "{runs}");
        let some = json!({"loop": "tick", "status": "succeeded", "limit": "5", "label": "team"});
        assert_eq!(
            mcp.ok("loops_runs", some).await,
            cli_json(
                &env,
                &[
                    "runs",
                    "tick",
                    "--status",
                    "succeeded",
                    "--limit",
                    "5",
                    "--label",
                    "team"
                ]
            )
        );

        let doctor = mcp.ok("loops_doctor", json!({})).await;
        let ids = |doc: &Value| -> Vec<Value> {
            doc["checks"]
                .as_array()
                .expect("doctor has checks")
                .iter()
                .map(|c| c["id"].clone())
                .collect()
        };
        let cli_doctor = env.loops(["--json", "doctor"]).run().json();
        assert!(!ids(&doctor).is_empty(), "{doctor}");
        assert_eq!(ids(&doctor), ids(&cli_doctor));

        // On PostgreSQL, status measures the clock skew to the server anew
        // each time; the rest must match.
        let without_skew = |mut status: Value| {
            if let Some(object) = status.as_object_mut() {
                object.remove("clockSkewMs");
            }
            status
        };
        assert_eq!(
            without_skew(mcp.ok("loops_daemon_status", json!({})).await),
            without_skew(cli_json(&env, &["daemon", "status"]))
        );

        let workflows = mcp.ok("loops_workflows_list", json!({})).await;
        assert_eq!(workflows, cli_json(&env, &["workflows", "list"]));
        assert_eq!(workflows[0]["id"], f.workflow_id.as_str());
        assert_eq!(
            mcp.ok(
                "loops_workflows_list",
                json!({"status": "archived", "limit": 2})
            )
            .await,
            cli_json(
                &env,
                &["workflows", "list", "--status", "archived", "--limit", "2"]
            )
        );

        let read = mcp
            .ok("loops_workflow_read", json!({"workflow": "deploy"}))
            .await;
        assert_eq!(read, cli_json(&env, &["workflows", "show", "deploy"]));
        assert_eq!(
            mcp.ok("loops_workflow_read", json!({"workflow": f.workflow_id}))
                .await,
            read
        );

        let inspect = mcp
            .ok(
                "loops_workflow_run_inspect",
                json!({"runId": f.workflow_run_id}),
            )
            .await;
        assert_eq!(
            inspect,
            cli_json(&env, &["workflows", "inspect", &f.workflow_run_id])
        );
        mcp.close().await;
    });
}

/// A validation result without the instants it was made at.
fn validated(mut doc: Value) -> Value {
    let workflow = doc["workflow"].as_object_mut().expect("a workflow");
    workflow.remove("createdAt");
    workflow.remove("updatedAt");
    doc
}

#[test]
fn validate_takes_an_object_or_json_text_and_fails_as_the_cli_does() {
    let env = TestEnv::new();
    block_on(async {
        let mcp = read_only(&env).await;
        let file = workflow_file(&env, "deploy.json", &deploy());
        let cli = validated(cli_json(&env, &["workflows", "validate", &file]));
        assert_eq!(cli["valid"], true, "{cli}");

        let object = mcp
            .ok("loops_workflow_validate", json!({"workflow": deploy()}))
            .await;
        assert_eq!(validated(object), cli);
        let text = deploy().to_string();
        let from_text = mcp
            .ok("loops_workflow_validate", json!({"workflow": text}))
            .await;
        assert_eq!(validated(from_text), cli);
        let renamed = mcp
            .ok(
                "loops_workflow_validate",
                json!({"workflow": deploy(), "name": "other"}),
            )
            .await;
        assert_eq!(renamed["workflow"]["name"], "other", "{renamed}");

        for bad in [
            json!({"name": "empty", "steps": []}),
            json!({"name": "cycle", "steps": [
                exec_step("a", "true", &["b"]), exec_step("b", "true", &["a"])]}),
            json!({"name": "unknown", "steps": [exec_step("a", "true", &["nope"])]}),
        ] {
            let file = workflow_file(&env, "bad.json", &bad);
            let expected = cli_error(&env, &["workflows", "validate", &file]);
            let message = mcp
                .err("loops_workflow_validate", json!({"workflow": bad}))
                .await;
            assert_eq!(message, expected, "{bad}");
        }
        // The CLI's message, less the file it names: the body came inline.
        let file = env.home().join("broken.json");
        std::fs::write(&file, "{not json").expect("a broken file");
        let path = file.display().to_string();
        let cli = cli_error(&env, &["workflows", "validate", &path]);
        let message = mcp
            .err("loops_workflow_validate", json!({"workflow": "{not json"}))
            .await;
        assert_eq!(
            message,
            cli.replace(&format!("workflow file {path}"), "workflow")
        );
        let message = mcp
            .err("loops_workflow_validate", json!({"workflow": 42}))
            .await;
        assert!(message.contains("JSON object"), "{message}");
        mcp.close().await;
        // Validation stores nothing.
        assert_eq!(cli_json(&env, &["workflows", "list"]), json!([]));
    });
}

#[test]
fn errors_are_tool_errors_and_the_session_goes_on() {
    let env = TestEnv::new();
    block_on(async {
        let f = populate(&env);
        let mcp = read_only(&env).await;

        let message = mcp.err("loops_show", json!({"loop": "nope"})).await;
        assert!(message.starts_with("loop not found: nope"), "{message}");
        assert_eq!(message, cli_error(&env, &["show", "nope"]));

        let message = mcp
            .err("loops_list", json!({"status": "active", "colour": "red"}))
            .await;
        assert!(message.contains("no argument \"colour\""), "{message}");
        assert!(message.contains("status"), "{message}");
        let message = mcp.err("loops_doctor", json!({"verbose": true})).await;
        assert!(message.contains("no argument \"verbose\""), "{message}");

        let message = mcp.err("loops_show", json!({"loop": 7})).await;
        assert!(
            message.contains("invalid arguments for loops_show"),
            "{message}"
        );
        let message = mcp.err("loops_show", json!({})).await;
        assert!(message.contains("loop"), "{message}");
        let message = mcp.err("loops_list", json!({"limit": true})).await;
        assert!(
            message.contains("invalid arguments for loops_list"),
            "{message}"
        );

        for (tool, args, cli) in [
            (
                "loops_list",
                json!({"limit": 0}),
                vec!["list", "--limit", "0"],
            ),
            (
                "loops_runs",
                json!({"limit": "0"}),
                vec!["runs", "--limit", "0"],
            ),
            (
                "loops_list",
                json!({"status": "sleeping"}),
                vec!["list", "--status", "sleeping"],
            ),
            ("loops_runs", json!({"loop": "nope"}), vec!["runs", "nope"]),
            (
                "loops_workflow_read",
                json!({"workflow": "nope"}),
                vec!["workflows", "show", "nope"],
            ),
            (
                "loops_workflow_run_inspect",
                json!({"runId": "nope"}),
                vec!["workflows", "inspect", "nope"],
            ),
        ] {
            let message = mcp.err(tool, args.clone()).await;
            assert_eq!(message, cli_error(&env, &cli), "{tool} {args}");
        }
        let message = mcp.err("loops_list", json!({"limit": 0})).await;
        assert!(
            message.contains("--limit must be a positive integer"),
            "{message}"
        );

        let unknown = mcp.try_call("loops_explode", json!({})).await;
        let Err(rmcp::service::ServiceError::McpError(error)) = unknown else {
            panic!("an unknown tool is a protocol error, not {unknown:?}");
        };
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains("loops_explode"), "{}", error.message);
        assert!(error.message.contains("loops_list"), "{}", error.message);

        let show = mcp.ok("loops_show", json!({"loop": f.loop_id})).await;
        assert_eq!(show, cli_json(&env, &["show", &f.loop_id]));
        mcp.close().await;
    });
}

#[test]
fn a_value_that_looks_like_a_flag_is_a_value() {
    let env = TestEnv::new();
    block_on(async {
        populate(&env);
        let mcp = read_only(&env).await;
        for value in ["--help", "-h", "--version", "--all", "-x", "--", "--json"] {
            let message = mcp.err("loops_show", json!({"loop": value})).await;
            assert!(
                message.starts_with(&format!("loop not found: {value}")),
                "{value}: {message}"
            );
            assert_eq!(message, cli_error(&env, &["show", "--", value]));
            let message = mcp.err("loops_runs", json!({"loop": value})).await;
            assert_eq!(message, cli_error(&env, &["runs", "--", value]));
            let message = mcp
                .err("loops_workflow_read", json!({"workflow": value}))
                .await;
            assert_eq!(
                message,
                cli_error(&env, &["workflows", "show", "--", value])
            );
            let message = mcp
                .err("loops_workflow_run_inspect", json!({"runId": value}))
                .await;
            assert_eq!(
                message,
                cli_error(&env, &["workflows", "inspect", "--", value])
            );
        }
        let message = mcp.err("loops_list", json!({"status": "--help"})).await;
        assert_eq!(message, cli_error(&env, &["list", "--status=--help"]));
        // A flag smuggled into a filter value stays that value: the result is
        // the CLI's for `--label=--status=paused`, whichever it is.
        let reply = mcp
            .call("loops_list", json!({"label": ["--status=paused"]}))
            .await;
        let cli = env.run(&["--json", "list", "--label=--status=paused"]);
        if cli.status.success() {
            let printed: Value = serde_json::from_slice(&cli.stdout).expect("JSON");
            assert_eq!(reply.json(), printed);
        } else {
            let stderr = String::from_utf8_lossy(&cli.stderr);
            assert_eq!(format!("error: {}\n", reply.error()), stderr);
        }
        mcp.close().await;
    });
}
