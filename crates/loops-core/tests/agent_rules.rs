//! Agent targets against 0.5.11's option rules (agents note §12.1): each
//! message, in the order the rules run, through the public API and from a
//! workflow file.

use loops_core::{
    AgentAllowlist, AgentProvider, AgentTarget, PermissionMode, ProcessTarget, Target,
    validate_agent_options, validate_process_target, validate_target, workflow_from_json,
};
use serde_json::json;

/// The first message `target` is refused with, as a loop's target.
fn refused(target: &AgentTarget) -> Option<String> {
    validate_target(&Target::Agent(target.clone()), "target")
        .err()
        .map(|e| e.to_string())
}

fn agent(provider: AgentProvider, set: impl Fn(&mut AgentTarget)) -> AgentTarget {
    let mut t = AgentTarget::new(provider, "fix it");
    set(&mut t);
    t
}

fn reason(text: &str) -> Option<AgentAllowlist> {
    Some(AgentAllowlist {
        safety_reason: Some(text.into()),
        ..AgentAllowlist::default()
    })
}

#[test]
fn every_rule_has_its_message() {
    use AgentProvider::*;
    use PermissionMode::*;
    let cases: Vec<(AgentTarget, &str)> = vec![
        (
            agent(Claude, |t| t.prompt = " ".into()),
            "target.prompt must be a non-empty string",
        ),
        (
            agent(Claude, |t| t.variant = Some(" ".into())),
            "target.variant must be a non-empty string when set; omit it to use the provider's \
             default effort",
        ),
        (
            agent(Opencode, |_| {}),
            "target.model is required for provider opencode; pass a provider/model id such as \
             openrouter/google/gemini-2.5-flash",
        ),
        (
            agent(Cursor, |t| t.variant = Some("high".into())),
            "target.variant is not supported for provider cursor",
        ),
        (
            agent(Codex, |t| t.agent = Some("a".into())),
            "target.agent is not supported for provider codex",
        ),
        (
            agent(Codewith, |t| t.agent = Some("a".into())),
            "target.agent is not supported for provider codewith",
        ),
        (
            agent(Codex, |t| t.add_dirs = Some(vec!["/a".into(), "  ".into()])),
            "target.addDirs[1] must be a non-empty string",
        ),
        (
            agent(Codex, |t| t.add_dirs = Some(vec!["/tmp/..".into()])),
            "target.addDirs[0] must not resolve to a filesystem root",
        ),
        (
            agent(Codewith, |t| t.add_dirs = Some(vec![" C:\\ ".into()])),
            "target.addDirs[0] must not resolve to a filesystem root",
        ),
        (
            agent(Claude, |t| t.add_dirs = Some(vec!["/a".into()])),
            "target.addDirs is currently supported only for provider codewith or codex",
        ),
        (
            agent(Codex, |t| t.permission_mode = Some(Plan)),
            "target.permissionMode plan is currently supported only for provider claude or cursor",
        ),
        (
            agent(Cursor, |t| t.permission_mode = Some(Auto)),
            "target.permissionMode auto is currently supported only for provider claude",
        ),
        (
            agent(Claude, |t| t.sandbox = Some("enabled".into())),
            "target.sandbox is currently supported only for provider codewith, codex, or cursor",
        ),
        (
            agent(Codex, |t| t.sandbox = Some("enabled".into())),
            "target.sandbox must be one of read-only, workspace-write, danger-full-access",
        ),
        (
            agent(Cursor, |t| t.sandbox = Some("read-only".into())),
            "target.sandbox must be one of enabled, disabled",
        ),
        (
            agent(Claude, |t| {
                t.allowlist = Some(AgentAllowlist {
                    enforcement: Some("strict".into()),
                    ..AgentAllowlist::default()
                })
            }),
            "target.allowlist.enforcement must be metadata_only",
        ),
        (
            agent(Claude, |t| t.allowlist = reason(" ")),
            "target.allowlist.safetyReason must be a non-empty string",
        ),
        (
            agent(Claude, |t| {
                t.allowlist = Some(AgentAllowlist {
                    tools: Some(vec!["Read".into()]),
                    ..AgentAllowlist::default()
                })
            }),
            "target.allowlist.safetyReason is required when tool or command restrictions are \
             declared",
        ),
        // Rule 16: relaxed access needs break-glass, then a reason.
        (
            agent(Claude, |t| t.permission_mode = Some(Bypass)),
            "target.manualBreakGlass=true is required when permissionMode=bypass",
        ),
        (
            agent(Opencode, |t| {
                t.model = Some("m".into());
                t.permission_mode = Some(Bypass);
                t.manual_break_glass = Some(true);
            }),
            "target.allowlist.safetyReason is required when permissionMode=bypass",
        ),
        (
            agent(Codex, |t| t.permission_mode = Some(Bypass)),
            "target.manualBreakGlass=true is required when sandbox=danger-full-access",
        ),
        (
            agent(Codewith, |t| {
                t.sandbox = Some("danger-full-access".into());
                t.manual_break_glass = Some(false);
            }),
            "target.manualBreakGlass=true is required when sandbox=danger-full-access",
        ),
        (
            agent(Cursor, |t| {
                t.sandbox = Some("disabled".into());
                t.manual_break_glass = Some(true);
            }),
            "target.allowlist.safetyReason is required when sandbox=disabled",
        ),
        // This port's own checks follow: values that would read as options.
        (
            agent(Codex, |t| t.add_dirs = Some(vec!["--x".into()])),
            "target.addDirs must not begin with \"-\": the agent would read it as an option, \
             not as the value of --add-dir; give an absolute path",
        ),
    ];
    for (target, expected) in cases {
        assert_eq!(refused(&target).as_deref(), Some(expected), "{target:?}");
    }
}

