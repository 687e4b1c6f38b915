//! The command line of `loops serve` (issue 29): the HTTP API on the same
//! store. As in the parent module, values stay strings until the server
//! checks them.

use std::path::PathBuf;

use clap::Args;

/// Where `loops serve` listens unless `--listen` says.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8470";

/// `loops serve --help`, after the flags.
pub(super) const SERVE_AFTER_HELP: &str = "The JSON API lives under /api/v1; each document is \
    what the matching command prints with --json, and an error is {\"error\": {\"code\", \
    \"message\"}} with the command's message. Every API call needs the access token, kept in \
    $LOOPS_DATA_DIR/serve.token (0600): open the login URL printed on stderr at start, which \
    sets a cookie, or send `Authorization: Bearer <token>`. Writes (POST, PATCH, DELETE) from a page of \
    another origin are refused, and so is a Host header that does not name this server. A \
    non-loopback --listen needs TLS (--tls-cert and --tls-key, PEM files) and one address, not \
    0.0.0.0. Lists come a page at a time: /loops gives 100 loops unless ?limit= says (1000 at \
    most), and a full page has a Link header (rel=\"next\") to the next one. Runs until SIGINT or \
    SIGTERM; `loops daemon run --serve ADDR` serves the same inside the daemon.

Routes (under /api/v1):
  GET    /loops[?status=&label=&limit=&offset=]  /loops/{loop}  /loops/{loop}/next[?n=]
  POST   /loops (JSON: the arguments of the MCP tool loops_create_command)
  PATCH  /loops/{loop} (JSON: the flags of loops edit, camelCase: {\"every\": \"2h\"})
  POST   /loops/{loop}/pause, resume, stop, run-now, cancel
  POST   /loops/{loop}/labels/set, add, remove, clear [?labels=a,b]
  DELETE /loops/{loop}[?purge=1]
  GET    /runs[?loop=&status=&limit=&offset=]  /runs/{run}  /runs/{run}/output?showOutput=1
  GET    /workflows  /workflow-runs/{run}  /daemons  /doctor  /openapi.json

Examples:
  loops serve                                     # http://127.0.0.1:8470, login URL on stderr
  loops serve --listen 127.0.0.1:9000
  loops serve --listen 192.0.2.10:8470 --tls-cert cert.pem --tls-key key.pem
  curl -H \"Authorization: Bearer $(cat ~/.hasna/loops/serve.token)\" \\
       http://127.0.0.1:8470/api/v1/loops";

// `loops serve`.
#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The address and port to listen on; port 0 picks a free one.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub(crate) listen: String,

    /// The TLS certificate (PEM), needed for a non-loopback --listen.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub(crate) tls_cert: Option<PathBuf>,

    /// The TLS certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub(crate) tls_key: Option<PathBuf>,
}
