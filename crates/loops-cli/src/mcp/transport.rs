//! The session's transport: JSON-RPC messages, one a line, read from stdin
//! and written to stdout (issue 25 §5).
//!
//! rmcp's own stdio transport drops a line it cannot use without a reply,
//! so the client waits forever: a line over its cap (16 MiB), and JSON that
//! does not parse. This one answers each with a JSON-RPC error and reads on:
//! - a line longer than [`MAX_LINE`] is not kept past the cap; the rest of
//!   it is skipped and the error is `-32600` (invalid request);
//! - a line that is not JSON is `-32700` (parse error), a request of an MCP
//!   method whose params do not parse `-32602` (invalid params), and other
//!   JSON that is not a JSON-RPC message `-32600`, unless it is a
//!   notification, which nobody may answer;
//! - each error names the request's id when it can be read from what was
//!   kept of the line before the fault ([`read_id`]), and is `null`
//!   otherwise.
//!
//! It also keeps which requests are still unanswered ([`Replies`]), so that
//! on SIGTERM the session can end once every call in flight has had its
//! reply written, and stops reading then ([`Link::stop_reading`]).
//!
//! Lines go out through one writer task, whole, in the order they were
//! sent: a reply is never cut by another, nor by the end of the future that
//! sent it.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Notify, mpsc, watch};

use super::quote;

/// The longest line read, `\n` aside: 8 MiB.
pub(super) const MAX_LINE: usize = 8 << 20;

/// JSON-RPC's codes for what this transport refuses.
const PARSE_ERROR: i32 = -32700;
const INVALID_REQUEST: i32 = -32600;
const INVALID_PARAMS: i32 = -32602;

/// The requests MCP defines, whose params rmcp reads: a request of one of
/// them that rmcp cannot read has params that do not parse.
pub(super) const MCP_REQUESTS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
];

/// The session's end of the transport: its replies, and how to stop it.
pub(super) struct Link {
    replies: Arc<Replies>,
    stop: watch::Sender<bool>,
    writer: tokio::task::JoinHandle<()>,
}

impl Link {
    /// Stops reading: the messages that come after are never read.
    pub(super) fn stop_reading(&self) {
        self.stop.send_replace(true);
    }

    /// Returns once every request read has had its reply written, or the
    /// client's end can take no more.
    pub(super) async fn replies_written(&self) {
        self.replies.all_written().await;
    }

    /// Returns once every line sent has been written and the transport is
    /// closed.
    pub(super) async fn flushed(self) {
        let _ = self.writer.await;
    }
}

/// The transport over stdin and stdout, and its link. Needs the runtime.
pub(super) fn stdio() -> (LineTransport<tokio::io::Stdin>, Link) {
    over(tokio::io::stdin(), tokio::io::stdout())
}

/// The transport reading `read` and writing `write`.
pub(super) fn over<R, W>(read: R, write: W) -> (LineTransport<R>, Link)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let replies = Arc::new(Replies::default());
    let (out, lines) = mpsc::unbounded_channel();
    let (stop, stopped) = watch::channel(false);
    let writer = tokio::spawn(write_lines(write, lines, replies.clone()));
    let transport = LineTransport {
        lines: Lines {
            read: BufReader::with_capacity(64 << 10, read),
            line: Vec::new(),
            skipping: false,
        },
        out: Some(out),
        replies: replies.clone(),
        stopped,
    };
    (
        transport,
        Link {
            replies,
            stop,
            writer,
        },
    )
}

/// A line to write, and the request it answers.
struct Outgoing {
    line: Vec<u8>,
    answers: Option<RequestId>,
}

/// Writes each line whole and flushes it, then marks its request
/// answered; until every sender is gone or the client's end is closed.
async fn write_lines<W: AsyncWrite + Unpin>(
    mut write: W,
    mut lines: mpsc::UnboundedReceiver<Outgoing>,
    replies: Arc<Replies>,
) {
    while let Some(out) = lines.recv().await {
        let written = async {
            write.write_all(&out.line).await?;
            write.flush().await
        };
        if written.await.is_err() {
            break;
        }
        if let Some(id) = &out.answers {
            replies.answered(id);
        }
    }
    replies.close();
}

/// The requests read and not answered yet.
#[derive(Default)]
struct Replies {
    state: Mutex<RepliesState>,
    changed: Notify,
}

#[derive(Default)]
struct RepliesState {
    awaited: Vec<RequestId>,
    /// Nothing more can be written.
    closed: bool,
}

impl Replies {
    fn state(&self) -> std::sync::MutexGuard<'_, RepliesState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn expect(&self, id: RequestId) {
        self.state().awaited.push(id);
    }

    /// `id` was answered, or the client cancelled it (rmcp then sends
    /// nothing).
    fn answered(&self, id: &RequestId) {
        let mut state = self.state();
        if let Some(at) = state.awaited.iter().position(|a| a == id) {
            state.awaited.swap_remove(at);
        }
        drop(state);
        self.changed.notify_waiters();
    }

    fn close(&self) {
        self.state().closed = true;
        self.changed.notify_waiters();
    }

    async fn all_written(&self) {
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            {
                let state = self.state();
                if state.closed || state.awaited.is_empty() {
                    return;
                }
            }
            changed.await;
        }
    }
}

