//! Table-driven tests of input validation (SPEC §6.1, §6.2, §7.3, §10 item
//! 72) through the public API only, plus properties: no input panics, and the
//! execution order respects every dependency.

mod validate {
    use loops_core::{
        Account, AgentProvider, AgentTarget, CommandTarget, NewLoop, ProcessTarget, Schedule, Step,
        Target, WorkflowId, WorkflowTarget, read_workflow_text, validate_account, validate_name,
        validate_new_loop, validate_process_target, validate_target, workflow_execution_order,
        workflow_from_json, workflow_warnings,
    };
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// A command target running `command` without a shell.
    fn cmd(command: &str) -> Value {
        json!({"type": "command", "command": command})
    }

    /// A step `id` running `true`, depending on `deps`.
    fn step(id: &str, deps: &[&str]) -> Value {
        json!({"id": id, "dependsOn": deps, "target": cmd("true")})
    }

    /// A workflow named `w` with `steps`.
    fn wf(steps: Value) -> Value {
        json!({"name": "w", "steps": steps})
    }

    /// A workflow named `w` with one step `a` whose target is `target`.
    fn with_target(target: Value) -> Value {
        wf(json!([{"id": "a", "target": target}]))
    }

    /// A workflow named `w` with one step `a` plus `extra` step keys.
    fn with_step_keys(extra: Value) -> Value {
        let mut s = json!({"id": "a", "target": cmd("true")});
        for (k, v) in extra.as_object().into_iter().flatten() {
            s[k] = v.clone();
        }
        wf(json!([s]))
    }

    /// The one helper that touches the API: `input` must be rejected with
    /// exactly `expected`.
    fn check(input: &Value, expected: &str) {
        match workflow_from_json(input, None) {
            Ok(w) => panic!("accepted {input}: {w:?}"),
            Err(e) => assert_eq!(e.to_string(), expected, "input: {input}"),
        }
    }

