//! Waking the daemon at once when the CLI changes something (SPEC §9 item
//! 6: the original polls every second and nothing wakes it).
//!
//! The daemon binds a unix datagram socket, `<data dir>/daemon.sock`, and a
//! small thread blocks on it. Every datagram becomes a message on the
//! daemon's report channel, the one its store thread blocks on: a wake-up
//! ([`Report::Wake`]), after which the daemon re-plans at once, or a stop
//! request ([`Report::Stop`]). Between wake-ups the daemon sleeps until its
//! next deadline, with no polling. The CLI sends `wake` after each
//! successful write command ([`notify_daemon`]); `loops daemon stop` sends
//! `stop grace_ms=<n>` before its SIGTERM, so the grace period it asks for
//! is known before the stop begins. That grace wins over the daemon's own
//! (`daemon run --grace`), also when it arrives after the signal; a bare
//! `stop` keeps the daemon's own.
//!
//! Everything here is best effort: a missing socket (no daemon), a full
//! queue, or a path too long for a socket address only means the daemon
//! notices the change at its next timed wake-up (at most a minute later).
//!
//! **Hardening.** The socket is 0600 whatever the umask
//! (`loops_exec::owner_only::bind_private_datagram`), inside the private data
//! directory. Where the OS tells the sender (Linux), a datagram from
//! another user is ignored; the daemon logs how many it ignored. A
//! `grace_ms` is capped at the CLI's largest duration (100 years).
//! Wake-ups are coalesced: while one is pending (the daemon has not begun
//! the turn it asked for), further datagrams add nothing, and the listener
//! forwards at most one wake-up or stop request per [`MIN_WAKE_GAP`], so a
//! flood of datagrams costs the daemon a `recvmsg` each and a few turns a
//! second. A stop request is never coalesced away.
//! Coalescing never loses a change: a write made before its datagram was
//! read is seen by the pending turn, which reads the database only after
//! it clears the flag.
//!
//! On a database other hosts share (PostgreSQL), [`start_listener`] also
//! wakes the daemon on a `pg_notify` from any host.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use loops_exec::owner_only::{bind_private_datagram, effective_uid, recv_with_uid};

use loops_store::{Listener, Store};

use super::options::POLL_ONLY_MAX_SLEEP;
use crate::dispatch::{Dispatcher, Report};

/// The socket's file name inside the data directory.
pub const SOCKET_FILE: &str = "daemon.sock";

/// The least time between two wake-ups the listener forwards.
const MIN_WAKE_GAP: Duration = Duration::from_millis(20);

/// Tells a daemon serving `data_dir` to look at the database again. Best
/// effort and non-blocking; does nothing when no daemon listens.
pub fn notify_daemon(data_dir: &Path) {
    send(&data_dir.join(SOCKET_FILE), b"wake");
}

/// Asks the daemon serving `data_dir` to stop, letting runs in flight
/// finish within `grace`. Returns whether the request was delivered.
pub fn request_stop(data_dir: &Path, grace: Duration) -> bool {
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

/// What the listener thread shares with the daemon's store thread.
#[derive(Debug, Default)]
pub(crate) struct WakeShared {
    /// A wake-up was forwarded and its turn has not begun.
    pending: AtomicBool,
    /// Datagrams ignored because another user sent them, since last taken.
    rejected: AtomicU64,
    /// The uid of the last ignored sender.
    rejected_uid: AtomicU32,
}

impl WakeShared {
    /// Called at the start of every turn, before it reads the database:
    /// from now on a datagram asks for another turn.
    pub(crate) fn begin_turn(&self) {
        self.pending.store(false, Ordering::SeqCst);
    }

    /// How many datagrams of another user were ignored since the last call,
    /// and the last such user.
    pub(crate) fn take_rejected(&self) -> Option<(u64, u32)> {
        let n = self.rejected.swap(0, Ordering::SeqCst);
        (n > 0).then(|| (n, self.rejected_uid.load(Ordering::SeqCst)))
    }
}

/// The daemon's end of the socket: a thread that turns datagrams into
/// [`Report::Wake`], and a `stop` request into [`Report::Stop`].
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
        shared: Arc<WakeShared>,
    ) -> io::Result<WakeListener> {
        // `.s<6 hex>/s` is no longer than `daemon.sock`, so the temporary
        // path fits a socket address whenever the final one does.
        let id = loops_store::new_lease_id();
        let nonce = format!("s{}", id.as_str().get(..6).unwrap_or("0"));
        let sock = bind_private_datagram(path, &nonce)?;
        // Only the closing daemon knows this word, so no client can end the
        // listener.
        let bye = format!("bye {}", loops_store::new_lease_id());
        let expected = bye.clone();
        let thread = std::thread::Builder::new()
            .name("loops-wake".to_owned())
            .spawn(move || listen(&sock, &tx, &shared, &expected))?;
        Ok(WakeListener {
            path: path.to_owned(),
            bye,
            thread: Some(thread),
        })
    }
}

