//! Whether a file, socket or directory is this user's own: the decision
//! behind ssh's StrictModes rule, from an owner uid and a mode to an
//! [`Ownership`] verdict.
//!
//! The store refuses a data directory or database another user could
//! subvert, and loops-exec opens the daemon's own files only when they are
//! this user's. Both read the metadata themselves (this crate does no
//! I/O) and ask [`ownership`] what it means; each then refuses, narrows
//! the mode through a descriptor, or goes on, by its own policy.

/// Mode bits that let group or others write.
const WRITABLE_BY_OTHERS: u32 = 0o022;
/// Mode bits that let group or others read, write or search.
const OPEN_TO_OTHERS: u32 = 0o077;

/// What the owner and mode of a path say about using it as this user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// Another user owns it.
    Foreign {
        /// Its owner's uid.
        owner: u32,
    },
    /// This user's, but group or others may write it, so another user may
    /// have changed it.
    WritableByOthers,
    /// This user's, and others cannot write it, but group or others may
    /// read (or search) it.
    ReadableByOthers,
    /// This user's, and no one else may read or write it.
    OwnerOnly,
}

/// The verdict on a path owned by `owner` with permission bits `mode`,
/// for a process running as `euid`. Only the owner and the group and
/// others bits count: the owner's own bits, the file type and the
/// setuid, setgid and sticky bits do not.
///
/// ```
/// use loops_core::{Ownership, ownership};
/// assert_eq!(ownership(1000, 0o600, 1000), Ownership::OwnerOnly);
/// assert_eq!(ownership(1000, 0o644, 1000), Ownership::ReadableByOthers);
/// assert_eq!(ownership(1000, 0o1777, 1000), Ownership::WritableByOthers);
/// assert_eq!(ownership(0, 0o600, 1000), Ownership::Foreign { owner: 0 });
/// ```
pub fn ownership(owner: u32, mode: u32, euid: u32) -> Ownership {
    if owner != euid {
        Ownership::Foreign { owner }
    } else if mode & WRITABLE_BY_OTHERS != 0 {
        Ownership::WritableByOthers
    } else if mode & OPEN_TO_OTHERS != 0 {
        Ownership::ReadableByOthers
    } else {
        Ownership::OwnerOnly
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_owner_wins_over_the_mode() {
        for mode in [0o600, 0o700, 0o666, 0o777] {
            assert_eq!(ownership(0, mode, 501), Ownership::Foreign { owner: 0 });
        }
    }

    #[test]
    fn write_bits_of_group_or_others_make_it_writable() {
        for mode in [0o620, 0o602, 0o660, 0o666, 0o777, 0o1777, 0o40722] {
            assert_eq!(
                ownership(7, mode, 7),
                Ownership::WritableByOthers,
                "{mode:o}"
            );
        }
    }

    #[test]
    fn read_or_search_bits_alone_make_it_readable() {
        for mode in [0o640, 0o604, 0o644, 0o710, 0o701, 0o755] {
            assert_eq!(
                ownership(7, mode, 7),
                Ownership::ReadableByOthers,
                "{mode:o}"
            );
        }
    }

    #[test]
    fn the_owner_bits_and_the_file_type_do_not_count() {
        for mode in [0o600, 0o400, 0o700, 0o000, 0o4700, 0o100600, 0o40700] {
            assert_eq!(ownership(7, mode, 7), Ownership::OwnerOnly, "{mode:o}");
        }
    }
}
