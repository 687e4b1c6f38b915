//! `cargo xtask mcp-python`: makes (once) the venv with the official MCP
//! Python SDK that the black-box test `mcp_python` drives `loops mcp`
//! through (issue 18), and prints its interpreter's path, for warming a
//! cache or trying the client by hand. The test makes the same venv itself
//! when it is missing: both include `tests/mcp/venv.rs`.

use std::path::PathBuf;

#[path = "../../tests/mcp/venv.rs"]
mod venv;

pub(crate) fn mcp_python(args: &[String]) -> Result<(), String> {
    if let Some(arg) = args.first() {
        return Err(format!(
            "mcp-python takes no arguments, got {arg:?}; {} names the base Python",
            venv::PYTHON_ENV
        ));
    }
    let python = venv::prepare(&target_dir())?;
    println!("{}", python.display());
    Ok(())
}

/// The cargo target directory the tests use: xtask runs as
/// `target/<profile>/xtask`.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(2).map(PathBuf::from))
        .unwrap_or_else(|| crate::root().join("target"))
}
