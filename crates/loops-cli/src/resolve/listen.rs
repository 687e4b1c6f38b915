//! `--listen` of `loops serve` and `--serve` of `loops daemon run`: the
//! address the HTTP server binds, refused when the server could not make
//! it safe (see `serve`).

use std::net::SocketAddr;

use anyhow::{Result, anyhow, bail};

/// The address `value` of `flag`, checked by [`check_bind`]; `tls` says
/// whether a certificate was given.
pub(crate) fn address(flag: &str, value: &str, tls: bool) -> Result<SocketAddr> {
    let wanted: SocketAddr = value.trim().parse().map_err(|_| {
        anyhow!(
            "{flag} must be an address and port such as 127.0.0.1:8470 or [::1]:8470, not {value:?}"
        )
    })?;
    check_bind(flag, wanted, tls)?;
    Ok(wanted)
}

/// Refuses a bind the server cannot make safe: anything but loopback needs
/// TLS, and one address, which the `Host` check compares with.
fn check_bind(flag: &str, addr: SocketAddr, tls: bool) -> Result<()> {
    if addr.ip().is_loopback() {
        return Ok(());
    }
    if !tls {
        bail!(
            "{flag} {addr} is not a loopback address: serving the API beyond this machine needs \
             TLS; give --tls-cert and --tls-key, or listen on 127.0.0.1 (the default)"
        );
    }
    if addr.ip().is_unspecified() {
        bail!(
            "{flag} {addr} is every address of this machine, but requests must name the one \
             they came to (against DNS rebinding): give that address, such as 192.0.2.10:{}",
            addr.port()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_binds_are_served() {
        assert!(check_bind("--listen", "127.0.0.1:0".parse().unwrap(), false).is_ok());
        assert!(check_bind("--listen", "[::1]:8470".parse().unwrap(), false).is_ok());
        let err = check_bind("--listen", "192.0.2.1:8470".parse().unwrap(), false).unwrap_err();
        assert!(err.to_string().contains("--tls-cert"), "{err}");
        assert!(check_bind("--listen", "192.0.2.1:8470".parse().unwrap(), true).is_ok());
        let err = check_bind("--listen", "0.0.0.0:8470".parse().unwrap(), true).unwrap_err();
        assert!(err.to_string().contains("every address"), "{err}");
    }

    #[test]
    fn an_address_needs_a_port() {
        let err = address("--serve", "localhost", false).unwrap_err();
        assert!(err.to_string().starts_with("--serve must be"), "{err}");
        assert!(address("--serve", " 127.0.0.1:1 ", false).is_ok());
    }
}