    fn ids<'a>(steps: impl IntoIterator<Item = &'a Step>) -> Vec<&'a str> {
        steps.into_iter().map(|s| s.id.as_str()).collect()
    }

    const SPACES: &str = "must be an executable without spaces when shell is false; put flags in \
                          args or set shell true";

    #[test]
    fn spec_6_1_messages_in_order() {
        let t0 = "workflow.steps[0].target";
        let cases: Vec<(Value, String)> = vec![
            // 1
            (json!([]), "workflow file must be an object".into()),
            (json!(null), "workflow file must be an object".into()),
            (json!("w"), "workflow file must be an object".into()),
            // 2
            (
                json!({"steps": []}),
                "workflow.name must be a non-empty string".into(),
            ),
            (
                json!({"name": " \t", "steps": []}),
                "workflow.name must be a non-empty string".into(),
            ),
            (
                json!({"name": 7, "steps": []}),
                "workflow.name must be a non-empty string".into(),
            ),
            (
                json!({"name": "\u{3000}\u{feff}"}),
                "workflow.name must be a non-empty string".into(),
            ),
            // 3
            (
                json!({"name": "w"}),
                "workflow.steps must be an array".into(),
            ),
            (
                json!({"name": "w", "steps": {"a": 1}}),
                "workflow.steps must be an array".into(),
            ),
            // 4
            (
                wf(json!([])),
                "workflow.steps must contain at least one step".into(),
            ),
            // 5
            (wf(json!([1])), "workflow.steps[0] must be an object".into()),
            (
                wf(json!([step("a", &[]), "b"])),
                "workflow.steps[1] must be an object".into(),
            ),
            // 6
            (
                wf(json!([{"target": cmd("true")}])),
                "workflow.steps[0].id must be a non-empty string".into(),
            ),
            (
                wf(json!([{"id": " ", "target": cmd("true")}])),
                "workflow.steps[0].id must be a non-empty string".into(),
            ),
            (
                wf(json!([{"id": 3, "target": cmd("true")}])),
                "workflow.steps[0].id must be a non-empty string".into(),
            ),
            // 7
            (
                wf(json!([step("a", &[]), step("a", &[])])),
                "duplicate workflow step id: a".into(),
            ),
            // 8
            (wf(json!([{"id": "a"}])), format!("{t0} must be an object")),
            (
                with_target(json!("true")),
                format!("{t0} must be an object"),
            ),
            // 9
            (
                with_target(json!({"type": "command"})),
                format!("{t0}.command must be a non-empty string"),
            ),
            (
                with_target(cmd("  ")),
                format!("{t0}.command must be a non-empty string"),
            ),
            // 10, and SPEC §10 item 72
            (
                with_target(cmd("git status --short")),
                format!("{t0}.command {SPACES}"),
            ),
            (
                with_target(json!({"type": "command", "command": "git status", "shell": false})),
                format!("{t0}.command {SPACES}"),
            ),
            (
                with_target(json!({"type": "command", "command": "git status", "shell": "true"})),
                format!("{t0}.command {SPACES}"),
            ),
            (
                with_target(cmd("git\u{a0}status")),
                format!("{t0}.command {SPACES}"),
            ),
            // 11
            (
                with_target(json!({"type": "agent", "prompt": "hi"})),
                format!("{t0}.provider must be a non-empty string"),
            ),
            (
                with_target(json!({"type": "agent", "provider": "claude"})),
                format!("{t0}.prompt must be a non-empty string"),
            ),
            (
                with_target(json!({"type": "agent", "provider": "gpt", "prompt": ""})),
                format!("{t0}.prompt must be a non-empty string"),
            ),
            // 12
            (
                with_target(json!({"type": "agent", "provider": "gpt", "prompt": "hi"})),
                format!(
                    "{t0}.provider must be one of claude, cursor, codewith, aicopilot, opencode, codex"
                ),
            ),
            (
                with_target(json!({"type": "agent", "provider": "Claude", "prompt": "hi"})),
                format!(
                    "{t0}.provider must be one of claude, cursor, codewith, aicopilot, opencode, codex"
                ),
            ),
            // 13
            (
                with_target(json!({"command": "true"})),
                format!("{t0}.type must be command or agent"),
            ),
            (
                with_target(json!({"type": "workflow", "workflowId": "0123456789ab"})),
                format!("{t0}.type must be command or agent"),
            ),
            // 14
            (
                wf(json!([step("a", &["zz"])])),
                "step a depends on missing step zz".into(),
            ),
            (
                wf(json!([step("a", &[]), step("b", &["a", "A"])])),
                "step b depends on missing step A".into(),
            ),
            // 15
            (
                wf(json!([step("a", &["a"])])),
                "step a cannot depend on itself".into(),
            ),
            // 16, with the steps on the cycle named
            (
                wf(json!([step("a", &["b"]), step("b", &["a"])])),
                "workflow dependency cycle includes step a: a -> b -> a".into(),
            ),
            (
                wf(json!([
                    step("x", &["a"]),
                    step("a", &["b"]),
                    step("b", &["c"]),
                    step("c", &["a"])
                ])),
                "workflow dependency cycle includes step a: a -> b -> c -> a".into(),
            ),
            (
                wf(json!([
                    step("p", &[]),
                    step("q", &["p", "r"]),
                    step("r", &["q"])
                ])),
                "workflow dependency cycle includes step q: q -> r -> q".into(),
            ),
        ];
        for (input, expected) in &cases {
            check(input, expected);
        }
    }

    #[test]
    fn spec_checks_come_before_the_stricter_ones() {
        let bad_env = json!({"id": "a", "target": {"type": "command", "command": "true", "env": {"1X": "v"}}});
        // A later step's SPEC failure wins over an earlier step's new-check failure.
        check(
            &wf(json!([bad_env, 5])),
            "workflow.steps[1] must be an object",
        );
        // So does a cycle.
        let bad_timeout =
            json!({"id": "a", "timeoutMs": 0, "dependsOn": ["b"], "target": cmd("true")});
        check(
            &wf(json!([bad_timeout, step("b", &["a"])])),
            "workflow dependency cycle includes step a: a -> b -> a",
        );
        // A bad version is reported only once the SPEC checks pass.
        check(
            &json!({"name": "w", "version": -1, "steps": []}),
            "workflow.steps must contain at least one step",
        );
    }

    #[test]
    fn dependencies_are_checked_step_by_step_in_listed_order() {
        // Step a's own self-dependency is listed before its missing one.
        check(
            &wf(json!([step("a", &["a", "zz"])])),
            "step a cannot depend on itself",
        );
        check(
            &wf(json!([step("a", &["zz", "a"])])),
            "step a depends on missing step zz",
        );
        // An earlier step's self-dependency wins over a later step's missing one.
        check(
            &wf(json!([step("a", &["a"]), step("b", &["zz"])])),
            "step a cannot depend on itself",
        );
    }

    #[test]
    fn stricter_checks_name_the_path() {
        let t0 = "workflow.steps[0].target";
        let l0 = "workflow.steps[0]";
        let agent = |extra: Value| {
            let mut t = json!({"type": "agent", "provider": "claude", "prompt": "hi"});
            for (k, v) in extra.as_object().unwrap() {
                t[k] = v.clone();
            }
            with_target(t)
        };
        let command = |extra: Value| {
            let mut t = cmd("true");
            for (k, v) in extra.as_object().unwrap() {
                t[k] = v.clone();
            }
            with_target(t)
        };
        let cases: Vec<(Value, String)> = vec![
            (with_step_keys(json!({"dependsOn": "b"})), format!("{l0}.dependsOn must be an array of step ids, for example [\"build\"]")),
            (with_step_keys(json!({"dependsOn": [1]})), format!("{l0}.dependsOn must be an array of step ids; every entry must be a string")),
            (with_step_keys(json!({"continueOnFailure": "yes"})), format!("{l0}.continueOnFailure must be true or false")),
            (with_step_keys(json!({"timeoutMs": "5s"})), format!("{l0}.timeoutMs must be a positive whole number of milliseconds, for example 60000")),
            (with_step_keys(json!({"timeoutMs": 1.5})), format!("{l0}.timeoutMs must be a positive whole number of milliseconds, for example 60000")),
            (with_step_keys(json!({"timeoutMs": -5})), format!("{l0}.timeoutMs must be a positive whole number of milliseconds, for example 60000")),
            (with_step_keys(json!({"timeoutMs": 0})), format!("{l0}.timeoutMs must be greater than zero")),
            (with_step_keys(json!({"name": 3})), format!("{l0}.name must be a string")),
            (with_step_keys(json!({"description": []})), format!("{l0}.description must be a string")),
            (with_step_keys(json!({"account": "work"})), format!("{l0}.account must be an object with a profile and an optional tool, for example {{\"profile\": \"work\", \"tool\": \"claude\"}}")),
            (with_step_keys(json!({"account": {}})), format!("{l0}.account.profile must be a non-empty string")),
            (with_step_keys(json!({"account": {"profile": "-w"}})), format!("{l0}.account.profile must not start with \"-\", got \"-w\": it is passed as an argument to `accounts env <profile> --tool <tool>`, which would read it as a flag")),
            (with_step_keys(json!({"account": {"profile": "w", "tool": 1}})), format!("{l0}.account.tool must be a string")),
            (wf(json!([{"id": "a\nb", "target": cmd("true")}])), format!("{l0}.id must not contain control characters such as newlines or tabs")),
            (command(json!({"timeoutMs": 0})), format!("{t0}.timeoutMs must be greater than zero")),
            (command(json!({"args": "-v"})), format!("{t0}.args must be an array of strings, for example [\"--verbose\"]")),
            (command(json!({"args": ["-v", 2]})), format!("{t0}.args[1] must be a string")),
            (command(json!({"args": ["a\u{0}b"]})), format!("{t0}.args[0] must not contain a NUL character; processes cannot receive NUL in arguments, paths or environment values")),
            (command(json!({"cwd": ""})), format!("{t0}.cwd must be a non-empty string when set; omit it to run in the current directory")),
            (command(json!({"cwd": 1})), format!("{t0}.cwd must be a string")),
            (command(json!({"shell": "yes", "command": "true"})), format!("{t0}.shell must be true or false")),
            (command(json!({"env": ["A=1"]})), format!("{t0}.env must be an object of string values, for example {{\"DEBUG\": \"1\"}}")),
            (command(json!({"env": {"DEBUG": 1}})), format!("{t0}.env value of \"DEBUG\" must be a string; quote numbers and booleans")),
            (command(json!({"env": {"1X": "v"}})), format!("{t0}.env has an invalid variable name \"1X\"; names must match [A-Za-z_][A-Za-z0-9_]*")),
            (command(json!({"env": {"A-B": "v"}})), format!("{t0}.env has an invalid variable name \"A-B\"; names must match [A-Za-z_][A-Za-z0-9_]*")),
            (command(json!({"env": {"OK": "a\u{0}"}})), format!("{t0}.env.OK must not contain a NUL character; processes cannot receive NUL in arguments, paths or environment values")),
            (command(json!({"account": {"profile": "my work"}})), format!("{t0}.account.profile must not contain whitespace or control characters, got \"my work\"; use the bare name that `accounts env` expects")),
            (agent(json!({"prompt": "--dangerously-skip-permissions"})), format!("{t0}.prompt must not begin with \"-\": the agent would read it as an option, not as its prompt; start it with another character, for example \"Task: --fix\" or \" --fix\" with a leading space")),
            (agent(json!({"prompt": "-p"})), format!("{t0}.prompt must not begin with \"-\": the agent would read it as an option, not as its prompt; start it with another character, for example \"Task: --fix\" or \" --fix\" with a leading space")),
            (agent(json!({"timeoutMs": 3_153_600_000_001u64})), format!("{t0}.timeoutMs must be at most 3153600000000 (100 years), got 3153600000001; use a shorter timeout")),
            (command(json!({"timeoutMs": u64::MAX})), format!("{t0}.timeoutMs must be at most 3153600000000 (100 years), got 18446744073709551615; use a shorter timeout")),
            (with_step_keys(json!({"timeoutMs": 3_153_600_000_001u64})), format!("{l0}.timeoutMs must be at most 3153600000000 (100 years), got 3153600000001; use a shorter timeout")),
            // Issue 25 item 8: an option's value that the agent would read as an option.
            (agent(json!({"model": "--dangerously-bypass-approvals-and-sandbox"})), format!("{t0}.model must not begin with \"-\": the agent would read it as an option, not as the value of --model; give the model's name, for example \"sonnet\"")),
            (agent(json!({"agent": "-p"})), format!("{t0}.agent must not begin with \"-\": the agent would read it as an option, not as the value of --agent; give the agent's name")),
            (agent(json!({"cwd": "--help"})), format!("{t0}.cwd must not begin with \"-\": the agent would read it as an option, not as the value of --cd or --dir; give an absolute path")),
            (agent(json!({"model": " "})), format!("{t0}.model must be a non-empty string when set; omit it to use the provider's default model")),
            (agent(json!({"agent": ""})), format!("{t0}.agent must be a non-empty string when set; omit it to use the provider's default agent")),
            (agent(json!({"extraArgs": [true]})), format!("{t0}.extraArgs[0] must be a string")),
            (agent(json!({"configIsolation": "strict"})), format!("{t0}.configIsolation must be safe or none")),
            // Issue 27: 0.5.11's messages (agents-0.5.11.md §12.2); `null` is valid.
            (agent(json!({"timeoutMs": 0})), format!("{t0}.timeoutMs must be a positive integer or null for unlimited")),
            (agent(json!({"timeoutMs": "5s"})), format!("{t0}.timeoutMs must be a positive integer or null for unlimited")),
            (agent(json!({"timeoutMs": -1})), format!("{t0}.timeoutMs must be a positive integer or null for unlimited")),
            (agent(json!({"idleTimeoutMs": 0})), format!("{t0}.idleTimeoutMs must be a positive integer")),
            (agent(json!({"idleTimeoutMs": 2.5})), format!("{t0}.idleTimeoutMs must be a positive integer")),
            (agent(json!({"idleTimeoutMs": "2s"})), format!("{t0}.idleTimeoutMs must be a positive integer")),
            (agent(json!({"idleTimeoutMs": 3_153_600_000_001u64})), format!("{t0}.idleTimeoutMs must be at most 3153600000000 (100 years), got 3153600000001; use a shorter idle timeout")),
            (agent(json!({"account": {"profile": "w", "tool": "-t"}})), format!("{t0}.account.tool must not start with \"-\", got \"-t\": it is passed as an argument to `accounts env <profile> --tool <tool>`, which would read it as a flag")),
            (json!({"name": "w", "version": 1.5, "steps": [step("a", &[])]}), "workflow.version must be a whole number from 1 to 4294967295, got 1.5; omit it to use 1".into()),
            (json!({"name": "w", "version": -1, "steps": [step("a", &[])]}), "workflow.version must be a whole number from 1 to 4294967295, got -1; omit it to use 1".into()),
            (json!({"name": "w", "version": 0, "steps": [step("a", &[])]}), "workflow.version must be a whole number from 1 to 4294967295, got 0; omit it to use 1".into()),
            (json!({"name": "w", "version": 4294967296u64, "steps": [step("a", &[])]}), "workflow.version must be a whole number from 1 to 4294967295, got 4294967296; omit it to use 1".into()),
            (json!({"name": "w", "version": 1e300, "steps": [step("a", &[])]}), "workflow.version must be a whole number from 1 to 4294967295, got 1e+300; omit it to use 1".into()),
            (json!({"name": "a\u{7}b", "steps": [step("a", &[])]}), "workflow.name must not contain control characters such as newlines or tabs; use a single line of text".into()),
            (json!({"name": "n".repeat(201), "steps": [step("a", &[])]}), "workflow.name must be at most 200 characters, got 201; use a shorter name and put details in the description".into()),
        ];
        for (input, expected) in &cases {
            check(input, expected);
        }
    }

    #[test]
    fn error_field_names_the_path() {
        let err = workflow_from_json(&with_step_keys(json!({"dependsOn": "b"})), None).unwrap_err();
        assert_eq!(err.field, "workflow.steps[0].dependsOn");
        let err =
            workflow_from_json(&wf(json!([step("a", &[]), step("b", &["b"])])), None).unwrap_err();
        assert_eq!(err.field, "workflow.steps[1].dependsOn");
        let err = workflow_from_json(&with_target(cmd("git status")), None).unwrap_err();
        assert_eq!(err.field, "workflow.steps[0].target.command");
    }

    #[test]
    fn shell_true_allows_spaces() {
        let w = workflow_from_json(
            &with_target(
                json!({"type": "command", "command": "git status --short", "shell": true}),
            ),
            None,
        )
        .unwrap();
        let ProcessTarget::Command(c) = &w.steps[0].target else {
            panic!("not a command")
        };
        assert!(c.is_shell());
    }

    #[test]
    fn max_parallel_is_a_whole_number_from_1_to_64() {
        let with = |v: Value| json!({"name": "w", "maxParallel": v, "steps": [step("a", &[])]});
        let read = |v: Value| workflow_from_json(&with(v), None).map(|w| w.max_parallel);
        assert_eq!(read(json!(1)).unwrap(), Some(1));
        assert_eq!(read(json!(64)).unwrap(), Some(64));
        assert_eq!(read(json!(8.0)).unwrap(), Some(8));
        assert_eq!(read(Value::Null).unwrap(), None);
        let plain = json!({"name": "w", "steps": [step("a", &[])]});
        assert_eq!(workflow_from_json(&plain, None).unwrap().max_parallel, None);
        for bad in [
            json!(0),
            json!(65),
            json!(1.5),
            json!(-1),
            json!("4"),
            json!(true),
        ] {
            check(
                &with(bad.clone()),
                &format!(
                    "workflow.maxParallel must be a whole number from 1 to 64, got {bad}; omit it \
                     to run steps one at a time"
                ),
            );
        }
        // The SPEC checks still come first.
        check(
            &json!({"name": "w", "maxParallel": 0, "steps": []}),
            "workflow.steps must contain at least one step",
        );
    }

    #[test]
    fn name_override_description_and_version() {
        let file =
            json!({"name": " file ", "description": "d", "version": 3, "steps": [step("a", &[])]});
        let w = workflow_from_json(&file, None).unwrap();
        assert_eq!(
            (w.name.as_str(), w.description.as_deref(), w.version),
            ("file", Some("d"), 3)
        );

        let w = workflow_from_json(&file, Some("  cli name\u{3000}")).unwrap();
        assert_eq!(w.name, "cli name");
        // `--name` wins even over a missing or bad file name.
        let nameless = json!({"name": 5, "steps": [step("a", &[])]});
        assert_eq!(workflow_from_json(&nameless, Some("x")).unwrap().name, "x");
        // An empty `--name` is an empty name, as `??` keeps "".
        let err = workflow_from_json(&file, Some("")).unwrap_err();
        assert_eq!(err.to_string(), "workflow.name must be a non-empty string");

        // Non-string descriptions and non-number versions are ignored.
        let file =
            json!({"name": "w", "description": 1, "version": "2", "steps": [step("a", &[])]});
        let w = workflow_from_json(&file, None).unwrap();
        assert_eq!((w.description, w.version), (None, 1));
        let file = json!({"name": "w", "version": 2.0, "steps": [step("a", &[])]});
        assert_eq!(workflow_from_json(&file, None).unwrap().version, 2);
    }

    #[test]
    fn steps_are_normalized_and_unknown_keys_kept() {
        let file = wf(json!([
            {"id": "a", "target": cmd("true"), "x-note": {"deep": [1, 2]}, "dependsOn": null},
            {
                "id": "b", "name": "B", "description": "second", "dependsOn": ["a"],
                "continueOnFailure": true, "timeoutMs": 50, "account": {"profile": "work"},
                "target": {
                    "type": "agent", "provider": "codex", "prompt": "hi", "model": "m",
                    "extraArgs": ["--x"], "configIsolation": "none", "timeoutMs": 60000.0,
                    "cwd": "/tmp", "unknownTargetKey": 1
                }
            },
        ]));
        let w = workflow_from_json(&file, None).unwrap();
        let a = &w.steps[0];
        assert_eq!((a.depends_on.len(), a.continue_on_failure), (0, false));
        assert_eq!(a.extra.get("x-note"), Some(&json!({"deep": [1, 2]})));
        let out = serde_json::to_value(a).unwrap();
        assert_eq!(out["dependsOn"], json!([]));
        assert_eq!(out["continueOnFailure"], json!(false));

        let b = &w.steps[1];
        assert_eq!(b.name.as_deref(), Some("B"));
        assert_eq!(b.depends_on, ["a"]);
        assert!(b.continue_on_failure);
        assert_eq!(b.timeout_ms, Some(50));
        assert_eq!(
            b.account,
            Some(Account {
                profile: "work".into(),
                tool: None
            })
        );
        assert!(b.extra.is_empty());
        let ProcessTarget::Agent(t) = &b.target else {
            panic!("not an agent")
        };
        assert_eq!(t.provider, AgentProvider::Codex);
        assert_eq!(t.timeout_ms, loops_core::WallClock::Ms(60000));
        assert_eq!(t.extra_args.as_deref(), Some(&["--x".to_owned()][..]));
        // A stored step reads back as the same step.
        let back: Step = serde_json::from_value(serde_json::to_value(b).unwrap()).unwrap();
        assert_eq!(&back, b);
    }

    /// Issue 27: an agent step's `timeoutMs: null` is "no wall clock", kept
    /// apart from an absent one, and `idleTimeoutMs` is read.
    #[test]
    fn agent_timers_of_a_step_are_read_and_kept() {
        use loops_core::WallClock;
        let agent = |extra: Value| {
            let mut t = json!({"type": "agent", "provider": "claude", "prompt": "hi"});
            for (k, v) in extra.as_object().unwrap() {
                t[k] = v.clone();
            }
            t
        };
        let file = wf(json!([
            {"id": "a", "target": agent(json!({}))},
            {"id": "b", "target": agent(json!({"timeoutMs": null, "idleTimeoutMs": null}))},
            {"id": "c", "target": agent(json!({"timeoutMs": 5, "idleTimeoutMs": 2000}))},
        ]));
        let w = workflow_from_json(&file, None).unwrap();
        let timers: Vec<_> = w
            .steps
            .iter()
            .map(|s| match &s.target {
                ProcessTarget::Agent(t) => (t.timeout_ms, t.idle_timeout_ms),
                ProcessTarget::Command(_) => panic!("not an agent"),
            })
            .collect();
        assert_eq!(
            timers,
            [
                (WallClock::Unset, None),
                (WallClock::Unlimited, None),
                (WallClock::Ms(5), Some(2000)),
            ]
        );
        let stored = serde_json::to_value(&w.steps[1].target).unwrap();
        assert_eq!(stored["timeoutMs"], Value::Null);
        assert!(
            serde_json::to_value(&w.steps[0].target)
                .unwrap()
                .get("timeoutMs")
                .is_none()
        );
        for step in &w.steps {
            let back: Step = serde_json::from_value(serde_json::to_value(step).unwrap()).unwrap();
            assert_eq!(&back, step);
        }
    }

    #[test]
    fn unicode_names_and_ids() {
        let file = json!({"name": "  夜間ビルド 🌙 ", "steps": [
            {"id": "ステップ2", "dependsOn": ["ステップ1"], "target": cmd("true")},
            {"id": "ステップ1", "target": {"type": "agent", "provider": "claude", "prompt": "やあ 👋"}},
        ]});
        let w = workflow_from_json(&file, None).unwrap();
        assert_eq!(w.name, "夜間ビルド 🌙");
        assert_eq!(
            ids(workflow_execution_order(&w.steps)),
            ["ステップ1", "ステップ2"]
        );
        // The limit counts characters, not bytes.
        assert!(validate_name(&"🌙".repeat(200), "name").is_ok());
        assert_eq!(
            validate_name(&"🌙".repeat(201), "name")
                .unwrap_err()
                .to_string(),
            "name must be at most 200 characters, got 201; use a shorter name and put details in \
             the description"
        );
        check(
            &wf(json!([step("é", &["e\u{301}"])])),
            "step é depends on missing step e\u{301}",
        );
    }

    #[test]
    fn deeply_nested_extra_values_are_kept() {
        // serde_json's parser stops at 128 levels; go close to that.
        let depth = 120;
        let text = format!(
            r#"{{"name":"w","steps":[{{"id":"a","target":{{"type":"command","command":"true"}},"deep":{}1{}}}]}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let file: Value = serde_json::from_str(&text).unwrap();
        let w = workflow_from_json(&file, None).unwrap();
        assert_eq!(w.steps[0].extra.get("deep"), file["steps"][0].get("deep"));

        // A value built in code is not limited by the parser. 500 levels still
        // work; far deeper values overflow serde_json's own recursive `Drop`
        // in debug builds, before validation is ever reached.
        let mut deep = json!(1);
        for _ in 0..500 {
            deep = json!({"x": deep});
        }
        let mut file = with_step_keys(json!({}));
        file["steps"][0]["deep"] = deep;
        let w = workflow_from_json(&file, None).unwrap();
        assert!(w.steps[0].extra.contains_key("deep"));
        // Deep values in known fields are type errors, not crashes.
        let deep = file["steps"][0]["deep"].clone();
        file["steps"][0]["dependsOn"] = deep;
        check(
            &file,
            "workflow.steps[0].dependsOn must be an array of step ids, for example [\"build\"]",
        );
    }

    #[test]
    fn execution_order_spec_example() {
        // SPEC §6.2: [c→b, a, b→a] runs a, b, c.
        let file = wf(json!([
            step("c", &["b"]),
            step("a", &[]),
            step("b", &["a"])
        ]));
        let w = workflow_from_json(&file, None).unwrap();
        assert_eq!(ids(workflow_execution_order(&w.steps)), ["a", "b", "c"]);
        // Dependencies are visited in listed order.
        let file = wf(json!([
            step("d", &["b", "a"]),
            step("a", &[]),
            step("b", &[])
        ]));
        let w = workflow_from_json(&file, None).unwrap();
        assert_eq!(ids(workflow_execution_order(&w.steps)), ["b", "a", "d"]);
    }

    #[test]
    fn execution_order_never_loops_on_bad_input() {
        let raw = |id: &str, deps: &[&str]| Step {
            id: id.into(),
            name: None,
            description: None,
            target: ProcessTarget::Command(CommandTarget::new("true")),
            depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
            continue_on_failure: false,
            timeout_ms: None,
            account: None,
            pool: None,
            extra: Default::default(),
        };
        let steps = [
            raw("a", &["b"]),
            raw("b", &["a", "zz"]),
            raw("a", &["a"]),
            raw("c", &["c"]),
        ];
        let order = workflow_execution_order(&steps);
        assert_eq!(ids(order), ["b", "a", "a", "c"]);
        assert!(workflow_execution_order(&[]).is_empty());
    }

    /// Steps `s0 … s{n-1}` where each depends on the next, so the depth-first
    /// walk from `s0` is `n` deep; with `close`, the last depends on `s0`.
    fn chain(n: usize, close: bool) -> Value {
        let steps: Vec<Value> = (0..n)
            .map(|i| {
                let next = if i + 1 < n {
                    Some(i + 1)
                } else if close {
                    Some(0)
                } else {
                    None
                };
                let deps: Vec<String> = next.into_iter().map(|j| format!("s{j}")).collect();
                json!({"id": format!("s{i}"), "dependsOn": deps, "target": cmd("true")})
            })
            .collect();
        wf(Value::Array(steps))
    }

    #[test]
    fn ten_thousand_step_chain_does_not_overflow() {
        let n = 10_000;
        let w = workflow_from_json(&chain(n, false), None).unwrap();
        let order = ids(workflow_execution_order(&w.steps));
        let expected: Vec<String> = (0..n).rev().map(|i| format!("s{i}")).collect();
        assert_eq!(order, expected);

        let err = workflow_from_json(&chain(n, true), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("workflow dependency cycle includes step s0: s0 -> s1 -> "),
            "{err}"
        );
        assert!(err.ends_with(" -> s9999 -> s0"), "{err}");
        assert_eq!(err.matches(" -> ").count(), n);
    }

    #[test]
    fn new_loop_options_and_target() {
        let every = Schedule::Interval {
            every_ms: 60_000,
            anchor: None,
        };
        let command = |c: CommandTarget| NewLoop::new("nightly", every.clone(), Target::Command(c));
        assert!(validate_new_loop(&command(CommandTarget::new("true"))).is_ok());

        let mut bad = Vec::new();
        let mut l = command(CommandTarget::new("true"));
        l.catch_up_limit = 0;
        bad.push((l, "--catch-up-limit must be a positive integer"));
        let mut l = command(CommandTarget::new("true"));
        l.max_attempts = 0;
        bad.push((l, "--attempts must be a positive integer"));
        let mut l = command(CommandTarget::new("true"));
        l.retry_delay_ms = 0;
        bad.push((l, "--retry-delay must be greater than zero"));
        let mut l = command(CommandTarget::new("true"));
        l.lease_ms = 0;
        bad.push((l, "--lease must be greater than zero"));
        let mut l = command(CommandTarget::new("true"));
        l.name = " ".into();
        bad.push((l, "name must be a non-empty string"));
        // SPEC §9 item 27: loops get the whitespace check too, with shell unset or false.
        bad.push((
            command(CommandTarget::new("git status")),
            "target.command must be an executable without spaces when shell is false; put flags \
             in args or set shell true",
        ));
        let mut c = CommandTarget::new("true");
        c.timeout_ms = Some(0);
        bad.push((command(c), "target.timeoutMs must be greater than zero"));
        // Issue 25 item 6: what the CLI's flags refuse, core refuses too, so
        // an import or a library caller cannot store it.
        let mut l = command(CommandTarget::new("true"));
        l.hooks.on_failure = Some(" ".into());
        bad.push((
            l,
            "onFailure must be a shell command; leave it out for no hook",
        ));
        let mut l = command(CommandTarget::new("true"));
        l.hooks.on_success = Some("echo \u{0}".into());
        bad.push((
            l,
            "onSuccess must not contain a NUL character; processes cannot receive NUL in \
             arguments, paths or environment values",
        ));
        for name in ["", "A=B"] {
            let mut c = CommandTarget::new("true");
            c.env = Some([(name.to_owned(), "v".to_owned())].into());
            let mut l = command(c);
            l.name = "env".into();
            assert_eq!(
                validate_new_loop(&l).unwrap_err().to_string(),
                format!(
                    "target.env has an invalid variable name {name:?}; names must match \
                     [A-Za-z_][A-Za-z0-9_]*"
                )
            );
        }
        for (l, expected) in &bad {
            assert_eq!(validate_new_loop(l).unwrap_err().to_string(), *expected);
        }
        let err = validate_new_loop(&bad[1].0).unwrap_err();
        assert_eq!(err.field, "--attempts");

        // The CLI's default shell=true allows a command line.
        let mut c = CommandTarget::new("git status --short");
        c.shell = Some(true);
        assert!(validate_new_loop(&command(c)).is_ok());
        // A workflow target's timeout of 0 means none.
        let wt = WorkflowTarget {
            workflow_id: WorkflowId::parse("0123456789ab").unwrap(),
            input: None,
            timeout_ms: Some(0),
        };
        assert!(validate_new_loop(&NewLoop::new("w", every, Target::Workflow(wt))).is_ok());
    }

    #[test]
    fn targets_and_accounts() {
        let mut agent = AgentTarget::new(AgentProvider::Claude, "review");
        agent.agent = Some("reviewer".into());
        assert!(validate_process_target(&ProcessTarget::Agent(agent.clone()), "t").is_ok());
        // Agents note §12.1 rule 7: codex and codewith have no `--agent`;
        // 0.3.1 accepted one and dropped it, 0.5.11 refuses it.
        for provider in [AgentProvider::Codex, AgentProvider::Codewith] {
            agent.provider = provider;
            assert_eq!(
                validate_target(&Target::Agent(agent.clone()), "target")
                    .unwrap_err()
                    .to_string(),
                format!("target.agent is not supported for provider {provider}")
            );
        }
        agent.provider = AgentProvider::Claude;
        // A prompt an agent would read as an option is refused; one that
        // starts with a space or a word is the prompt.
        agent.prompt = "--dangerously-skip-permissions".into();
        assert_eq!(
            validate_target(&Target::Agent(agent.clone()), "target")
                .unwrap_err()
                .field,
            "target.prompt"
        );
        for prompt in [" --dangerously-skip-permissions", "Task: -x", "fix -x"] {
            agent.prompt = prompt.into();
            assert!(validate_target(&Target::Agent(agent.clone()), "target").is_ok());
        }
        // Issue 25 item 8: so is a model, agent or cwd, each the value of a
        // flag, for every provider; a dash inside the value is part of it.
        for (key, set) in [
            (
                "model",
                (|a, v| a.model = v) as fn(&mut AgentTarget, Option<String>),
            ),
            ("agent", |a, v| a.agent = v),
            ("cwd", |a, v| a.cwd = v),
        ] {
            let mut bad = agent.clone();
            set(
                &mut bad,
                Some("--dangerously-bypass-approvals-and-sandbox".into()),
            );
            let err = validate_target(&Target::Agent(bad.clone()), "target").unwrap_err();
            assert_eq!(err.field, format!("target.{key}"));
            let mut new = NewLoop::new(
                "a",
                Schedule::Dynamic {
                    min_interval_ms: None,
                },
                Target::Agent(bad.clone()),
            );
            assert_eq!(validate_new_loop(&new).unwrap_err(), err);
            set(&mut bad, Some("/w/gpt-5-x".into()));
            new.target = Target::Agent(bad);
            assert!(validate_new_loop(&new).is_ok(), "{key}");
        }
        // The cap on durations applies to workflow targets too; 0 is none.
        let capped = |ms| {
            validate_target(
                &Target::Workflow(WorkflowTarget {
                    workflow_id: WorkflowId::parse("0123456789ab").unwrap(),
                    input: None,
                    timeout_ms: Some(ms),
                }),
                "target",
            )
        };
        assert!(capped(3_153_600_000_000).is_ok());
        assert_eq!(
            capped(3_153_600_000_001).unwrap_err().to_string(),
            "target.timeoutMs must be at most 3153600000000 (100 years), got 3153600000001; use \
             a shorter timeout"
        );
        let blank = AgentTarget::new(AgentProvider::Cursor, " \n");
        assert_eq!(
            validate_target(&Target::Agent(blank), "target")
                .unwrap_err()
                .to_string(),
            "target.prompt must be a non-empty string"
        );
        assert_eq!(
            validate_target(&Target::Command(CommandTarget::new("")), "target")
                .unwrap_err()
                .to_string(),
            "target.command must be a non-empty string"
        );

        let account = |profile: &str, tool: Option<&str>| Account {
            profile: profile.into(),
            tool: tool.map(str::to_owned),
        };
        assert!(validate_account(&account("work", Some("claude")), "a").is_ok());
        assert!(validate_account(&account("wörk-2", None), "a").is_ok());
        let cases = [
            (account("", None), "a.profile must be a non-empty string"),
            (account("  ", None), "a.profile must be a non-empty string"),
            (
                account("a b", None),
                "a.profile must not contain whitespace or control characters, got \"a b\"; use the bare name that `accounts env` expects",
            ),
            (
                account("a\u{1b}", None),
                "a.profile must not contain whitespace or control characters, got \"a\\u{1b}\"; use the bare name that `accounts env` expects",
            ),
            (
                account("--help", None),
                "a.profile must not start with \"-\", got \"--help\": it is passed as an argument to `accounts env <profile> --tool <tool>`, which would read it as a flag",
            ),
            (account("w", Some("")), "a.tool must be a non-empty string"),
            (
                account("w", Some("-t")),
                "a.tool must not start with \"-\", got \"-t\": it is passed as an argument to `accounts env <profile> --tool <tool>`, which would read it as a flag",
            ),
        ];
        for (acc, expected) in &cases {
            assert_eq!(
                validate_account(acc, "a").unwrap_err().to_string(),
                *expected
            );
        }
    }

    #[test]
    fn workflow_files_are_read_strictly_and_warn_about_unknown_keys() {
        // A byte-order mark is skipped.
        let text = "\u{feff}{\"name\": \"w\", \"steps\": [{\"id\": \"a\", \"target\": \
                    {\"type\": \"command\", \"command\": \"true\"}}]}";
        let value = read_workflow_text(text).unwrap();
        assert_eq!(workflow_from_json(&value, None).unwrap().steps.len(), 1);
        // A second "steps" does not silently replace the first.
        let twice = r#"{"name": "w", "steps": [{"id": "a"}], "steps": []}"#;
        assert_eq!(
            read_workflow_text(twice).unwrap_err().to_string(),
            "duplicate key \"steps\": each key may appear once in an object; remove or rename \
             one at line 1 column 45"
        );
        // Unknown keys are warnings, with the nearest known key.
        let file = json!({"name": "w", "steps": [
            {"id": "a", "target": cmd("true")},
            {"id": "b", "depends_on": ["a"], "target": cmd("true")},
        ]});
        assert!(workflow_from_json(&file, None).is_ok());
        assert_eq!(
            workflow_warnings(&file),
            ["workflow.steps[1] has an unknown key \"depends_on\"; did you mean \"dependsOn\"?"]
        );
        assert!(workflow_warnings(&wf(json!([step("a", &[])]))).is_empty());
    }

    #[test]
    fn names() {
        assert!(validate_name("nightly build", "name").is_ok());
        assert!(validate_name(&"n".repeat(200), "name").is_ok());
        let cases = [
            ("", "name must be a non-empty string"),
            ("\t ", "name must be a non-empty string"),
            (
                "a\tb",
                "name must not contain control characters such as newlines or tabs; use a single line of text",
            ),
            (
                "a\u{0}",
                "name must not contain control characters such as newlines or tabs; use a single line of text",
            ),
        ];
        for (name, expected) in cases {
            assert_eq!(
                validate_name(name, "name").unwrap_err().to_string(),
                expected
            );
        }
    }

    /// JSON drawn from a vocabulary that reaches every check.
    fn arb_json() -> impl Strategy<Value = Value> {
        let words = prop::sample::select(vec![
            "command",
            "agent",
            "workflow",
            "claude",
            "codex",
            "a",
            "b",
            "c",
            "git status",
            "-x",
            "",
            " ",
            "safe",
            "none",
            "A_B",
            "1X",
            "true",
            "\u{0}",
            "é",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            prop::sample::select(vec![0i64, 1, -1, 50, 4_294_967_296]).prop_map(Value::from),
            prop::sample::select(vec![1.5f64, 2.0, 1e300]).prop_map(Value::from),
            words.prop_map(Value::from),
        ];
        let keys = prop::sample::select(vec![
            "name",
            "steps",
            "version",
            "description",
            "id",
            "target",
            "type",
            "command",
            "shell",
            "args",
            "env",
            "cwd",
            "timeoutMs",
            "account",
            "profile",
            "tool",
            "provider",
            "prompt",
            "model",
            "agent",
            "extraArgs",
            "configIsolation",
            "dependsOn",
            "continueOnFailure",
            "x",
        ]);
        leaf.prop_recursive(5, 96, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(keys.clone(), inner, 0..8).prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                )),
            ]
        })
    }

    proptest! {
        #[test]
        fn no_input_panics(value in arb_json(), name in prop::option::of("[ a-z]{0,3}")) {
            let _ = workflow_from_json(&value, name.as_deref());
            let mut file = json!({"name": "w", "steps": [value.clone()]});
            let _ = workflow_from_json(&file, None);
            file["steps"] = json!([{"id": "a", "target": value.clone(), "dependsOn": value}]);
            if let Ok(w) = workflow_from_json(&file, None) {
                prop_assert_eq!(workflow_execution_order(&w.steps).len(), w.steps.len());
            }
        }

        #[test]
        fn order_respects_dependencies_or_a_real_cycle_is_named(
            edges in prop::collection::vec(prop::collection::vec(0usize..12, 0..4), 1..12)
        ) {
            let n = edges.len();
            let steps: Vec<Value> = edges.iter().enumerate().map(|(i, deps)| {
                let deps: Vec<String> = deps.iter().map(|&j| format!("s{}", j % n))
                    .filter(|d| *d != format!("s{i}")).collect();
                json!({"id": format!("s{i}"), "dependsOn": deps, "target": cmd("true")})
            }).collect();
            let file = wf(Value::Array(steps));
            let depends = |a: &str, b: &str| {
                file["steps"].as_array().unwrap().iter()
                    .any(|s| s["id"] == a && s["dependsOn"].as_array().unwrap().iter().any(|d| d == b))
            };
            match workflow_from_json(&file, None) {
                Ok(w) => {
                    let order = ids(workflow_execution_order(&w.steps));
                    prop_assert_eq!(order.len(), n);
                    for s in &w.steps {
                        let at = order.iter().position(|id| *id == s.id).unwrap();
                        for d in &s.depends_on {
                            prop_assert!(order.iter().position(|id| id == d).unwrap() < at);
                        }
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    let path = msg.split(": ").nth(1).unwrap();
                    let hops: Vec<&str> = path.split(" -> ").collect();
                    prop_assert!(hops.len() >= 3 && hops.first() == hops.last(), "{}", msg);
                    for pair in hops.windows(2) {
                        prop_assert!(depends(pair[0], pair[1]), "{}", msg);
                    }
                }
            }
        }
    }
}
