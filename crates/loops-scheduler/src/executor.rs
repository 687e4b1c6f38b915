//! The seam between the scheduler and processes: a [`RunExecutor`] turns one
//! claimed loop run into an [`ExecutorResult`] (SPEC §3.3 "execute", §6.8
//! `executeLoopTarget`, §8 "execute override").
//!
//! The scheduler never spawns anything itself. Production uses
//! [`ProcessExecutor`], which hands command and agent targets to
//! `loops_exec` and runs workflow targets through
//! [`execute_workflow`]; tests pass a fake that
//! returns canned results, so a tick runs without a single process.
//!
//! With [`ProcessExecutor::with_logs`], each command or agent run also
//! writes its output, as it is produced, to `logs/<run-id>.log` in the data
//! directory (`loops_exec::RunLog`), which `loops logs -f` follows. A log
//! that cannot be written never fails its run: the first failure is noted
//! once, through the callback given, and the runs go on. Workflow targets
//! keep no such file; their steps' output is in the workflow run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use loops_core::{
    Clock, ExecutorResult, Loop, LoopRun, ProcessRef, Target, WorkflowId, WorkflowTarget,
    loop_workflow_key,
};
use loops_exec::{
    CancelToken, ExecError, ExecOptions, OutputSeen, RunContext, RunLog, RunMetadata, SystemProbe,
    execute_target, prepare_logs_dir,
};
use loops_store::{Location, Store, StoreError};
use loops_workflow::{WorkflowError, WorkflowRunOptions, execute_workflow};

/// What an executor may do while a run executes.
pub struct RunControl<'a> {
    /// Cancelled when the run must stop: its lease was lost, or the runner
    /// is shutting down. The executor kills its process group then; a
    /// workflow run is recorded cancelled with the token's reason.
    pub cancel: CancelToken,
    /// Reports the spawned child, so its identity is recorded on the run.
    pub on_spawn: &'a (dyn Fn(ProcessRef) + Sync),
    /// The spawn id every process of the run is to carry in
    /// `LOOPS_SPAWN_ID` (the runner records it with the run), so that the
    /// recovery after a crash also finds the processes that left the run's
    /// process group.
    pub spawn_id: Option<&'a str>,
    /// Reports, for the runner's log, that the run goes on but could not
    /// record its progress (a workflow run whose write failed on a
    /// transient store error, once per streak of failures, until it lands).
    pub on_retry: &'a (dyn Fn(&str) + Sync),
    /// Marked whenever the run prints, for the heartbeat to record how long
    /// it has been silent (issue 27); `None` keeps no mark.
    pub output_seen: Option<&'a OutputSeen>,
}

/// Executes one claimed loop run.
///
/// `Err` is for failures of loops itself before or around the run (an
/// account that cannot be resolved, a workflow that does not exist); the
/// scheduler records them as a failed run with the error's message and
/// empty output (SPEC §3.3 "thrown error"). A target that runs and fails is
/// an `Ok` result with status failed.
pub trait RunExecutor: Send + Sync {
    /// Runs `run` of loop `lp` to completion.
    fn execute(
        &self,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, RunError>;

    /// The options the runner's hooks run with (its base environment and
    /// the secret values they mask, issue 25 §2); `None` for the defaults.
    fn exec_options(&self) -> Option<&ExecOptions> {
        None
    }
}

/// Why a loop run could not be executed (SPEC §3.3 "thrown error"). Its
/// message is what the failed run records as its `error`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The target's account could not be resolved (SPEC §5.4), before
    /// anything was spawned.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The workflow runner failed: a store error, a step another runner
    /// holds, a step that would not start.
    #[error(transparent)]
    Workflow(#[from] WorkflowError),
    /// The database of a workflow target could not be opened or read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A workflow target, on a runner started without a database.
    #[error("cannot run workflow {0}: this runner was started without a database")]
    NoDatabase(WorkflowId),
    /// The loop's workflow does not exist.
    #[error("workflow not found: {0}")]
    WorkflowNotFound(WorkflowId),
    /// The executor panicked; the message is the panic's.
    #[error("executor panicked: {0}")]
    Panicked(String),
}

/// The production executor: command and agent targets become processes
/// through `loops_exec::execute_target`; workflow targets run their stored
/// workflow (SPEC §6.8), which needs the database ([`with_database`]).
///
/// [`with_database`]: ProcessExecutor::with_database
pub struct ProcessExecutor<'a> {
    /// Where `startedAt`/`finishedAt` come from.
    pub clock: &'a dyn Clock,
    /// Environment, output cap and kill grace of every child.
    pub exec: ExecOptions,
    /// The database workflow targets read their workflow from and record
    /// their runs in; `None` fails workflow targets.
    pub database: Option<Location>,
    /// The data directory whose `logs/` gets each run's output as it is
    /// produced; `None` keeps no run logs.
    pub logs: Option<PathBuf>,
    /// Where the first failure to keep a run's log is noted.
    pub on_log_error: Option<&'a (dyn Fn(&str) + Sync)>,
    /// Whether that failure was noted already.
    log_error_noted: AtomicBool,
}

