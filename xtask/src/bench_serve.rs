//! `cargo xtask bench --serve`: what `loops serve` costs (issue 29). It
//! seeds two data directories the way `--scale` does (`bench_scale`): one
//! with 1,000 loops and one with 100,000, starts `loops serve` on each,
//! and measures, the compared requests taking turns:
//! - `GET /api/v1/loops?limit=1000` against `loops --json list`, each as
//!   a client sees it (connect or spawn to the last byte), and their
//!   ratio (goal: at most 1.5);
//! - the loops page `/`, request to last byte over loopback (goal: at
//!   most 30 ms with 1,000 loops), and `/api/v1/loops` beside it;
//! - page 1 and page 1,000 of 100,000 loops, through the API
//!   (`limit=100&offset=…`) and the page (`/?page=…`);
//! - the CPU of the serving process while 50 clients follow
//!   `/api/v1/runs/{id}/output?follow=1&showOutput=1` of a run that
//!   writes 100 lines a second, next to the same process idle (goal: at
//!   most 5% of one core).
//!
//! It prints a table of the figures and asserts none: a machine shared
//! with other work moves them. Linux only (it reads `/proc`); seeding
//! needs the `sqlite3` shell. `--bin PATH` measures that binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::bench::loops;
use crate::bench_scale::{Size, daemon::clock_ticks_per_s, seed_one};

/// Samples of each timed request, after one warm-up; medians are shown.
const SAMPLES: usize = 15;
/// The clients that follow the busy run's output.
const FOLLOWERS: usize = 50;
/// How long the CPU is measured, idle and then followed.
const CPU_WINDOW: Duration = Duration::from_secs(10);
/// The longest a server may take to start, or a stream to begin.
const START: Duration = Duration::from_secs(60);

