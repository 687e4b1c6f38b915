//! Files and a socket only this user owns and reaches: the daemon's own
//! files, opened after an owner check so that a link planted in the data
//! directory cannot redirect them, and its wake-up socket, bound owner-only
//! and telling each datagram's sender.
//!
//! - [`open_private_append`] and [`open_no_follow`] never follow a symbolic
//!   link (`O_NOFOLLOW`), and only accept a regular file owned by this
//!   process's user; a file with a wider mode than 0600 is narrowed through
//!   the open descriptor, never the path.
//! - [`bind_private_datagram`] creates the socket 0600 whatever the umask:
//!   it binds inside a fresh 0700 directory, narrows the socket's mode
//!   there, and only then renames it into place, so the socket is never
//!   reachable with a wider mode. (Linux ignores `fchmod` on a socket's
//!   descriptor, and the umask is process-wide, so neither can do it.)
//! - [`recv_with_uid`] says which user sent a datagram, where the OS tells
//!   (`SO_PASSCRED` on Linux), so the daemon can ignore other users.
//!
//! Whose a file is comes from [`loops_core::ownership`], the decision the
//! store's data-directory checks share.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use loops_core::{Ownership, ownership};
use nix::fcntl::OFlag;

/// The mode of every private file: read and write for the owner only.
const PRIVATE_MODE: u32 = 0o600;

/// `O_NOFOLLOW`, and `O_NONBLOCK` so that a FIFO planted at the path fails
/// the regular-file check instead of blocking the open forever. On a
/// regular file, the only kind these opens accept, `O_NONBLOCK` changes
/// nothing.
const NO_FOLLOW_NO_WAIT: i32 = OFlag::O_NOFOLLOW.bits() | OFlag::O_NONBLOCK.bits();

/// The effective user id of this process.
pub fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Opens `path` for appending, creating it with mode 0600; refuses a
/// symbolic link, anything but a regular file, and a file of another user
/// (see the module docs).
pub fn open_private_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(PRIVATE_MODE)
        .custom_flags(NO_FOLLOW_NO_WAIT)
        .open(path)
        .map_err(|e| explain(path, e))?;
    check_private(path, &file)?;
    Ok(file)
}

/// Opens `path` read-only without following a symbolic link; refuses
/// anything but a regular file of this process's user.
pub fn open_no_follow(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(NO_FOLLOW_NO_WAIT)
        .open(path)
        .map_err(|e| explain(path, e))?;
    check_owned(path, &file)?;
    Ok(file)
}

/// `ELOOP` from `O_NOFOLLOW` means the last component is a link: say so.
fn explain(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) {
        return io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a symbolic link; loops never follows links for its own files (remove it)",
                path.display()
            ),
        );
    }
    e
}

fn check_owned(path: &Path, file: &File) -> io::Result<std::fs::Metadata> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file (remove it)", path.display()),
        ));
    }
    let me = effective_uid();
    match ownership(meta.uid(), meta.mode(), me) {
        Ownership::Foreign { owner } => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} belongs to uid {owner}, not to this user (uid {me}); remove it",
                path.display(),
            ),
        )),
        // Others' access is narrowed by `check_private` where it matters.
        Ownership::WritableByOthers | Ownership::ReadableByOthers | Ownership::OwnerOnly => {
            Ok(meta)
        }
    }
}

fn check_private(path: &Path, file: &File) -> io::Result<()> {
    let meta = check_owned(path, file)?;
    // Any mode but exactly 0600 is made 0600: group or others lose every
    // access, whatever `ownership` says of them, and the owner gets
    // read and write, since loops appends.
    if meta.mode() & 0o777 != PRIVATE_MODE {
        // `File::set_permissions` is `fchmod`: the descriptor, not the path.
        file.set_permissions(std::fs::Permissions::from_mode(PRIVATE_MODE))?;
    }
    Ok(())
}

