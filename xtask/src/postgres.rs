//! A throwaway PostgreSQL cluster for `cargo xtask ci` (issue 15): `initdb`
//! into a temporary directory, a server listening on a Unix socket in that
//! directory only, its URL exported to the tests as
//! `LOOPS_TEST_DATABASE_URL`, and the server stopped and the directory
//! removed when the [`Cluster`] is dropped.
//!
//! `initdb` refuses to run as root, so as root the cluster belongs to the
//! `postgres` user (`runuser -u postgres --`); otherwise to the user running
//! CI. When PostgreSQL is not installed and this is a root shell with
//! `apt-get`, it is installed first. When a cluster cannot be had, CI goes
//! on and says why: the tests that need one skip with a visible message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// How an error that means "no cluster could be started" begins.
pub(crate) const NO_CLUSTER: &str = "no PostgreSQL server";

/// The environment variable that hands the cluster's URL to the tests.
pub(crate) const URL_ENV: &str = "LOOPS_TEST_DATABASE_URL";

/// `cargo xtask postgres CMD...`: runs `CMD` with a throwaway cluster's
/// URL in [`URL_ENV`], then stops the cluster.
pub(crate) fn with_cluster(args: &[String]) -> Result<(), String> {
    let (program, rest) = args.split_first().ok_or(
        "usage: cargo xtask postgres CMD [ARGS...] (for example: cargo test -p loops-store)",
    )?;
    let cluster = Cluster::start()?;
    let status = Command::new(program)
        .args(rest)
        .env(URL_ENV, &cluster.url)
        .status()
        .map_err(|e| format!("{program}: {e}"))?;
    drop(cluster);
    if status.success() {
        Ok(())
    } else {
        Err(format!("{program} exited with {status}"))
    }
}

/// A running throwaway cluster; dropping it stops the server and removes
/// its directory.
pub(crate) struct Cluster {
    /// The temporary directory: `data/` and the server's socket.
    dir: PathBuf,
    bindir: PathBuf,
    /// Run the server's tools as the `postgres` user (CI runs as root).
    as_postgres: bool,
    /// The libpq URL of the `postgres` database over the socket.
    pub(crate) url: String,
}

impl Cluster {
    /// Starts a cluster, or says why there is none.
    pub(crate) fn start() -> Result<Cluster, String> {
        let bindir = bindir()?;
        let root = is_root();
        let as_postgres = root && user_exists("postgres");
        if root && !as_postgres {
            return Err("running as root and there is no `postgres` user to run initdb as".into());
        }
        let dir = std::env::temp_dir().join(format!("loops-ci-pg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let cluster = Cluster {
            url: format!(
                "postgresql:///postgres?host={}&user=postgres",
                dir.display()
            ),
            dir,
            bindir,
            as_postgres,
        };
        if as_postgres {
            chown(&cluster.dir, "postgres:postgres")?;
        }
        let data = cluster.dir.join("data");
        cluster.tool(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "-A".as_ref(),
                "trust".as_ref(),
                "--no-sync".as_ref(),
            ],
        )?;
        let options = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off",
            cluster.dir.display()
        );
        let log = cluster.dir.join("server.log");
        cluster.tool(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        )?;
        // The server answers a query over the socket, or CI says so now
        // rather than through every test that needs it.
        let mut psql = Command::new(cluster.bindir.join("psql"));
        psql.args([&cluster.url, "-Atc", "SELECT version()"]);
        let version = output("psql", psql)?;
        eprintln!(
            "postgres: {} on {} ({URL_ENV})",
            String::from_utf8_lossy(&version.stdout).trim(),
            cluster.dir.display()
        );
        Ok(cluster)
    }

    /// Restarts the server (`pg_ctl restart -m fast`): every connection is
    /// cut, as in a failover.
    pub(crate) fn restart(&self) -> Result<(), String> {
        let data = self.dir.join("data");
        let log = self.dir.join("server.log");
        let options = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off",
            self.dir.display()
        );
        self.tool(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-m".as_ref(),
                "fast".as_ref(),
                "-w".as_ref(),
                "restart".as_ref(),
            ],
        )
        .map(drop)
    }

    /// Runs `sql` with `psql` on `url` (unaligned, tuples only, `|`
    /// between columns) and returns its output.
    pub(crate) fn psql(&self, url: &str, sql: &str) -> Result<String, String> {
        let mut psql = Command::new(self.bindir.join("psql"));
        psql.args([url, "-v", "ON_ERROR_STOP=1", "-Atc", sql]);
        let out = output("psql", psql)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The URL of database `name` on this cluster.
    pub(crate) fn url_of(&self, name: &str) -> String {
        format!(
            "postgresql:///{name}?host={}&user=postgres",
            self.dir.display()
        )
    }

    /// Runs one of the server's tools, as the cluster's owner.
    fn tool(&self, name: &str, args: &[&std::ffi::OsStr]) -> Result<Output, String> {
        let program = self.bindir.join(name);
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        };
        cmd.args(args).current_dir(&self.dir);
        output(name, cmd)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let stopped = self.tool(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
                "stop".as_ref(),
            ],
        );
        if let Err(e) = stopped {
            eprintln!("postgres: stopping the throwaway server: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The directory of PostgreSQL's server tools, installing PostgreSQL when
/// it is missing and this is a root shell with `apt-get`.
fn bindir() -> Result<PathBuf, String> {
    let found = || {
        Command::new("pg_config")
            .arg("--bindir")
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
    };
    if let Some(dir) = found() {
        return Ok(dir);
    }
    if !is_root() || Command::new("apt-get").arg("--version").output().is_err() {
        return Err("`pg_config` is not on PATH (install PostgreSQL)".into());
    }
    eprintln!("postgres: `pg_config` is missing; apt-get install -y postgresql");
    let mut install = Command::new("apt-get");
    install
        .args(["install", "-y", "--no-install-recommends", "postgresql"])
        .env("DEBIAN_FRONTEND", "noninteractive");
    output("apt-get install postgresql", install)?;
    found().ok_or_else(|| "`pg_config` is still missing after apt-get install".into())
}

/// Runs `cmd`, naming it `what` in the error of a failure, with its stderr.
fn output(what: &str, mut cmd: Command) -> Result<Output, String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(out)
}

fn chown(path: &Path, owner: &str) -> Result<(), String> {
    let mut cmd = Command::new("chown");
    cmd.arg(owner).arg(path);
    output("chown", cmd).map(drop)
}

fn user_exists(name: &str) -> bool {
    Command::new("id")
        .arg("-u")
        .arg(name)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether this process runs as root (`id -u` prints 0): xtask takes no
/// libc dependency for one call.
pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