impl<'a> ProcessExecutor<'a> {
    /// An executor with the SPEC defaults and no database.
    pub fn new(clock: &'a dyn Clock) -> ProcessExecutor<'a> {
        ProcessExecutor {
            clock,
            exec: ExecOptions::default(),
            database: None,
            logs: None,
            on_log_error: None,
            log_error_noted: AtomicBool::new(false),
        }
    }

    /// Keeps each run's output in `<data_dir>/logs/<run-id>.log` as it is
    /// produced; the first failure to do so goes to `on_error`, once.
    pub fn with_logs(
        mut self,
        data_dir: &Path,
        on_error: Option<&'a (dyn Fn(&str) + Sync)>,
    ) -> ProcessExecutor<'a> {
        self.logs = Some(data_dir.to_path_buf());
        self.on_log_error = on_error;
        self
    }

    /// Starts the log of `run`, or notes why it cannot.
    fn start_log(&self, run: &LoopRun) -> Option<RunLog> {
        let data_dir = self.logs.as_deref()?;
        let started =
            prepare_logs_dir(data_dir).and_then(|dir| RunLog::create(&dir, &run.id.to_string()));
        match started {
            Ok(log) => Some(log),
            Err(e) => {
                self.note_log_error(&format!("cannot start the log of run {}: {e}", run.id));
                None
            }
        }
    }

    fn note_log_error(&self, message: &str) {
        if let Some(note) = self.on_log_error
            && !self.log_error_noted.swap(true, Ordering::Relaxed)
        {
            note(&format!(
                "{message}; runs go on, and `loops logs` shows their stored output \
                 (noted once)"
            ));
        }
    }

    /// An executor with the SPEC defaults whose workflow targets use the
    /// database `store` was opened on (none for an in-memory store), and
    /// whose runs and hooks mask that database's password in what they
    /// write (issue 25 §2).
    pub fn for_store(clock: &'a dyn Clock, store: &Store) -> ProcessExecutor<'a> {
        let executor = ProcessExecutor::new(clock);
        match store.location() {
            Some(location) => executor.with_database(location),
            None => executor,
        }
    }

    /// Runs workflow targets against the database at `location` (a SQLite
    /// file's path, or a PostgreSQL location). Each workflow run opens its
    /// own connection to it on the run's worker thread, since a store
    /// handle cannot be shared between threads. A PostgreSQL database's
    /// password is masked in what runs and hooks write.
    pub fn with_database(mut self, location: impl Into<Location>) -> ProcessExecutor<'a> {
        let location = location.into();
        mask_database_password(&mut self.exec, &location);
        self.database = Some(location);
        self
    }

