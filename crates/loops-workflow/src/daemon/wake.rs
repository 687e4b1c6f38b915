//! Waking the daemon at once when the CLI changes something (SPEC §9 item
//! 6: the original polls every second and nothing wakes it).
//!
//! The daemon binds a unix datagram socket, `<data dir>/daemon.sock`, and a
//! small thread blocks on it. Every datagram becomes a wake-up of the
//! daemon's store thread, which then re-plans at once; between wake-ups the
//! daemon sleeps until its next deadline, with no polling. The CLI sends
//! `wake` after each successful write command ([`notify_daemon`]); `loops
//! daemon stop` sends `stop grace_ms=<n>` before its SIGTERM, so the grace
//! period it asks for is known before the stop begins.
//!
//! Everything here is best effort: a missing socket (no daemon), a full
//! queue, or a path too long for a socket address only means the daemon
//! notices the change at its next timed wake-up (at most a minute later).
//! The data directory is private (mode 0700), so only its owner can reach
//! the socket.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Duration;

use loops_exec::CancelToken;

use crate::dispatch::Report;

/// The socket's file name inside the data directory.
pub const SOCKET_FILE: &str = "daemon.sock";

/// Tells a daemon serving `data_dir` to look at the database again. Best
/// effort and non-blocking; does nothing when no daemon listens.
pub fn notify_daemon(data_dir: &Path) {
    send(&data_dir.join(SOCKET_FILE), b"wake");
}

/// Asks the daemon serving `data_dir` to stop, letting runs in flight
/// finish within `grace`. Returns whether the request was delivered.
pub(crate) fn request_stop(data_dir: &Path, grace: Duration) -> bool {
    let message = format!("stop grace_ms={}", grace.as_millis());
    send(&data_dir.join(SOCKET_FILE), message.as_bytes())
}

fn send(socket: &Path, message: &[u8]) -> bool {
    let Ok(sock) = UnixDatagram::unbound() else {
        return false;
    };
    // A daemon that stopped reading must not stall a CLI command.
    if sock.set_nonblocking(true).is_err() {
        return false;
    }
    sock.send_to(message, socket).is_ok()
}

/// The daemon's end of the socket: a thread that turns datagrams into
/// [`Report::Wake`], and a `stop` request into a cancel of the stop token.
pub(crate) struct WakeListener {
    path: PathBuf,
    bye: String,
    thread: Option<JoinHandle<()>>,
}

impl WakeListener {
    /// Binds `path`, replacing a socket file a dead daemon left behind (the
    /// caller holds the daemon lease, so no live daemon owns it).
    pub(crate) fn bind(
        path: &Path,
        tx: Sender<Report>,
        grace: Arc<AtomicU64>,
        stop: CancelToken,
    ) -> io::Result<WakeListener> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let sock = UnixDatagram::bind(path)?;
        // Only the closing daemon knows this word, so no client can end the
        // listener.
        let bye = format!("bye {}", loops_store::new_lease_id());
        let expected = bye.clone();
        let thread = std::thread::Builder::new()
            .name("loops-wake".to_owned())
            .spawn(move || listen(&sock, &tx, &grace, &stop, &expected))?;
        Ok(WakeListener {
            path: path.to_owned(),
            bye,
            thread: Some(thread),
        })
    }
}

fn listen(
    sock: &UnixDatagram,
    tx: &Sender<Report>,
    grace: &AtomicU64,
    stop: &CancelToken,
    bye: &str,
) {
    let mut buf = [0u8; 256];
    loop {
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let message = String::from_utf8_lossy(&buf[..n]);
        if message == bye {
            return;
        }
        if let Some(rest) = message.strip_prefix("stop") {
            if let Some(ms) = rest
                .trim()
                .strip_prefix("grace_ms=")
                .and_then(|v| v.parse::<u64>().ok())
            {
                grace.store(ms, Ordering::SeqCst);
            }
            stop.cancel("stop requested by `loops daemon stop`");
        }
        if tx.send(Report::Wake).is_err() {
            return;
        }
    }
}

impl Drop for WakeListener {
    fn drop(&mut self) {
        // If the goodbye cannot be sent the thread stays blocked; it holds
        // nothing but the socket and ends with the process.
        if let Some(thread) = self.thread.take()
            && send(&self.path, self.bye.as_bytes())
        {
            // The thread only forwards datagrams; a panic there has nothing
            // left to report.
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
