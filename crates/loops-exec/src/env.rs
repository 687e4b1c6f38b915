//! The environment a target runs with (SPEC §5.3) and the run metadata
//! that goes into it.
//!
//! Built in the SPEC's order: the base environment (the caller's, else the
//! process's), without loops' own database credentials whatever the
//! account (issue 25 §2); for an account, the inherited credentials and
//! tool homes are removed and the account's variables applied; the target's
//! own `env`; the normalized `PATH`; and last the `LOOPS_*` metadata, which
//! nothing can override. The child gets exactly this map (`env_clear()`
//! first).
//!
//! What is removed is the two lists in `credentials.rs`. Alongside the map
//! comes the [`Secrets`] of the run: the values `accounts env` exported and
//! the values of the target's own `env` (issue 12 §2), and the database's
//! password ([`ExecOptions::secret_values`] and the inherited values
//! removed), which are masked in what the run stores.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use loops_core::Timestamp;

use crate::account::resolve_account_env;
use crate::cookie;
use crate::credentials::{ACCOUNT_STRIPPED, database_secret_values, is_database_credential};
use crate::error::ExecError;
use crate::options::{ExecOptions, RunContext};
use crate::path::normalize_path;
use crate::scrub::Secrets;
use crate::spec::ProcessSpec;

/// What a run is part of, exported to the child as `LOOPS_*` variables.
/// Unset or empty fields export nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunMetadata {
    /// `LOOPS_LOOP_ID`.
    pub loop_id: Option<String>,
    /// `LOOPS_LOOP_NAME`.
    pub loop_name: Option<String>,
    /// `LOOPS_RUN_ID`: the loop run.
    pub run_id: Option<String>,
    /// `LOOPS_SCHEDULED_FOR`: the slot.
    pub scheduled_for: Option<Timestamp>,
    /// `LOOPS_WORKFLOW_ID`.
    pub workflow_id: Option<String>,
    /// `LOOPS_WORKFLOW_NAME`.
    pub workflow_name: Option<String>,
    /// `LOOPS_WORKFLOW_RUN_ID`.
    pub workflow_run_id: Option<String>,
    /// `LOOPS_WORKFLOW_STEP_ID`.
    pub workflow_step_id: Option<String>,
}

impl RunMetadata {
    /// The `LOOPS_*` metadata of a loop run (SPEC §5.3 step 5).
    pub fn for_loop_run(lp: &loops_core::Loop, run: &loops_core::LoopRun) -> RunMetadata {
        RunMetadata {
            loop_id: Some(lp.id.to_string()),
            loop_name: Some(lp.name.clone()),
            run_id: Some(run.id.to_string()),
            scheduled_for: Some(run.scheduled_for),
            ..RunMetadata::default()
        }
    }

    /// The `LOOPS_*` variables, in SPEC order.
    fn vars(&self) -> Vec<(&'static str, String)> {
        let scheduled_for = self.scheduled_for.map(|t| t.to_string());
        [
            ("LOOPS_LOOP_ID", self.loop_id.clone()),
            ("LOOPS_LOOP_NAME", self.loop_name.clone()),
            ("LOOPS_RUN_ID", self.run_id.clone()),
            ("LOOPS_SCHEDULED_FOR", scheduled_for),
            ("LOOPS_WORKFLOW_ID", self.workflow_id.clone()),
            ("LOOPS_WORKFLOW_NAME", self.workflow_name.clone()),
            ("LOOPS_WORKFLOW_RUN_ID", self.workflow_run_id.clone()),
            ("LOOPS_WORKFLOW_STEP_ID", self.workflow_step_id.clone()),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.filter(|v| !v.is_empty()).map(|v| (name, v)))
        .collect()
    }
}

/// The process environment. Names and values that are not UTF-8 are
/// converted lossily, as the original's runtime does.
///
/// Read once: loops never changes its own environment, and a runner builds
/// an environment for every run.
pub(crate) fn process_env() -> &'static BTreeMap<String, String> {
    static ENV: OnceLock<BTreeMap<String, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect()
    })
}

/// [`normalize_path`], remembering the last result: runs of one runner
/// nearly always share the variables it depends on.
fn normalized_path(env: &BTreeMap<String, String>) -> String {
    const INPUTS: [&str; 5] = [
        "PATH",
        "HOME",
        "BUN_INSTALL",
        "PNPM_HOME",
        "NPM_CONFIG_PREFIX",
    ];
    type Key = [Option<String>; 5];
    static LAST: Mutex<Option<(Key, String)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((key, path)) = last.as_ref()
        && key
            .iter()
            .zip(INPUTS)
            .all(|(k, name)| k.as_deref() == env.get(name).map(String::as_str))
    {
        return path.clone();
    }
    let path = normalize_path(env);
    *last = Some((INPUTS.map(|name| env.get(name).cloned()), path.clone()));
    path
}

