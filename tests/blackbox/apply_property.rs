//! Issue 31's property: for random sets of loops A and B, applying A and
//! then B (with `--prune --yes`) leaves the same loops as applying B to an
//! empty store, runs aside. Each case starts processes, so the cases are
//! few; the universe is small so that A and B share names often.

use std::path::Path;

use loops_tests::TestEnv;
use proptest::prelude::*;
use serde_json::Value;

/// One loop of a random file.
#[derive(Debug, Clone)]
struct Spec {
    name: &'static str,
    agent: bool,
    every: &'static str,
    label: Option<&'static str>,
    attempts: u8,
}

impl Spec {
    fn toml(&self) -> String {
        let mut t = format!(
            "[[loop]]\nname = \"{}\"\nevery = \"{}\"\n",
            self.name, self.every
        );
        if self.agent {
            t.push_str("kind = \"agent\"\nprovider = \"claude\"\nprompt = \"review it\"\n");
        } else {
            t.push_str("kind = \"command\"\ncmd = \"true\"\n");
        }
        if let Some(label) = self.label {
            t.push_str(&format!("label = [\"{label}\"]\n"));
        }
        t.push_str(&format!("attempts = {}\n\n", self.attempts));
        t
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop::sample::select(vec!["a", "b", "c", "d"]),
        any::<bool>(),
        prop::sample::select(vec!["5m", "1h", "1d"]),
        prop::option::of(prop::sample::select(vec!["ops", "ci"])),
        1u8..4,
    )
        .prop_map(|(name, agent, every, label, attempts)| Spec {
            name,
            agent,
            every,
            label,
            attempts,
        })
}

/// A set of loops: one per name.
fn specs() -> impl Strategy<Value = Vec<Spec>> {
    prop::collection::vec(spec(), 0..4).prop_map(|mut v| {
        v.sort_by_key(|s| s.name);
        v.dedup_by_key(|s| s.name);
        v
    })
}

/// Applies `specs` to `env` from one fixed file path and scope.
fn apply(env: &TestEnv, specs: &[Spec]) {
    let dir = env.home().join("setup");
    std::fs::create_dir_all(&dir).expect("the setup dir");
    let path = dir.join("loops.toml");
    let text: String = specs.iter().map(Spec::toml).collect();
    std::fs::write(&path, text).expect("the file");
    let p = path.to_str().expect("utf-8");
    env.loops(["apply", p, "--prune", "--yes", "--scope", "prop"])
        .run();
}

/// The loops of `env` as settings: what a run or the clock changes, and
/// ids and times, left out; by name.
fn settings(env: &TestEnv, dir: &Path) -> Vec<Value> {
    let listed = env.loops(["--json", "list"]).run().json();
    let mut loops: Vec<Value> = listed.as_array().cloned().unwrap_or_default();
    for lp in &mut loops {
        let Some(o) = lp.as_object_mut() else {
            continue;
        };
        for key in ["id", "createdAt", "updatedAt", "nextRunAt", "status"] {
            o.remove(key);
        }
        // Each environment's own setup directory.
        if let Some(cwd) = o.get_mut("target").and_then(|t| t.get_mut("cwd")) {
            *cwd = Value::String(
                cwd.as_str()
                    .unwrap_or_default()
                    .replace(dir.to_str().unwrap_or_default(), "<dir>"),
            );
        }
    }
    loops.sort_by_key(|l| l["name"].as_str().unwrap_or_default().to_owned());
    loops
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn applying_a_then_b_is_applying_b(a in specs(), b in specs()) {
        let (twice, once) = (TestEnv::new(), TestEnv::new());
        apply(&twice, &a);
        apply(&twice, &b);
        apply(&once, &b);
        prop_assert_eq!(
            settings(&twice, &twice.home()),
            settings(&once, &once.home())
        );
    }
}