/// What one read of a line found.
enum Read {
    /// A whole line is in [`Lines::line`].
    Line,
    /// The line went past the cap; [`Lines::line`] holds its start.
    Oversized,
    Eof,
}

/// Lines read from `read`, at most [`MAX_LINE`] bytes of each kept.
///
/// Cancel-safe, as rmcp's loop needs (it polls a read among other events
/// and drops it when another comes first): what was read stays here, and
/// the next read goes on from it.
struct Lines<R> {
    read: BufReader<R>,
    line: Vec<u8>,
    /// Skipping the rest of a line already refused.
    skipping: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    async fn next(&mut self) -> io::Result<Read> {
        // The line, and `\r\n`.
        const KEPT: usize = MAX_LINE + 2;
        loop {
            let (used, read) = {
                let available = self.read.fill_buf().await?;
                if available.is_empty() {
                    return Ok(Read::Eof);
                }
                let newline = available.iter().position(|&b| b == b'\n');
                let used = newline.map_or(available.len(), |at| at + 1);
                let read = if self.skipping {
                    self.skipping = newline.is_none();
                    None
                } else if self.line.len() + used > KEPT {
                    self.skipping = newline.is_none();
                    Some(Read::Oversized)
                } else {
                    self.line.extend_from_slice(&available[..used]);
                    newline.map(|_| Read::Line)
                };
                (used, read)
            };
            self.read.consume(used);
            if let Some(read) = read {
                return Ok(read);
            }
        }
    }
}

/// The transport rmcp's session runs on.
pub(super) struct LineTransport<R> {
    lines: Lines<R>,
    /// `None` once closed.
    out: Option<mpsc::UnboundedSender<Outgoing>>,
    replies: Arc<Replies>,
    stopped: watch::Receiver<bool>,
}

impl<R> LineTransport<R> {
    /// Queues `line` for the writer.
    fn queue(&self, line: Vec<u8>, answers: Option<RequestId>) -> io::Result<()> {
        self.out
            .as_ref()
            .and_then(|out| out.send(Outgoing { line, answers }).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "the MCP session is closed"))
    }

    /// Answers a line the session cannot use with a JSON-RPC error.
    fn refuse(&self, id: Option<RequestId>, code: i32, message: &str) {
        let reply = json!({
            "jsonrpc": "2.0",
            "id": match id {
                Some(RequestId::Number(n)) => json!(n),
                Some(RequestId::String(s)) => json!(&*s),
                None => Value::Null,
            },
            "error": {"code": code, "message": quote::cap(message)},
        });
        let mut line = reply.to_string().into_bytes();
        line.push(b'\n');
        // A closed session has nobody to tell.
        let _ = self.queue(line, None);
    }

    /// The message on `line`, or `None` after refusing it.
    fn message(&self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // RFC 8259 §8.1 lets a parser ignore a byte order mark.
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if line.len() > MAX_LINE {
            self.refuse_oversized(line);
            return None;
        }
        let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
            Ok(message) => {
                self.track(&message);
                return Some(message);
            }
            Err(error) => error,
        };
        let id = read_id(line);
        if error.is_syntax() || error.is_eof() {
            self.refuse(
                id,
                PARSE_ERROR,
                &format!("the message is not JSON: {error}"),
            );
            return None;
        }
        let value: Value = serde_json::from_slice(line).unwrap_or_default();
        if value.get("method").is_some() && value.get("id").is_none() {
            // A notification: nobody may answer it.
            return None;
        }
        let method = value.get("method").and_then(Value::as_str);
        let (code, message) = match method {
            Some(method)
                if id.is_some()
                    && value.get("jsonrpc") == Some(&json!("2.0"))
                    && MCP_REQUESTS.contains(&method) =>
            {
                (
                    INVALID_PARAMS,
                    format!("invalid params for {method}: they do not match its schema"),
                )
            }
            _ => (
                INVALID_REQUEST,
                format!("the message is not a JSON-RPC 2.0 request: {error}"),
            ),
        };
        let message = match &value {
            Value::Object(object) => quote::cut_arguments(&message, object),
            _ => message,
        };
        self.refuse(id, code, &message);
        None
    }

    fn refuse_oversized(&self, start: &[u8]) {
        self.refuse(
            read_id(start),
            INVALID_REQUEST,
            &format!(
                "the message is longer than {} MiB, the most loops mcp reads in one line; \
                 send a smaller one",
                MAX_LINE >> 20
            ),
        );
    }

    /// Keeps which requests await a reply.
    fn track(&self, message: &RxJsonRpcMessage<RoleServer>) {
        match message {
            JsonRpcMessage::Request(request) => self.replies.expect(request.id.clone()),
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.replies.answered(id);
                }
            }
            JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_) => {}
        }
    }
}