#[test]
fn the_first_rule_broken_wins() {
    use AgentProvider::*;
    // Rule 5 before 6 … before 16, as 0.5.11 orders them.
    let t = agent(Opencode, |t| {
        t.agent = Some("a".into());
        t.permission_mode = Some(PermissionMode::Plan);
        t.sandbox = Some("x".into());
    });
    assert_eq!(
        refused(&t).unwrap(),
        "target.model is required for provider opencode; pass a provider/model id such as \
         openrouter/google/gemini-2.5-flash"
    );
    let t = agent(Codex, |t| {
        t.agent = Some("a".into());
        t.add_dirs = Some(vec!["/".into()]);
    });
    assert_eq!(
        refused(&t).unwrap(),
        "target.agent is not supported for provider codex"
    );
    let t = agent(Cursor, |t| {
        t.add_dirs = Some(vec!["/a".into()]);
        t.permission_mode = Some(PermissionMode::Auto);
    });
    assert!(refused(&t).unwrap().starts_with("target.addDirs is"));
    let t = agent(Cursor, |t| {
        t.permission_mode = Some(PermissionMode::Bypass);
        t.sandbox = Some("nope".into());
    });
    assert_eq!(
        refused(&t).unwrap(),
        "target.sandbox must be one of enabled, disabled"
    );
}

