//! Reading the session's input (issue 25 §5): lines of at most
//! [`MAX_LINE`] bytes kept ([`Lines`]), and the id of a request read from
//! what was kept of a line that is cut or broken ([`read_id`]).

use std::io;

use rmcp::model::RequestId;
use serde::de::IgnoredAny;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::MAX_LINE;

/// What one read of a line found.
pub(super) enum Read {
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
pub(super) struct Lines<R> {
    read: BufReader<R>,
    pub(super) line: Vec<u8>,
    /// Skipping the rest of a line already refused.
    skipping: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub(super) fn new(read: R) -> Lines<R> {
        Lines {
            read: BufReader::with_capacity(64 << 10, read),
            line: Vec::new(),
            skipping: false,
        }
    }

    pub(super) async fn next(&mut self) -> io::Result<Read> {
        // The line, and `\r\n`.
        const KEPT: usize = MAX_LINE + 2;
        loop {
            let (used, read) = {
                let available = self.read.fill_buf().await?;
                if available.is_empty() {
                    // A last line without `\n` is a line, as for rmcp's own
                    // transport; the caller clears it, so it is read once.
                    if self.skipping || self.line.is_empty() {
                        return Ok(Read::Eof);
                    }
                    return Ok(Read::Line);
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
            // Read as rmcp reads it, so a request has the same id whether
            // it is answered or refused (`1.0` is 1).
            return next::<RequestId>(line.get(at..)?).map(|(id, _)| id);
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
    use rmcp::RoleServer;
    use rmcp::model::JsonRpcMessage;
    use rmcp::service::RxJsonRpcMessage;

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
            (br#"{"id":1.0,"params":"#, number(1)),
            (br#"{"id":-2e2,"params":"#, number(-200)),
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
    fn the_id_of_a_refused_request_is_the_one_rmcp_reads() {
        for id in [
            "1",
            "1.0",
            "1e2",
            "-0.0",
            "9007199254740991",
            "\"7\"",
            "1.5",
            "[1]",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let parsed = match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(&line) {
                Ok(JsonRpcMessage::Request(request)) => Some(request.id),
                _ => None,
            };
            assert_eq!(read_id(line.as_bytes()), parsed, "{line}");
        }
        assert_eq!(
            read_id(br#"{"jsonrpc":"2.0","id":1e2,"method":"ping","params":{"#),
            Some(RequestId::Number(100))
        );
    }
}
