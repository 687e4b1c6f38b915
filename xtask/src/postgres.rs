//! A throwaway PostgreSQL cluster for `cargo xtask ci` (issue 15): `initdb`
//! into a temporary directory, a server listening on a Unix socket in that
//! directory, its URL exported to the tests as `LOOPS_TEST_DATABASE_URL`,
//! and the server stopped and the directory removed when the [`Cluster`]
//! is dropped.
//!
//! It also serves TLS on a free TCP port of 127.0.0.1 (issue 32), with a
//! server certificate for `localhost` signed by a CA made when it starts
//! (rcgen); [`TLS_PORT_ENV`] and [`TLS_CA_ENV`] hand the port and the CA's
//! PEM file to the tests of `sslmode`.
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

/// The variable that hands the cluster's TCP port on 127.0.0.1, where it
/// serves TLS, to the tests.
pub(crate) const TLS_PORT_ENV: &str = "LOOPS_TEST_DATABASE_TLS_PORT";

/// The variable that hands the tests the PEM file of the CA that signed
/// the cluster's server certificate (for `localhost` only).
pub(crate) const TLS_CA_ENV: &str = "LOOPS_TEST_DATABASE_TLS_CA";

/// `cargo xtask postgres CMD...`: runs `CMD` with a throwaway cluster's
/// URL in [`URL_ENV`], then stops the cluster.
pub(crate) fn with_cluster(args: &[String]) -> Result<(), String> {
    let (program, rest) = args.split_first().ok_or(
        "usage: cargo xtask postgres CMD [ARGS...] (for example: cargo test -p loops-store)",
    )?;
    let cluster = Cluster::start()?;
    let status = Command::new(program)
        .args(rest)
        .envs(cluster.env())
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
    /// Its TCP port on 127.0.0.1 (and its Unix socket's number).
    port: u16,
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
        let port = free_port()?;
        let cluster = Cluster {
            url: format!(
                "postgresql:///postgres?host={}&port={port}&user=postgres",
                dir.display()
            ),
            dir,
            bindir,
            as_postgres,
            port,
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
        cluster.set_up_tls(&data)?;
        let options = cluster.options();
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
        let options = self.options();
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
            "postgresql:///{name}?host={}&port={}&user=postgres",
            self.dir.display(),
            self.port
        )
    }

    /// The variables that hand this cluster to the tests: its URL, and
    /// its TLS port and CA.
    pub(crate) fn env(&self) -> [(&'static str, String); 3] {
        [
            (URL_ENV, self.url.clone()),
            (TLS_PORT_ENV, self.port.to_string()),
            (TLS_CA_ENV, self.dir.join("ca.crt").display().to_string()),
        ]
    }

    /// The server's settings: the Unix socket in the cluster's directory,
    /// and TCP on 127.0.0.1 for TLS, which a socket does not carry.
    fn options(&self) -> String {
        format!(
            "-c listen_addresses='127.0.0.1' -c port={} -c unix_socket_directories='{}' \
             -c fsync=off",
            self.port,
            self.dir.display()
        )
    }

    /// Makes a CA and a server certificate for `localhost` it signs: the
    /// CA's certificate into `ca.crt` of the cluster's directory, the
    /// server's certificate and key into `server.crt` and `server.key` of
    /// `data` (mode 0600, the server's own, as it demands), and `ssl = on`
    /// into its `postgresql.conf`.
    fn set_up_tls(&self, data: &Path) -> Result<(), String> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        use std::os::unix::fs::OpenOptionsExt;
        let tls = |e: rcgen::Error| format!("making the cluster's TLS certificate: {e}");
        let mut ca = CertificateParams::new(Vec::new()).map_err(tls)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "loops test cluster CA");
        let ca_key = KeyPair::generate().map_err(tls)?;
        let ca_cert = ca.self_signed(&ca_key).map_err(tls)?;
        let issuer = Issuer::new(ca, ca_key);
        let mut server = CertificateParams::new(vec!["localhost".to_owned()]).map_err(tls)?;
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let server_key = KeyPair::generate().map_err(tls)?;
        let server_cert = server.signed_by(&server_key, &issuer).map_err(tls)?;
        let write = |path: PathBuf, text: &str| -> Result<(), String> {
            let failed = |e: std::io::Error| format!("writing {}: {e}", path.display());
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .map_err(failed)?;
            std::io::Write::write_all(&mut file, text.as_bytes()).map_err(failed)?;
            if self.as_postgres {
                chown(&path, "postgres:postgres")?;
            }
            Ok(())
        };
        write(self.dir.join("ca.crt"), &ca_cert.pem())?;
        write(data.join("server.crt"), &server_cert.pem())?;
        write(data.join("server.key"), &server_key.serialize_pem())?;
        let conf = data.join("postgresql.conf");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&conf)
            .map_err(|e| format!("opening {}: {e}", conf.display()))?;
        std::io::Write::write_all(
            &mut file,
            b"\n# cargo xtask postgres: TLS (issue 32)\nssl = on\n",
        )
        .map_err(|e| format!("writing {}: {e}", conf.display()))
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

/// A TCP port of 127.0.0.1 that is free now.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free TCP port: {e}"))
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