impl<R: AsyncRead + Unpin + Send + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = io::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let answers = match &mut item {
            JsonRpcMessage::Response(response) => Some(response.id.clone()),
            JsonRpcMessage::Error(error) => {
                if let std::borrow::Cow::Owned(capped) = quote::cap(&error.error.message) {
                    error.error.message = capped.into();
                }
                error.id.clone()
            }
            JsonRpcMessage::Request(_) | JsonRpcMessage::Notification(_) => None,
        };
        let queued = serde_json::to_vec(&item)
            .map_err(io::Error::from)
            .and_then(|mut line| {
                line.push(b'\n');
                self.queue(line, answers)
            });
        std::future::ready(queued)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let LineTransport { lines, stopped, .. } = self;
            let stop = async {
                // A link dropped early never stops the reading.
                if stopped.wait_for(|stopped| *stopped).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let read = tokio::select! {
                biased;
                () = stop => std::future::pending().await,
                read = lines.next() => read,
            };
            match read {
                Ok(Read::Line) => {
                    let message = self.message(&self.lines.line);
                    self.lines.line.clear();
                    if message.is_some() {
                        return message;
                    }
                }
                Ok(Read::Oversized) => {
                    self.refuse_oversized(&self.lines.line);
                    self.lines.line.clear();
                }
                Ok(Read::Eof) | Err(_) => return None,
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.out = None;
        Ok(())
    }
}

/// The `id` of the JSON-RPC request that `line` starts: the top-level `id`
/// member, when every member before it parses. For a line that is cut
/// (over the cap) or broken further on.
pub(super) fn read_id(line: &[u8]) -> Option<RequestId> {
    /// The value that `bytes` starts with, and its length.
    fn next<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<(T, usize)> {
        let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
        let value = values.next()?.ok()?;
        Some((value, values.byte_offset()))
    }
    fn skip_space(line: &[u8], at: usize) -> usize {
        at + line[at.min(line.len())..]
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count()
    }
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let mut at = skip_space(line, 0);
    if line.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    loop {
        let (key, used) = next::<String>(line.get(at..)?)?;
        at = skip_space(line, at + used);
        if line.get(at) != Some(&b':') {
            return None;
        }
        at += 1;
        if key == "id" {
            return match next::<Value>(line.get(at..)?)?.0 {
                Value::Number(n) => n.as_i64().map(RequestId::Number),
                Value::String(s) => Some(RequestId::String(s.into())),
                _ => None,
            };
        }
        let (IgnoredAny, used) = next::<IgnoredAny>(line.get(at..)?)?;
        at = skip_space(line, at + used);
        if line.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_read_up_to_the_first_fault() {
        let number = |n| Some(RequestId::Number(n));
        for (line, id) in [
            (
                &br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"cut"#[..],
                number(7),
            ),
            (
                br#" {"method": "ping", "params": {"a": [1, {"b": "}"}]}, "id" : 12 , "#,
                number(12),
            ),
            (
                br#"{"jsonrpc":"2.0","method":"tools/list","id":3,"#,
                number(3),
            ),
            (br#"{"params":{"x":"cut before the id"#, None),
            (br#"{"id":null,"method":"ping"}"#, None),
            (br#"{"id":1.5}"#, None),
            (br#"{"id":[7]}"#, None),
            (br#"{"x":1 "id":2}"#, None),
            (br#"[{"id":1}]"#, None),
            (b"not json", None),
            (b"", None),
        ] {
            assert_eq!(read_id(line), id, "{}", String::from_utf8_lossy(line));
        }
        assert_eq!(
            read_id(br#"{"id":"req-1","method":"#),
            Some(RequestId::String("req-1".into()))
        );
    }

    #[test]
    fn a_line_over_the_cap_is_refused_and_the_next_one_read() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(async {
                let (client, server) = tokio::io::duplex(1 << 16);
                let (read, write) = tokio::io::split(server);
                let (mut transport, link) = over(read, write);
                let (mut replies, mut requests) = tokio::io::split(client);
                let sender = tokio::spawn(async move {
                    let mut big =
                        br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":""#.to_vec();
                    big.resize(big.len() + MAX_LINE, b'x');
                    big.extend_from_slice(
                        b"\"}}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n",
                    );
                    requests.write_all(&big).await.expect("the transport reads");
                    requests
                });
                let Some(JsonRpcMessage::Request(ping)) = transport.receive().await else {
                    panic!("the second request is read");
                };
                assert_eq!(ping.id, RequestId::Number(2));
                let _requests = sender.await.expect("the sender ends");
                drop(transport);
                link.flushed().await;
                let mut written = String::new();
                tokio::io::AsyncReadExt::read_to_string(&mut replies, &mut written)
                    .await
                    .expect("the replies are text");
                let reply: Value = serde_json::from_str(written.trim()).expect("one reply");
                assert_eq!(reply["id"], 1, "{reply}");
                assert_eq!(reply["error"]["code"], INVALID_REQUEST, "{reply}");
            });
    }
}