/// `base` without loops' own database credentials (`DATABASE_STRIPPED`).
pub(crate) fn base_without_database_credentials(
    base: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    base.iter()
        .filter(|(name, _)| !is_database_credential(name))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// What every process of the runner masks: its
/// [`ExecOptions::secret_values`] and the values of the database
/// credentials `base` held.
pub(crate) fn runner_secrets(base: &BTreeMap<String, String>, opts: &ExecOptions) -> Secrets {
    let mut secrets = Secrets::default();
    secrets.extend(opts.secret_values.iter().map(String::as_str));
    secrets.extend(database_secret_values(base));
    secrets
}

/// Builds the environment of `spec` (SPEC §5.3) and the secrets to mask in
/// its output. Runs `accounts env` when the target has an account, and
/// raises its errors.
///
/// The run's spawn id (`ctx.spawn_id`) joins the base environment's
/// `LOOPS_SPAWN_ID` first, so `accounts env` carries it too, and the
/// target's `env` is applied over it as over the rest of the base.
/// Variables of a target's `env` whose values are never masked in its
/// output: `PATH`, and what a trigger tells its run (issue 30; the
/// payload stays masked).
const NOT_SECRET: &[&str] = &[
    "PATH",
    "LOOPS_TRIGGER_KIND",
    "LOOPS_TRIGGER_LOOP",
    "LOOPS_TRIGGER_RUN_ID",
];

pub(crate) fn build_env(
    spec: &ProcessSpec<'_>,
    meta: &RunMetadata,
    opts: &ExecOptions,
    ctx: &RunContext<'_>,
) -> Result<(BTreeMap<String, String>, Secrets), ExecError> {
    let base = opts.base_env.as_ref().unwrap_or_else(|| process_env());
    let mut env = base_without_database_credentials(base);
    if let Some(spawn_id) = ctx.spawn_id {
        let inherited = base.get(cookie::VAR).map(String::as_str);
        env.insert(cookie::VAR.to_owned(), cookie::chain(inherited, spawn_id));
    }
    let mut secrets = runner_secrets(base, opts);
    if let Some(account) = spec.account {
        // `env` is still the base environment, with the run's spawn id.
        let account_env = resolve_account_env(account, spec.tool_hint, &env, opts, ctx.cancel)?;
        for name in ACCOUNT_STRIPPED {
            env.remove(*name);
        }
        env.extend(account_env.vars);
        secrets.merge(account_env.secrets);
    }
    if let Some(extra) = spec.env {
        env.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        // PATH is rewritten below and shown in the executable-not-found
        // error by design (SPEC §10 item 55); it names directories, not an
        // identity. Nor do the ids a trigger names (issue 30).
        secrets.extend(
            extra
                .iter()
                .filter(|(name, _)| !NOT_SECRET.contains(&name.as_str()))
                .map(|(_, value)| value.as_str()),
        );
    }
    let path = normalized_path(&env);
    env.insert("PATH".to_owned(), path);
    for (name, value) in meta.vars() {
        env.insert(name.to_owned(), value);
    }
    Ok((env, secrets))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loops_core::{CommandTarget, ProcessTarget};

    #[test]
    fn metadata_overrides_target_env_and_path_is_normalized() {
        let mut c = CommandTarget::new("true");
        c.env = Some(BTreeMap::from([
            ("LOOPS_RUN_ID".to_owned(), "forged".to_owned()),
            ("EXTRA".to_owned(), "1".to_owned()),
            ("PATH".to_owned(), "/target/bin".to_owned()),
        ]));
        let target = ProcessTarget::Command(c);
        let spec = ProcessSpec::of_target(&target);
        let meta = RunMetadata {
            run_id: Some("r1".into()),
            loop_name: Some(String::new()),
            scheduled_for: Some("2026-01-01T00:15:00Z".parse().unwrap()),
            ..RunMetadata::default()
        };
        let opts = ExecOptions {
            base_env: Some(BTreeMap::from([
                ("HOME".to_owned(), "/h".to_owned()),
                ("KEEP".to_owned(), "k".to_owned()),
            ])),
            ..ExecOptions::default()
        };
        let (env, secrets) = build_env(&spec, &meta, &opts, &RunContext::default()).unwrap();
        // Only values of at least 8 bytes are masked, and never PATH.
        assert_eq!(format!("{secrets:?}"), "Secrets(0 values)");
        assert_eq!(env["LOOPS_RUN_ID"], "r1");
        assert_eq!(env["LOOPS_SCHEDULED_FOR"], "2026-01-01T00:15:00.000Z");
        assert!(!env.contains_key("LOOPS_LOOP_NAME"));
        assert!(!env.contains_key("LOOPS_LOOP_ID"));
        assert_eq!(env["EXTRA"], "1");
        assert_eq!(env["KEEP"], "k");
        assert!(env["PATH"].starts_with("/target/bin:/h/.local/bin:"));
    }

    /// Issue 25 review, decided: the database password keeps the 8-byte
    /// floor of every masked value. A password of 4 to 7 characters is
    /// the kind that is also a word ("test", "admin", "loops"): masking it
    /// alone would rewrite ordinary output ("running [redacted]s") and show
    /// whoever reads it which word the password is. It is still never
    /// passed on, and it is masked inside the connection string and inside
    /// any URL's user information.
    #[test]
    fn a_short_database_password_is_stripped_but_masked_only_in_a_url() {
        let target = ProcessTarget::Command(CommandTarget::new("true"));
        let spec = ProcessSpec::of_target(&target);
        let url = "postgres://loops:test@db:5432/loops";
        let opts = ExecOptions {
            base_env: Some(BTreeMap::from([
                ("LOOPS_DATABASE_URL".to_owned(), url.to_owned()),
                ("PGPASSWORD".to_owned(), "test".to_owned()),
            ])),
            secret_values: vec!["test".to_owned()],
            ..ExecOptions::default()
        };
        let meta = RunMetadata::default();
        let (env, secrets) = build_env(&spec, &meta, &opts, &RunContext::default()).unwrap();
        assert!(!env.contains_key("LOOPS_DATABASE_URL"));
        assert!(!env.contains_key("PGPASSWORD"));
        assert_eq!(
            secrets.scrub_output(format!(
                "ran 3 tests\n{url}\npsql postgres://me:test@h/db\n"
            )),
            "ran 3 tests\n[redacted]\npsql postgres://me:[redacted]@h/db\n"
        );
        // From 8 bytes on, the password is masked wherever it shows.
        let opts = ExecOptions {
            secret_values: vec!["testtest".to_owned()],
            ..opts
        };
        let (_, secrets) = build_env(&spec, &meta, &opts, &RunContext::default()).unwrap();
        assert_eq!(
            secrets.scrub_output("pw=testtest".to_owned()),
            "pw=[redacted]"
        );
    }

    #[test]
    fn the_run_spawn_id_follows_the_inherited_ones() {
        let target = ProcessTarget::Command(CommandTarget::new("true"));
        let spec = ProcessSpec::of_target(&target);
        let opts = |inherited: Option<&str>| ExecOptions {
            base_env: Some(
                inherited
                    .map(|v| (cookie::VAR.to_owned(), v.to_owned()))
                    .into_iter()
                    .collect(),
            ),
            ..ExecOptions::default()
        };
        let ctx = RunContext {
            spawn_id: Some("9-run-1"),
            ..RunContext::default()
        };
        let cases = [
            (None, &ctx, Some("9-run-1")),
            (Some("1-outer-0"), &ctx, Some("1-outer-0 9-run-1")),
            (Some("1-outer-0"), &RunContext::default(), Some("1-outer-0")),
            (None, &RunContext::default(), None),
        ];
        for (inherited, ctx, expected) in cases {
            let meta = RunMetadata::default();
            let (env, _) = build_env(&spec, &meta, &opts(inherited), ctx).unwrap();
            assert_eq!(
                env.get(cookie::VAR).map(String::as_str),
                expected,
                "{inherited:?} {ctx:?}"
            );
        }
    }

    #[test]
    fn the_remembered_path_follows_its_inputs() {
        let env = |path: &str, home: &str| {
            BTreeMap::from([
                ("PATH".to_owned(), path.to_owned()),
                ("HOME".to_owned(), home.to_owned()),
            ])
        };
        for (path, home) in [("/a", "/h1"), ("/b", "/h1"), ("/b", "/h2"), ("/a", "/h1")] {
            let e = env(path, home);
            assert_eq!(normalized_path(&e), normalize_path(&e), "{path} {home}");
        }
    }
}
