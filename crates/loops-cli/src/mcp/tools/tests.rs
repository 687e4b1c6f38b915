//! Unit tests of the MCP tools' requests and gates.

use super::*;

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

#[test]
fn values_that_look_like_flags_stay_values() {
    let p: CreateCommandParams = parse(
        "t",
        &object(serde_json::json!({
            "name": "--json",
            "cmd": "--no-shell",
            "arg": ["--cwd", "-x"],
            "label": "--label",
            "every": 300000,
            "attempts": "3",
            "env": {"K": "--v=1"}
        })),
    )
    .unwrap();
    let Command::Create(Create::Command(c)) = create_command_request(p).unwrap() else {
        panic!("not a create command");
    };
    assert_eq!(c.options.name, "--json");
    assert_eq!(c.command, "--no-shell");
    assert!(!c.no_shell);
    assert_eq!(c.args, ["--cwd", "-x"]);
    assert_eq!(c.options.policy.labels, ["--label"]);
    assert_eq!(c.options.every.as_deref(), Some("300000ms"));
    assert_eq!(c.options.attempts, "3");
    assert_eq!(c.env, ["K=--v=1"]);
    assert!(c.cwd.is_none());
}

#[test]
fn a_relative_watch_path_is_refused_and_an_absolute_one_kept() {
    let request = |watch: Value| {
        let p: CreateCommandParams = parse(
            "t",
            &object(serde_json::json!({"name": "n", "cmd": "true", "watch": watch})),
        )
        .unwrap();
        create_command_request(p)
    };
    let err = request(serde_json::json!(["/srv/repo", "repo/src"])).unwrap_err();
    assert!(
        err.to_string().contains("\"repo/src\" is not absolute"),
        "{err}"
    );
    let Command::Create(Create::Command(c)) = request(serde_json::json!(["/srv/repo"])).unwrap()
    else {
        panic!("not a create command");
    };
    assert_eq!(c.options.policy.watch, ["/srv/repo"]);
    // An empty path is no path (as `--watch ''` on the command line).
    assert!(request(serde_json::json!([""])).is_ok());
}

#[test]
fn what_a_create_tool_leaves_out_takes_the_command_lines_default() {
    use clap::Parser;
    let p: CreateCommandParams = parse(
        "t",
        &object(serde_json::json!({"name": "n", "cmd": "true", "every": "5m"})),
    )
    .unwrap();
    let Command::Create(Create::Command(built)) = create_command_request(p).unwrap() else {
        panic!("not a create command");
    };
    let cli = crate::args::Cli::try_parse_from([
        "loops", "create", "command", "n", "--cmd", "true", "--every", "5m",
    ])
    .unwrap();
    let Command::Create(Create::Command(parsed)) = cli.command else {
        panic!("parsed as {:?}", cli.command);
    };
    assert_eq!(format!("{built:?}"), format!("{parsed:?}"));
}

#[test]
fn labels_take_their_action_and_refuse_a_wrong_one() {
    let labels = |v: Value| labels_request(parse("t", &object(v)).unwrap());
    let Command::Labels(LabelsCommand::Add(a)) =
        labels(serde_json::json!({"loop": "--x", "action": " add ", "labels": "-l"})).unwrap()
    else {
        panic!("not labels add");
    };
    assert_eq!(
        (a.target.as_str(), a.labels),
        ("--x", vec!["-l".to_owned()])
    );
    let err = labels(serde_json::json!({"loop": "x", "action": "drop"})).unwrap_err();
    assert_eq!(
        err.to_string(),
        "action must be set, add, remove or clear, not \"drop\""
    );
}

#[test]
fn unknown_and_mistyped_arguments_are_refused_before_anything_runs() {
    let list = find("loops_list").unwrap();
    let err = call(
        &Context::default(),
        list,
        &object(serde_json::json!({"limt": 5})),
        Access::ReadOnly,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("no argument \"limt\"") && err.contains("limit"),
        "{err}"
    );
    let err = call(
        &Context::default(),
        find("loops_show").unwrap(),
        &object(serde_json::json!({"loop": 5})),
        Access::ReadOnly,
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("invalid arguments for loops_show"), "{err}");
    let err = call(
        &Context::default(),
        find("loops_pause").unwrap(),
        &object(serde_json::json!({"loop": "x"})),
        Access::ReadOnly,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("LOOPS_MCP_ALLOW_MUTATIONS=true"), "{err}");
}
