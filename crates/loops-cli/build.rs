//! Links `loops` as a position-dependent executable on Linux.
//!
//! A position-independent `loops` carries about 40,000 relative
//! relocations (mostly pointer tables such as the time zone database), which
//! the dynamic loader applies at every start, dirtying about 1.2 MiB of
//! pages. Every CLI command is a short-lived process, so that was most of
//! the cost of `loops create` or `loops list`. Linked with `-no-pie`, the
//! addresses are fixed at link time and startup touches only what it uses.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