/// Seeds, serves and measures; the table at the end.
pub(crate) fn bench(bin: &Path, scratch: &Path) -> Result<(), String> {
    let mut rows: Vec<(String, String, String)> = Vec::new();
    let small = scratch.join("serve-1k");
    let large = scratch.join("serve-100k");
    for dir in [&small, &large] {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    seed_one(
        bin,
        &small,
        "1,000 loops",
        Size {
            loops: 1_000,
            runs: 10_000,
        },
    )?;

    let server = Server::start(bin, &small)?;
    // 1. The API's list of 1,000 loops against the CLI's.
    let (api, cli) = alternate(
        || server.get("/api/v1/loops?limit=1000").map(|(_, t)| t),
        || timed_cli(bin, &small, &["--json", "list"]),
    )?;
    let (body, _) = server.get("/api/v1/loops?limit=1000")?;
    let cli_text = loops(bin, &small, &["--json", "list"])?;
    let same = serde_same(&body, &cli_text);
    rows.push(row("GET /api/v1/loops?limit=1000 (1,000 loops)", api, ""));
    rows.push(row("loops --json list (1,000 loops)", cli, ""));
    rows.push((
        "API / CLI".to_owned(),
        format!("{:.2}x", api / cli),
        format!(
            "goal <= 1.5x{}",
            if same { "" } else { "; documents differ!" }
        ),
    ));
    // 2. The loops page, and the default API page beside it.
    let (page, api100) = alternate(
        || server.get("/").map(|(_, t)| t),
        || server.get("/api/v1/loops").map(|(_, t)| t),
    )?;
    let (html, _) = server.get("/")?;
    rows.push(row(
        "GET / (loops page, 1,000 loops)",
        page,
        &format!("goal <= 30 ms; {} KB", html.len() / 1024),
    ));
    rows.push(row("GET /api/v1/loops (first 100)", api100, ""));
    // 3. 50 followers of a busy run.
    let (idle, followed) = followers(bin, &small, &server)?;
    rows.push((
        "serve CPU, idle".to_owned(),
        format!("{idle:.2}%"),
        "of one core".to_owned(),
    ));
    rows.push((
        format!("serve CPU, {FOLLOWERS} followers of a busy run"),
        format!("{followed:.2}%"),
        "goal <= 5% of one core".to_owned(),
    ));
    server.stop();

    // 4. Paging 100,000 loops.
    seed_one(
        bin,
        &large,
        "100,000 loops",
        Size {
            loops: 100_000,
            runs: 10_000,
        },
    )?;
    let server = Server::start(bin, &large)?;
    let (first, thousandth) = alternate(
        || server.get("/api/v1/loops?limit=100").map(|(_, t)| t),
        || {
            server
                .get("/api/v1/loops?limit=100&offset=99900")
                .map(|(_, t)| t)
        },
    )?;
    rows.push(row("API page 1 of 100,000 loops", first, ""));
    rows.push(row("API page 1,000 of 100,000 loops", thousandth, ""));
    let (first, thousandth) = alternate(
        || server.get("/?page=1").map(|(_, t)| t),
        || server.get("/?page=1000").map(|(_, t)| t),
    )?;
    rows.push(row("loops page 1 of 100,000 loops", first, "goal <= 30 ms"));
    rows.push(row("loops page 1,000 of 100,000 loops", thousandth, ""));
    server.stop();

    println!("\n| figure | median | note |\n|---|---:|---|");
    for (what, figure, note) in rows {
        println!("| {what} | {figure} | {note} |");
    }
    Ok(())
}

/// A table row of a time in ms.
fn row(what: &str, ms: f64, note: &str) -> (String, String, String) {
    (what.to_owned(), format!("{ms:.1} ms"), note.to_owned())
}

/// The medians of `a` and `b`, in ms, sampled in turns after a warm-up
/// of each.
fn alternate(
    mut a: impl FnMut() -> Result<Duration, String>,
    mut b: impl FnMut() -> Result<Duration, String>,
) -> Result<(f64, f64), String> {
    a()?;
    b()?;
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for _ in 0..SAMPLES {
        xs.push(a()?);
        ys.push(b()?);
    }
    Ok((median(xs), median(ys)))
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// The wall time of `loops <args>`.
fn timed_cli(bin: &Path, data: &Path, args: &[&str]) -> Result<Duration, String> {
    let started = Instant::now();
    loops(bin, data, args)?;
    Ok(started.elapsed())
}

/// Whether two JSON texts hold the same document (compared as text with
/// the white space taken out: the bench has no JSON parser).
fn serde_same(a: &str, b: &str) -> bool {
    let squeeze = |s: &str| s.split_whitespace().collect::<String>();
    squeeze(a) == squeeze(b)
}

/// The CPU of the server, in % of one core, idle and then while
/// [`FOLLOWERS`] clients follow a busy run's output.
fn followers(bin: &Path, data: &Path, server: &Server) -> Result<(f64, f64), String> {
    loops(
        bin,
        data,
        &[
            "create",
            "command",
            "busy",
            "--every",
            "24h",
            "--cmd",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); echo line-$i; sleep 0.01; done",
        ],
    )?;
    let idle = cpu_percent(server.child.id())?;
    let mut run_now = Command::new(bin)
        .args(["--quiet", "run-now", "busy"])
        .env("LOOPS_DATA_DIR", data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting loops run-now: {e}"))?;
    let result = follow_and_measure(server);
    let _ = run_now.kill();
    let _ = run_now.wait();
    Ok((idle, result?))
}

/// Starts the followers once the busy run runs, and measures.
fn follow_and_measure(server: &Server) -> Result<f64, String> {
    let started = Instant::now();
    let run_id = loop {
        let (body, _) = server.get("/api/v1/runs?loop=busy&status=running&limit=1")?;
        if let Some(id) = field(&body, "\"id\": \"") {
            break id;
        }
        if started.elapsed() > START {
            return Err("the busy run did not start".to_owned());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (tx, rx) = mpsc::channel();
    let mut streams = Vec::new();
    for _ in 0..FOLLOWERS {
        let path = format!("/api/v1/runs/{run_id}/output?follow=1&showOutput=1");
        let mut stream = server.send(&path, false)?;
        let tx = tx.clone();
        let reader = stream
            .try_clone()
            .map_err(|e| format!("cloning a stream: {e}"))?;
        streams.push(stream.try_clone().map_err(|e| e.to_string())?);
        std::thread::spawn(move || {
            let mut lines = BufReader::new(reader).lines();
            let mut told = false;
            while let Some(Ok(line)) = lines.next() {
                if !told && line.contains("line-") {
                    let _ = tx.send(());
                    told = true;
                }
            }
        });
        stream.flush().map_err(|e| e.to_string())?;
    }
    for _ in 0..FOLLOWERS {
        rx.recv_timeout(START)
            .map_err(|_| "a follower saw no output".to_owned())?;
    }
    let cpu = cpu_percent(server.child.id());
    for stream in streams {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    cpu
}

/// The value of the first `"key": "` string field in `json` at `key`.
fn field(json: &str, key: &str) -> Option<String> {
    let rest = json.split_once(key)?.1;
    Some(rest.split('"').next()?.to_owned())
}

/// The CPU `pid` used over [`CPU_WINDOW`], in % of one core.
fn cpu_percent(pid: u32) -> Result<f64, String> {
    let before = crate::bench_daemon::cpu_ticks(pid)?;
    let started = Instant::now();
    std::thread::sleep(CPU_WINDOW);
    let ticks = crate::bench_daemon::cpu_ticks(pid)?.saturating_sub(before);
    let secs = started.elapsed().as_secs_f64();
    #[expect(clippy::cast_precision_loss, reason = "a tick count, far below 2^52")]
    let used = ticks as f64 / clock_ticks_per_s();
    Ok(used / secs * 100.0)
}

/// A running `loops serve`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    /// `127.0.0.1:<port>`.
    addr: String,
    token: String,
}

impl Server {
    /// `loops serve --listen 127.0.0.1:0` on `data`, once it printed its
    /// login URL.
    pub(crate) fn start(bin: &Path, data: &Path) -> Result<Server, String> {
        let mut child = Command::new(bin)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("LOOPS_DATA_DIR", data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting loops serve: {e}"))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            addr: String::new(),
            token: String::new(),
        };
        while server.token.is_empty() {
            let line = rx
                .recv_timeout(START)
                .map_err(|_| "loops serve printed no login URL".to_owned())?;
            if let Some(url) = line.split_once("log in at http://").map(|(_, u)| u)
                && let Some((addr, token)) = url.split_once("/login?token=")
            {
                server.addr = addr.to_owned();
                server.token = token.to_owned();
            }
        }
        Ok(server)
    }

    /// Sends `GET path` with the token (as the cookie the pages take);
    /// the stream, to read the answer from. `close` asks the server to
    /// close it after answering.
    fn send(&self, path: &str, close: bool) -> Result<TcpStream, String> {
        let mut stream = TcpStream::connect(&self.addr).map_err(|e| format!("connecting: {e}"))?;
        let connection = if close { "Connection: close\r\n" } else { "" };
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nCookie: loops_token={}\r\n\
             Authorization: Bearer {}\r\n{connection}\r\n",
            self.addr, self.token, self.token
        );
        stream
            .write_all(request.as_bytes())
            .map_err(|e| format!("sending: {e}"))?;
        Ok(stream)
    }

    /// `GET path`: the body, and the time from connecting to the last
    /// byte. A status but 200 is an error.
    pub(crate) fn get(&self, path: &str) -> Result<(String, Duration), String> {
        let started = Instant::now();
        let mut stream = self.send(path, true)?;
        let mut raw = Vec::new();
        stream
            .read_to_end(&mut raw)
            .map_err(|e| format!("reading: {e}"))?;
        let took = started.elapsed();
        let raw = String::from_utf8_lossy(&raw);
        let (head, body) = raw.split_once("\r\n\r\n").ok_or("no response head")?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
        }
        // A chunked body keeps its chunk sizes: fine for a size, and the
        // JSON documents come whole.
        Ok((body.to_owned(), took))
    }

    /// The serving process's id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the server (as dropping it does).
    fn stop(self) {
        drop(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_medians() {
        assert_eq!(
            field(r#"[{"id": "abc", "x": 1}]"#, "\"id\": \""),
            Some("abc".to_owned())
        );
        assert_eq!(field("[]", "\"id\": \""), None);
        let ms = |n| Duration::from_millis(n);
        assert!((median(vec![ms(3), ms(1), ms(2)]) - 2.0).abs() < 1e-9);
        assert!(serde_same("[1, 2]\n", "[1,2]"));
    }
}
