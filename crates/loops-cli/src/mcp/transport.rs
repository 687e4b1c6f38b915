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
//!   kept of the line before the fault ([`read_id`]), as rmcp reads it
//!   (`1.0` is 1), and is `null` otherwise.
//!
//! A last line without `\n` is read at the end of the input, as rmcp's
//! own transport reads it.
//!
//! It also keeps which requests are still unanswered ([`Replies`]), so that
//! on SIGTERM the session can end once every call in flight has had its
//! reply written, and stops reading then ([`Link::stop_reading`]).
//!
//! Lines go out through one writer task, whole, in the order they were
//! sent: a reply is never cut by another, nor by the end of the future that
//! sent it. At most [`QUEUED`] lines wait for it: a client that sends and
//! never reads makes the session wait for room (sending a reply, and
//! reading the next line) instead of growing its memory.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, JsonRpcMessage, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, watch};

use super::quote;
use lines::{Lines, Read, read_id};

mod lines;

/// The longest line read, `\n` aside: 8 MiB.
pub(super) const MAX_LINE: usize = 8 << 20;

/// The most lines that wait for the writer.
const QUEUED: usize = 64;

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
    let (out, lines) = mpsc::channel(QUEUED);
    let (stop, stopped) = watch::channel(false);
    let writer = tokio::spawn(write_lines(write, lines, replies.clone()));
    let transport = LineTransport {
        lines: Lines::new(read),
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
    mut lines: mpsc::Receiver<Outgoing>,
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

/// The transport rmcp's session runs on.
pub(super) struct LineTransport<R> {
    lines: Lines<R>,
    /// `None` once closed.
    out: Option<mpsc::Sender<Outgoing>>,
    replies: Arc<Replies>,
    stopped: watch::Receiver<bool>,
}

/// A place in the writer's queue, taken before a line is read so that its
/// refusal, if any, is queued at once; `None` when nothing more can be
/// written.
type Room = Option<mpsc::OwnedPermit<Outgoing>>;

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the MCP session is closed")
}

impl<R> LineTransport<R> {
    /// Answers a line the session cannot use with a JSON-RPC error, in
    /// `room` (a closed session has nobody to tell).
    fn refuse(room: Room, id: Option<RequestId>, code: i32, message: &str) {
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
        if let Some(room) = room {
            room.send(Outgoing {
                line,
                answers: None,
            });
        }
    }

    /// The message on `line`, or `None` after refusing it in `room`.
    fn message(&self, line: &[u8], room: Room) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // RFC 8259 §8.1 lets a parser ignore a byte order mark.
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        if line.len() > MAX_LINE {
            Self::refuse_oversized(room, line);
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
            Self::refuse(
                room,
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
        Self::refuse(room, id, code, &message);
        None
    }

    fn refuse_oversized(room: Room, start: &[u8]) {
        Self::refuse(
            room,
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
        let out = self.out.clone();
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            Outgoing { line, answers }
        });
        // Queued now when there is room, so lines keep the order they were
        // sent in; else when the writer makes room.
        let waiting = match (line, &out) {
            (Err(error), _) => Err(io::Error::from(error)),
            (Ok(_), None) => Err(closed()),
            (Ok(line), Some(out)) => match out.try_send(line) {
                Ok(()) => Ok(None),
                Err(mpsc::error::TrySendError::Full(line)) => Ok(Some(line)),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(closed()),
            },
        };
        async move {
            match (waiting?, out) {
                (Some(line), Some(out)) => out.send(line).await.map_err(|_| closed()),
                _ => Ok(()),
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let LineTransport {
                lines,
                stopped,
                out,
                ..
            } = self;
            let stop = async {
                // A link dropped early never stops the reading.
                if stopped.wait_for(|stopped| *stopped).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            // No line is read until the writer has room for its refusal:
            // a client that does not read its replies is not read either.
            let out = out.clone();
            let read = async {
                let room = match out {
                    Some(out) => out.reserve_owned().await.ok(),
                    None => None,
                };
                (room, lines.next().await)
            };
            let (room, read) = tokio::select! {
                biased;
                () = stop => std::future::pending().await,
                read = read => read,
            };
            match read {
                Ok(Read::Line) => {
                    let message = self.message(&self.lines.line, room);
                    self.lines.line.clear();
                    if message.is_some() {
                        return message;
                    }
                }
                Ok(Read::Oversized) => {
                    Self::refuse_oversized(room, &self.lines.line);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    }

    /// Everything written to `replies` until it ends, line by line.
    async fn read_all(mut replies: impl AsyncRead + Unpin) -> Vec<Value> {
        let mut written = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut replies, &mut written)
            .await
            .expect("the replies are text");
        written
            .lines()
            .map(|line| serde_json::from_str(line).expect("each reply is JSON"))
            .collect()
    }

    #[test]
    fn a_last_line_without_a_newline_is_read_once() {
        runtime().block_on(async {
            let input = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n not json".to_vec();
            let (replies, write) = tokio::io::duplex(1 << 16);
            let (mut transport, link) = over(std::io::Cursor::new(input), write);
            let Some(JsonRpcMessage::Request(ping)) = transport.receive().await else {
                panic!("the first line is read");
            };
            assert_eq!(ping.id, RequestId::Number(1));
            assert!(transport.receive().await.is_none(), "the end is read");
            assert!(transport.receive().await.is_none(), "the end stays read");
            drop(transport);
            link.flushed().await;
            let replies = read_all(replies).await;
            assert_eq!(replies.len(), 1, "{replies:?}");
            assert_eq!(replies[0]["error"]["code"], PARSE_ERROR, "{replies:?}");
        });
    }

    /// Whether `future` is still waiting after one poll.
    fn waits<F: Future>(future: std::pin::Pin<&mut F>) -> bool {
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        future.poll(&mut context).is_pending()
    }

    #[test]
    fn a_client_that_does_not_read_its_replies_is_not_read_either() {
        runtime().block_on(async {
            let lines = 10 * QUEUED;
            let input = b"not json\n".repeat(lines);
            // The client reads nothing yet: the writer holds one line at
            // most, and the queue the others.
            let (replies, write) = tokio::io::duplex(64);
            let (mut transport, link) = over(std::io::Cursor::new(input), write);
            let mut receive = Box::pin(transport.receive());
            assert!(waits(receive.as_mut()), "the reading waits for room");
            drop(receive);
            let pong = TxJsonRpcMessage::<RoleServer>::response(
                rmcp::model::ServerResult::EmptyResult(rmcp::model::EmptyResult {}),
                RequestId::Number(1),
            );
            let mut send = Box::pin(transport.send(pong));
            assert!(waits(send.as_mut()), "a reply waits for room");
            // Once the client reads, everything is read and answered.
            let reader = tokio::spawn(read_all(replies));
            send.await.expect("the reply is sent");
            assert!(transport.receive().await.is_none());
            drop(transport);
            link.flushed().await;
            let replies = reader.await.expect("the reader ends");
            assert_eq!(replies.len(), lines + 1);
            let refused = replies.iter().filter(|r| r["error"]["code"] == PARSE_ERROR);
            assert_eq!(refused.count(), lines);
            assert!(
                replies
                    .iter()
                    .any(|r| r["id"] == 1 && r["result"].is_object())
            );
        });
    }

    #[test]
    fn a_line_over_the_cap_is_refused_and_the_next_one_read() {
        runtime().block_on(async {
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