#[test]
fn what_passes() {
    use AgentProvider::*;
    let ok = |t: AgentTarget| assert_eq!(refused(&t), None, "{t:?}");
    let consent = |t: &mut AgentTarget| {
        t.manual_break_glass = Some(true);
        t.allowlist = reason("a throwaway VM");
    };
    ok(agent(Claude, |t| {
        t.permission_mode = Some(PermissionMode::Auto);
        t.variant = Some("high".into());
        t.env = Some([("K".to_owned(), "v".to_owned())].into());
    }));
    ok(agent(Cursor, |t| {
        t.permission_mode = Some(PermissionMode::Plan)
    }));
    ok(agent(Cursor, |t| t.sandbox = Some("enabled".into())));
    // Bypass with a restricted sandbox is not relaxed for codewith and codex.
    for sandbox in ["workspace-write", "read-only"] {
        ok(agent(Codewith, |t| {
            t.permission_mode = Some(PermissionMode::Bypass);
            t.sandbox = Some(sandbox.into());
            t.add_dirs = Some(vec![" /srv/shared ".into()]);
        }));
    }
    ok(agent(Codex, |t| {
        t.permission_mode = Some(PermissionMode::Bypass);
        consent(t);
    }));
    ok(agent(Aicopilot, |t| {
        t.permission_mode = Some(PermissionMode::Bypass);
        consent(t);
    }));
    // extraArgs stay the owner's own (a departure from rule 8).
    ok(agent(Claude, |t| {
        t.extra_args = Some(vec!["--verbose".into()])
    }));
    // An env name is checked as a command's is.
    let bad_env = agent(Claude, |t| {
        t.env = Some([("A-B".to_owned(), "v".to_owned())].into())
    });
    assert!(
        refused(&bad_env)
            .unwrap()
            .starts_with("target.env has an invalid variable name")
    );
}

#[test]
fn a_stored_target_keeps_what_0_3_1_accepted() {
    let codex = agent(AgentProvider::Codex, |t| t.agent = Some("a".into()));
    assert!(validate_agent_options(&codex, "codex").is_ok());
    let opencode = agent(AgentProvider::Opencode, |_| {});
    assert!(validate_agent_options(&opencode, "opencode").is_ok());
    let bypass = agent(AgentProvider::Cursor, |t| {
        t.permission_mode = Some(PermissionMode::Bypass)
    });
    assert_eq!(
        validate_agent_options(&bypass, "cursor")
            .unwrap_err()
            .to_string(),
        "cursor.manualBreakGlass=true is required when permissionMode=bypass"
    );
}

#[test]
fn a_0_3_1_row_reads_and_writes_as_before() {
    let row = r#"{"type":"agent","provider":"codex","prompt":"fix","model":"o4","agent":"a","extraArgs":["--x"],"timeoutMs":60000,"configIsolation":"none","account":{"profile":"w"}}"#;
    let target: Target = serde_json::from_str(row).unwrap();
    assert_eq!(serde_json::to_string(&target).unwrap(), row);
}

#[test]
fn the_new_fields_round_trip_under_upstreams_names() {
    let text = json!({
        "type": "agent", "provider": "codewith", "prompt": "fix",
        "variant": "high", "env": {"K": "v"}, "addDirs": ["/a"],
        "permissionMode": "bypass", "sandbox": "danger-full-access",
        "manualBreakGlass": true,
        "allowlist": {"tools": ["Read"], "commands": ["git"],
                      "enforcement": "metadata_only", "safetyReason": "VM"}
    });
    let target: Target = serde_json::from_value(text.clone()).unwrap();
    assert_eq!(serde_json::to_value(&target).unwrap(), text);
    assert!(validate_target(&target, "target").is_ok());
}

#[test]
fn workflow_steps_take_the_same_keys_and_rules() {
    let file = |target: serde_json::Value| {
        workflow_from_json(
            &json!({"name": "w", "steps": [{"id": "a", "target": target}]}),
            None,
        )
    };
    let wf = file(json!({
        "type": "agent", "provider": "claude", "prompt": "fix",
        "permissionMode": "bypass", "manualBreakGlass": true, "variant": "high",
        "allowlist": {"safetyReason": "VM"}, "env": {"K": "v"}
    }))
    .unwrap();
    let ProcessTarget::Agent(step) = &wf.steps[0].target else {
        panic!("an agent step");
    };
    assert_eq!(step.permission_mode, Some(PermissionMode::Bypass));
    assert_eq!(step.variant.as_deref(), Some("high"));
    assert!(validate_process_target(&wf.steps[0].target, "x").is_ok());
    let error = file(json!({
        "type": "agent", "provider": "claude", "prompt": "fix", "permissionMode": "bypass"
    }))
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "workflow.steps[0].target.manualBreakGlass=true is required when permissionMode=bypass"
    );
    let error = file(json!({
        "type": "agent", "provider": "claude", "prompt": "fix", "permissionMode": "yolo"
    }))
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "workflow.steps[0].target.permissionMode must be one of default, plan, auto, bypass"
    );
}

