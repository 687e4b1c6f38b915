//! The access token of `loops serve`: 32 random bytes as hex, kept in
//! `$LOOPS_DATA_DIR/serve.token` at 0600, so a restarted server keeps the
//! login URL the owner already has. The file is opened without following
//! links and only when this user owns it (`loops_exec::owner_only`).

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context as _, Result};
use loops_exec::owner_only::{open_no_follow, open_private_append};

/// The token file's name in the data directory.
pub(crate) const TOKEN_FILE: &str = "serve.token";

/// The token's length in hex digits (32 bytes).
const TOKEN_HEX: usize = 64;

/// The token kept in `dir`, made (or replaced, when the file holds no
/// token) with fresh random bytes.
pub(super) fn load_or_create(dir: &Path) -> Result<String> {
    let path = dir.join(TOKEN_FILE);
    let shown = path.display();
    // Creates it 0600 when missing, narrows a wider mode, refuses a link.
    let mut file =
        open_private_append(&path).with_context(|| format!("opening the token file {shown}"))?;
    let mut text = String::new();
    open_no_follow(&path)
        .and_then(|mut f| f.read_to_string(&mut text))
        .with_context(|| format!("reading the token file {shown}"))?;
    let kept = text.trim();
    if is_token(kept) {
        return Ok(kept.to_owned());
    }
    let token = fresh()?;
    file.set_len(0)
        .and_then(|()| file.write_all(format!("{token}\n").as_bytes()))
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing the token file {shown}"))?;
    Ok(token)
}

/// 32 bytes from the OS's random source, as lowercase hex.
fn fresh() -> Result<String> {
    let mut bytes = [0u8; TOKEN_HEX / 2];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("reading random bytes for the access token: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `text` has a token's shape.
fn is_token(text: &str) -> bool {
    text.len() == TOKEN_HEX && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `given` is `token`, in time that does not depend on where they
/// differ.
pub(super) fn matches(token: &str, given: &str) -> bool {
    let (a, b) = (token.as_bytes(), given.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        assert!(is_token(&first), "{first}");
        assert_eq!(load_or_create(dir.path()).unwrap(), first);
        std::fs::write(dir.path().join(TOKEN_FILE), "garbage").unwrap();
        let second = load_or_create(dir.path()).unwrap();
        assert!(is_token(&second) && second != first);
    }

    #[test]
    fn only_the_same_token_matches() {
        assert!(matches("abcd", "abcd"));
        assert!(!matches("abcd", "abce"));
        assert!(!matches("abcd", "abc"));
        assert!(!matches("abcd", ""));
    }
}