/// Binds a unix datagram socket at `path` with mode 0600, replacing what
/// is there (a dead daemon's socket, or a planted link, which is replaced,
/// never followed). `nonce` names the temporary directory it is bound in
/// (`.<nonce>` next to `path`); it must differ between concurrent callers,
/// and be short: `.<nonce>/s` must fit a socket address as `path` does.
/// On Linux the socket receives its senders' credentials (see
/// [`recv_with_uid`]).
pub fn bind_private_datagram(path: &Path, nonce: &str) -> io::Result<UnixDatagram> {
    let Some(dir) = path.parent() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a file path", path.display()),
        ));
    };
    let tmp_dir = dir.join(format!(".{nonce}"));
    // `mkdir` never follows a link and fails on anything already there;
    // the umask can only narrow 0700.
    std::fs::DirBuilder::new().mode(0o700).create(&tmp_dir)?;
    let bound = bind_in(&tmp_dir, path);
    let _ = std::fs::remove_dir(&tmp_dir);
    bound
}

fn bind_in(tmp_dir: &Path, path: &Path) -> io::Result<UnixDatagram> {
    let tmp: PathBuf = tmp_dir.join("s");
    let sock = UnixDatagram::bind(&tmp)?;
    let placed = (|| {
        // Nobody else can reach into the fresh 0700 directory, so naming
        // the socket by its path here is safe.
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(PRIVATE_MODE))?;
        pass_credentials(&sock)?;
        std::fs::rename(&tmp, path)
    })();
    match placed {
        Ok(()) => Ok(sock),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn pass_credentials(sock: &UnixDatagram) -> io::Result<()> {
    rustix::net::sockopt::set_socket_passcred(sock, true).map_err(io::Error::from)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn pass_credentials(_sock: &UnixDatagram) -> io::Result<()> {
    Ok(())
}

/// Receives one datagram into `buf`; returns its length and, where the OS
/// tells (Linux, on a socket from [`bind_private_datagram`]), the sender's
/// uid.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn recv_with_uid(sock: &UnixDatagram, buf: &mut [u8]) -> io::Result<(usize, Option<u32>)> {
    use std::mem::MaybeUninit;

    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = rustix::net::recvmsg(sock, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)?;
    let mut uid = None;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmCredentials(cred) = message {
            uid = Some(cred.uid.as_raw());
        }
    }
    Ok((msg.bytes, uid))
}

/// Receives one datagram into `buf`; this platform does not tell the
/// sender, so the uid is `None`.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn recv_with_uid(sock: &UnixDatagram, buf: &mut [u8]) -> io::Result<(usize, Option<u32>)> {
    Ok((sock.recv(buf)?, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("daemon.pid");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let read = open_no_follow(&path).map(drop);
            let append = open_private_append(&path).map(drop);
            let _ = tx.send((read, append));
        });
        // A blocked open never answers; a deadline turns that into a failure.
        let (read, append) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("opening a FIFO blocked");
        assert!(read.is_err() && append.is_err(), "{read:?} {append:?}");
    }

    #[test]
    fn a_planted_link_is_refused_and_its_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "precious").unwrap();
        let link = dir.path().join("daemon.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = open_private_append(&link).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        assert!(open_no_follow(&link).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn a_wide_mode_is_narrowed_to_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.log");
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        open_private_append(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_socket_is_0600_and_tells_its_sender() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.sock");
        // A link planted where the socket goes is replaced, not followed.
        let target = dir.path().join("target");
        std::fs::write(&target, "x").unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let sock = bind_private_datagram(&path, "st1").unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert!(!meta.file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
        assert!(!dir.path().join(".st1").exists());
        let client = UnixDatagram::unbound().unwrap();
        client.send_to(b"wake", &path).unwrap();
        let mut buf = [0u8; 16];
        let (n, uid) = recv_with_uid(&sock, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"wake");
        if cfg!(target_os = "linux") {
            assert_eq!(uid, Some(effective_uid()));
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_socket_path_at_the_address_limit_still_binds() {
        // `sun_path` holds 108 bytes with the terminating NUL on Linux.
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().as_os_str().len() + "/".len() + "/daemon.sock".len();
        let pad = "p".repeat(107 - base);
        let data = dir.path().join(pad);
        std::fs::create_dir(&data).unwrap();
        let path = data.join("daemon.sock");
        assert_eq!(path.as_os_str().len(), 107);
        bind_private_datagram(&path, "sabcdef").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    }
}