    /// SPEC §6.8: runs the loop's workflow under the key of this slot and
    /// attempt, with the target's timeout.
    fn execute_workflow_target(
        &self,
        target: &WorkflowTarget,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, RunError> {
        let Some(location) = &self.database else {
            return Err(RunError::NoDatabase(target.workflow_id));
        };
        let store = location.open("workflow", Arc::new(SystemProbe))?;
        // By id only: archived workflows still run (SPEC §4.3).
        let workflow = store
            .get_workflow(&target.workflow_id)?
            .ok_or(RunError::WorkflowNotFound(target.workflow_id))?;
        let on_retry = |e: &StoreError| {
            (control.on_retry)(&format!(
                "recording the workflow run of run {} failed, retrying until it succeeds: {e}",
                run.id
            ));
        };
        let opts = WorkflowRunOptions {
            exec: self.exec.clone(),
            spawn_id: control.spawn_id,
            stop: Some(&control.cancel),
            idempotency_key: Some(loop_workflow_key(&lp.id, run.scheduled_for, run.attempt)),
            loop_context: Some((lp, run)),
            timeout_ms: target.timeout_ms,
            on_spawn: Some(control.on_spawn),
            on_retry: Some(&on_retry),
            ..WorkflowRunOptions::new(self.clock)
        };
        Ok(execute_workflow(&store, &workflow, &opts)?.result)
    }
}

/// Adds the password of the database at `location` (a PostgreSQL one), in
/// each spelling its connection string holds, to the values `exec` masks in
/// what runs and hooks write (issue 25 §2). The values already there are
/// kept, and none is added twice. A SQLite file has no password.
///
/// ```
/// use loops_exec::ExecOptions;
/// use loops_store::{DatabaseUrl, Location};
///
/// let url = DatabaseUrl::parse("postgres://loops:db-secret-1@db.internal/loops")?;
/// let location = Location::Postgres { url, host: "web-1".into() };
/// let mut exec = ExecOptions {
///     secret_values: vec!["set-by-the-caller".into()],
///     ..ExecOptions::default()
/// };
/// loops_scheduler::mask_database_password(&mut exec, &location);
/// assert_eq!(exec.secret_values, ["set-by-the-caller", "db-secret-1"]);
/// # Ok::<(), loops_store::StoreError>(())
/// ```
pub fn mask_database_password(exec: &mut ExecOptions, location: &Location) {
    let Location::Postgres { url, .. } = location else {
        return;
    };
    for value in url.password_spellings() {
        if !exec.secret_values.contains(value) {
            exec.secret_values.push(value.clone());
        }
    }
}

impl RunExecutor for ProcessExecutor<'_> {
    fn execute(
        &self,
        lp: &Loop,
        run: &LoopRun,
        control: &RunControl<'_>,
    ) -> Result<ExecutorResult, RunError> {
        let target = match &lp.target {
            Target::Workflow(w) => return self.execute_workflow_target(w, lp, run, control),
            Target::Command(c) => loops_core::ProcessTarget::Command(c.clone()),
            Target::Agent(a) => loops_core::ProcessTarget::Agent(a.clone()),
        };
        let log = self.start_log(run);
        let ctx = RunContext {
            clock: self.clock,
            cancel: Some(&control.cancel),
            spawn_id: control.spawn_id,
            log: log.as_ref(),
            output_seen: control.output_seen,
        };
        let result = execute_target(
            &target,
            &RunMetadata::for_loop_run(lp, run),
            &self.exec,
            &ctx,
            &mut |p| (control.on_spawn)(p),
        );
        if let Some(e) = log.as_ref().and_then(RunLog::error) {
            self.note_log_error(e);
        }
        Ok(result?)
    }

    fn exec_options(&self) -> Option<&ExecOptions> {
        Some(&self.exec)
    }
}

#[cfg(test)]
mod tests {
    use loops_exec::SystemClock;
    use loops_store::DatabaseUrl;

    use super::*;

    fn postgres(url: &str) -> Location {
        Location::Postgres {
            url: DatabaseUrl::parse(url).expect("a connection string"),
            host: "web-1".to_owned(),
        }
    }

    #[test]
    fn the_database_password_is_added_to_the_values_set_before() {
        let mut executor = ProcessExecutor::new(&SystemClock);
        executor.exec.secret_values = vec!["set-by-the-caller".to_owned()];
        let executor = executor.with_database(postgres("postgres://loops:db-secret-1@h/loops"));
        assert_eq!(
            executor.exec.secret_values,
            ["set-by-the-caller", "db-secret-1"]
        );
        // A second database, or the same one again, adds only what is new.
        let executor = executor
            .with_database(postgres("postgres://loops:db-secret-1@h/loops"))
            .with_database(postgres("host=h user=loops password='second pass'"));
        assert_eq!(
            executor.exec.secret_values,
            [
                "set-by-the-caller",
                "db-secret-1",
                "second pass",
                "'second pass'"
            ]
        );
        // A SQLite file has no password: nothing changes.
        let executor = executor.with_database(Path::new("/data/loops.db"));
        assert_eq!(executor.exec.secret_values.len(), 4);
    }
}