#[test]
fn worktree_options_read_validate_and_round_trip() {
    use loops_core::WorktreeMode;
    // Loops and steps name them as upstream's workflow JSON does (§8).
    let text = json!({
        "type": "agent", "provider": "codex", "prompt": "fix",
        "worktree": "required", "keepWorktree": true
    });
    let target: Target = serde_json::from_value(text.clone()).unwrap();
    assert_eq!(serde_json::to_value(&target).unwrap(), text);
    assert!(validate_target(&target, "target").is_ok());
    let Target::Agent(agent_target) = &target else {
        panic!("an agent");
    };
    assert_eq!(agent_target.worktree_mode(), WorktreeMode::Required);
    assert!(agent_target.keeps_worktree());
    // Unset is off, and keeps nothing; a stored target without them reads
    // and writes as before.
    let plain = AgentTarget::new(AgentProvider::Claude, "fix");
    assert_eq!(plain.worktree_mode(), WorktreeMode::Off);
    assert!(!plain.keeps_worktree());
    assert!(!serde_json::to_string(&plain).unwrap().contains("orktree"));
    // Keeping a worktree needs one.
    for mode in [None, Some(WorktreeMode::Off)] {
        let keep_only = agent(AgentProvider::Claude, |t| {
            t.worktree = mode;
            t.keep_worktree = Some(true);
        });
        assert_eq!(
            refused(&keep_only).as_deref(),
            Some(
                "target.keepWorktree needs worktree auto or required: without a worktree there \
                 is nothing to keep"
            )
        );
    }
    let keep_false = agent(AgentProvider::Claude, |t| t.keep_worktree = Some(false));
    assert_eq!(refused(&keep_false), None);

    let file = |target: serde_json::Value| {
        workflow_from_json(
            &json!({"name": "w", "steps": [{"id": "a", "target": target}]}),
            None,
        )
    };
    let wf = file(json!({
        "type": "agent", "provider": "claude", "prompt": "fix", "worktree": "auto",
        "keepWorktree": false
    }))
    .unwrap();
    let ProcessTarget::Agent(step) = &wf.steps[0].target else {
        panic!("an agent step");
    };
    assert_eq!(
        (step.worktree, step.keep_worktree),
        (Some(WorktreeMode::Auto), Some(false))
    );
    for (bad, message) in [
        (
            json!({"worktree": "main"}),
            "workflow.steps[0].target.worktree must be one of off, auto, required",
        ),
        (
            json!({"worktree": true}),
            "workflow.steps[0].target.worktree must be one of off, auto, required",
        ),
        (
            json!({"worktree": "auto", "keepWorktree": "yes"}),
            "workflow.steps[0].target.keepWorktree must be true or false",
        ),
        (
            json!({"keepWorktree": true}),
            "workflow.steps[0].target.keepWorktree needs worktree auto or required: without a \
             worktree there is nothing to keep",
        ),
    ] {
        let mut target = json!({"type": "agent", "provider": "claude", "prompt": "fix"});
        for (key, value) in bad.as_object().unwrap() {
            target[key] = value.clone();
        }
        assert_eq!(file(target).unwrap_err().to_string(), message);
    }
    // No unknown-key warning for either.
    let warnings = loops_core::workflow_warnings(&json!({"name": "w", "steps": [{"id": "a",
        "target": {"type": "agent", "provider": "claude", "prompt": "fix",
                   "worktree": "auto", "keepWorktree": true}}]}));
    assert!(warnings.is_empty(), "{warnings:?}");
}