fn listen(sock: &UnixDatagram, tx: &Sender<Report>, shared: &WakeShared, bye: &str) {
    let me = effective_uid();
    let mut buf = [0u8; 256];
    loop {
        let (n, uid) = match recv_with_uid(sock, &mut buf) {
            Ok(got) => got,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if let Some(uid) = uid.filter(|uid| *uid != me) {
            shared.rejected_uid.store(uid, Ordering::SeqCst);
            // The first one wakes the daemon, which logs it.
            if shared.rejected.fetch_add(1, Ordering::SeqCst) == 0 && !wake(tx, shared) {
                return;
            }
            continue;
        }
        let message = String::from_utf8_lossy(&buf[..n]);
        if message == bye {
            return;
        }
        let delivered = match message.strip_prefix("stop") {
            Some(rest) => stop(tx, rest),
            None => wake(tx, shared),
        };
        if !delivered {
            return;
        }
    }
}

/// Forwards a stop request with the grace `rest` names (` grace_ms=<n>`,
/// capped at the CLI's largest duration), if any; false when the daemon is
/// gone.
fn stop(tx: &Sender<Report>, rest: &str) -> bool {
    let grace = rest
        .trim()
        .strip_prefix("grace_ms=")
        .and_then(|v| v.parse::<u64>().ok())
        .map(|ms| Duration::from_millis(ms.min(loops_core::MAX_DURATION_MS)));
    if tx.send(Report::Stop { grace }).is_err() {
        return false;
    }
    std::thread::sleep(MIN_WAKE_GAP);
    true
}

/// Forwards a wake-up unless one is pending; false when the daemon is gone.
fn wake(tx: &Sender<Report>, shared: &WakeShared) -> bool {
    if shared.pending.swap(true, Ordering::SeqCst) {
        return true;
    }
    if tx.send(Report::Wake).is_err() {
        return false;
    }
    // Datagrams that arrive meanwhile wait in the socket's queue (a full
    // queue drops the newest, which the pending turn covers).
    std::thread::sleep(MIN_WAKE_GAP);
    true
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
/// Starts the thread that wakes the daemon on `pg_notify` from any host
/// (see `loops_store::Store::listen`); its lines go to `lines`, which the
/// serve loop logs. `None`, after a log line, when it cannot listen: the
/// daemon then polls.
pub(super) fn start_listener(
    store: &Store,
    runner_id: &str,
    d: &Dispatcher<'_, '_>,
    lines: &Arc<Mutex<Vec<String>>>,
    log: &dyn Fn(&str),
) -> Option<Listener> {
    let wake = d.sender();
    let line_wake = d.sender();
    let lines = Arc::clone(lines);
    match store.listen(
        &format!("listen:{runner_id}"),
        Box::new(move || {
            let _ = wake.send(Report::Wake);
        }),
        Box::new(move |line: &str| {
            if let Ok(mut lines) = lines.lock() {
                lines.push(line.to_owned());
            }
            let _ = line_wake.send(Report::Wake);
        }),
    ) {
        Ok(listener) => listener,
        Err(e) => {
            log(&format!(
                "warning: cannot listen for wake-ups ({e}); changes made on other hosts \
                 are noticed within {}s",
                POLL_ONLY_MAX_SLEEP.as_secs()
            ));
            None
        }
    }
}
