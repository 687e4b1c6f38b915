//! The protocol's edges (issue 25 item 5), spoken to `loops mcp` byte by
//! byte, without an SDK that would refuse to send them: a line over the
//! cap, JSON that does not parse, `arguments` that are not an object, and
//! errors about huge values. Each reply is awaited with a deadline, so a
//! server that does not answer fails the test instead of hanging it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use loops_tests::{TestEnv, kill};
use serde_json::{Value, json};

use super::{ALLOW, DEADLINE};

/// A session with `loops mcp` over its stdin and stdout.
struct Raw {
    child: Child,
    /// `None` once closed.
    stdin: Option<ChildStdin>,
    /// The server's stdout, line by line, read by a thread of its own.
    lines: mpsc::Receiver<String>,
}

impl Raw {
    /// Starts `loops mcp` in `env` (with [`ALLOW`] = `allow`) and
    /// initializes the session.
    fn start(env: &TestEnv, allow: Option<&str>) -> Raw {
        let mut raw = Raw::spawn(env, allow);
        raw.send_json(&initialize(0));
        let reply = raw.reply();
        assert_eq!(reply["id"], 0, "{reply}");
        assert!(reply.get("result").is_some(), "{reply}");
        raw.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    /// Starts `loops mcp` in `env` (with [`ALLOW`] = `allow`), before the
    /// session's handshake.
    fn spawn(env: &TestEnv, allow: Option<&str>) -> Raw {
        let mut cmd = env.cmd();
        cmd.arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        match allow {
            Some(value) => cmd.env(ALLOW, value),
            None => cmd.env_remove(ALLOW),
        };
        let mut child = cmd.spawn().expect("loops mcp starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stdin = child.stdin.take().expect("stdin is piped");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Raw {
            child,
            stdin: Some(stdin),
            lines,
        }
    }

    /// Writes `bytes` to the server's stdin.
    fn send(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("the server reads its stdin");
        stdin.flush().expect("the server reads its stdin");
    }

    /// Closes the server's stdin and returns every message it writes until
    /// it exits; fails the test when it has not within [`DEADLINE`].
    fn finish(mut self) -> Vec<Value> {
        drop(self.stdin.take());
        let deadline = Instant::now() + DEADLINE;
        let mut messages = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => messages.push(serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("loops mcp wrote a line that is not JSON ({e}): {line}")
                })),
                Err(mpsc::RecvTimeoutError::Disconnected) => return messages,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("loops mcp did not exit within {DEADLINE:?}")
                }
            }
        }
    }

    /// Writes `message` as one line.
    fn send_json(&mut self, message: &Value) {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.send(&line);
    }

    /// The next reply (a message with an `id` and no `method`); fails the
    /// test when none comes within [`DEADLINE`].
    fn reply(&self) -> Value {
        loop {
            let line = self
                .lines
                .recv_timeout(DEADLINE)
                .unwrap_or_else(|e| panic!("no reply from loops mcp within {DEADLINE:?}: {e}"));
            let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("loops mcp wrote a line that is not JSON ({e}): {line}")
            });
            if message.get("method").is_none() {
                return message;
            }
        }
    }

    /// Calls `tool` with `arguments` as request `id`; the reply.
    fn call(&mut self, id: i64, tool: &str, arguments: Value) -> Value {
        self.send_json(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }));
        let reply = self.reply();
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    /// Pings as request `id`: the session still answers.
    fn ping(&mut self, id: i64) {
        self.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        let reply = self.reply();
        assert_eq!(reply["id"], id, "{reply}");
        assert!(reply.get("result").is_some(), "{reply}");
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `initialize` request, as request `id`.
fn initialize(id: i64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    })
}

/// A reply's JSON-RPC error: its code and message.
fn error(reply: &Value) -> (i64, String) {
    let code = reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("an error reply: {reply}"));
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    (code, message.to_owned())
}

/// A tool result's error message (`isError`, one text block).
fn tool_error(reply: &Value) -> String {
    let result = &reply["result"];
    assert_eq!(result["isError"], true, "a tool error: {reply}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text block: {reply}"))
        .to_owned()
}

#[test]
fn a_line_over_eight_mib_gets_an_error_and_the_session_goes_on() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env, None);
    let flood = "x".repeat(16 << 20);
    // The id comes before the flood: the error answers it.
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "loops_list", "arguments": {"pad": flood}},
    }));
    let reply = raw.reply();
    assert_eq!(reply["id"], 7, "{reply}");
    let (code, message) = error(&reply);
    assert_eq!(code, -32600, "{message}");
    assert!(message.contains("8 MiB"), "{message}");
    assert!(!message.contains("xxxxxxxxxx"), "{message}");
    raw.ping(8);
    // The id comes after it: the error cannot name it.
    raw.send(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"params\":{{\"pad\":\"{flood}\"}},\"id\":9}}\n"
        )
        .as_bytes(),
    );
    let reply = raw.reply();
    assert_eq!(reply["id"], Value::Null, "{reply}");
    assert_eq!(error(&reply).0, -32600, "{reply}");
    raw.ping(10);
    // A long line under the cap is read.
    let long = "y".repeat(7 << 20);
    let reply = raw.call(11, "loops_list", json!({"pad": long}));
    let message = tool_error(&reply);
    assert!(message.contains("no argument \"pad\""), "{message}");
}

#[test]
fn json_that_does_not_parse_gets_a_parse_error() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env, None);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\",\n");
    let reply = raw.reply();
    assert_eq!(error(&reply).0, -32700, "{reply}");
    // The id is read when it comes before the fault.
    assert_eq!(reply["id"], 3, "{reply}");
    raw.send(b"this is not json\n");
    let reply = raw.reply();
    assert_eq!(error(&reply).0, -32700, "{reply}");
    assert_eq!(reply["id"], Value::Null, "{reply}");
    raw.send(b"\xff\xfe{}\n");
    let reply = raw.reply();
    assert_eq!(error(&reply).0, -32700, "{reply}");
    // JSON that is not a JSON-RPC message is an invalid request.
    raw.send_json(&json!({"id": 4, "colour": "red"}));
    let reply = raw.reply();
    assert_eq!(error(&reply).0, -32600, "{reply}");
    assert_eq!(reply["id"], 4, "{reply}");
    raw.ping(5);
}

#[test]
fn arguments_that_are_not_an_object_are_invalid_params() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env, None);
    for (id, arguments) in [
        (20, json!([1, 2])),
        (21, json!("loop")),
        (22, json!(5)),
        (23, json!(true)),
    ] {
        let reply = raw.call(id, "loops_list", arguments.clone());
        let (code, message) = error(&reply);
        assert_eq!(code, -32602, "{arguments}: {message}");
        assert!(
            message.contains("arguments") && message.contains("object"),
            "{arguments}: {message}"
        );
    }
    // No tool name at all is invalid params too.
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 24, "method": "tools/call", "params": {"arguments": {}},
    }));
    let reply = raw.reply();
    assert_eq!(reply["id"], 24, "{reply}");
    assert_eq!(error(&reply).0, -32602, "{reply}");
    // An unknown method is still method-not-found.
    raw.send_json(&json!({"jsonrpc": "2.0", "id": 25, "method": "tools/explode"}));
    let reply = raw.reply();
    assert_eq!(error(&reply).0, -32601, "{reply}");
    // Null arguments are no arguments.
    let reply = raw.call(26, "loops_list", Value::Null);
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    raw.ping(27);
}

/// The first 400 characters of `text`'s display.
fn head(text: &impl ToString) -> String {
    text.to_string().chars().take(400).collect()
}

/// Checks that `message` quotes at most 200 characters of a huge value (a
/// run of `Q`s), cut with `…`.
fn assert_cut(what: &str, message: &str) {
    let quoted = message.matches('Q').count();
    assert!(
        quoted <= 200 && (quoted == 0 || message.contains('…')),
        "{what}: {} characters: {}",
        message.len(),
        message.chars().take(400).collect::<String>()
    );
    assert!(message.len() < 1000, "{what}: {} bytes", message.len());
}

#[test]
fn errors_quote_at_most_two_hundred_characters_of_a_value() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env, Some("true"));
    let huge = "Q".repeat(100_000);
    for (id, tool, arguments) in [
        (30, "loops_show", json!({"loop": huge})),
        (31, "loops_runs", json!({"loop": huge})),
        (32, "loops_list", json!({"status": huge})),
        (33, "loops_list", json!({huge.clone(): 1})),
        (34, "loops_list", json!({"limit": huge})),
        (35, "loops_list", json!({"label": [huge]})),
        (
            36,
            "loops_labels_update",
            json!({"loop": "x", "action": huge, "labels": ["a"]}),
        ),
        (
            37,
            "loops_create_command",
            json!({"name": "n", "cmd": "true", "every": huge}),
        ),
        (
            38,
            "loops_create_command",
            json!({"name": huge, "cmd": "true", "every": "1h"}),
        ),
        (
            39,
            "loops_workflow_validate",
            json!({"workflow": {"name": huge, "steps": []}}),
        ),
    ] {
        let reply = raw.call(id, tool, arguments);
        assert_cut(tool, &tool_error(&reply));
    }
    let reply = raw.call(40, &huge, json!({}));
    let (code, message) = error(&reply);
    assert_eq!(code, -32602);
    assert_cut("an unknown tool", &message);
    raw.send_json(&json!({"jsonrpc": "2.0", "id": 41, "method": huge}));
    let (code, message) = error(&raw.reply());
    assert_eq!(code, -32601);
    assert_cut("an unknown method", &message);
    raw.send_json(&json!({
        "jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {"name": 5, "arguments": huge},
    }));
    let (code, message) = error(&raw.reply());
    assert_eq!(code, -32602);
    assert!(message.len() < 1000, "{} bytes", message.len());
    raw.ping(43);
}

#[test]
fn a_last_line_without_a_newline_is_answered() {
    let env = TestEnv::new();
    let mut raw = Raw::spawn(&env, None);
    raw.send_json(&initialize(1));
    raw.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            .to_string()
            .as_bytes(),
    );
    let replies = raw.finish();
    let ids: Vec<&Value> = replies.iter().map(|r| &r["id"]).collect();
    assert_eq!(ids, [1, 2], "{replies:?}");
    assert!(replies[1].get("result").is_some(), "{replies:?}");
    // The same as the whole session: `printf '%s' "$initialize" | loops mcp`.
    let mut raw = Raw::spawn(&env, None);
    raw.send(initialize(3).to_string().as_bytes());
    let replies = raw.finish();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0]["id"], 3, "{replies:?}");
    assert!(replies[0].get("result").is_some(), "{replies:?}");
}

#[test]
fn the_refusals_before_a_failed_handshake_are_written() {
    let env = TestEnv::new();
    let mut raw = Raw::spawn(&env, None);
    let bad = 200;
    for _ in 0..bad {
        raw.send(b"this is not json\n");
    }
    // A notification before `initialize` fails the handshake.
    raw.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let replies = raw.finish();
    assert_eq!(replies.len(), bad, "{replies:?}");
    for reply in &replies {
        assert_eq!(error(reply).0, -32700, "{reply}");
    }
}

#[test]
fn warnings_quote_at_most_two_hundred_characters_of_a_value() {
    let env = TestEnv::new();
    let mut raw = Raw::start(&env, Some("true"));
    let missing = format!("{}/{}", env.home().display(), "Q".repeat(100_000));
    let reply = raw.call(
        50,
        "loops_create_command",
        json!({"name": "far", "cmd": "true", "every": "1h", "cwd": missing}),
    );
    let result = &reply["result"];
    assert_eq!(result["isError"], false, "{}", head(&reply));
    let warning = result["content"][1]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a warning block: {}", head(result)));
    assert!(warning.contains("does not exist"), "{}", head(&warning));
    assert_cut("the missing directory's warning", warning);
}

#[test]
fn sigterm_ends_a_session_whose_client_does_not_read() {
    let env = TestEnv::new();
    let mut cmd = env.cmd();
    cmd.arg("mcp")
        .env_remove(ALLOW)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("loops mcp starts");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // Its stdout stays open and is never read: the replies fill the pipe,
    // then the server's queue, then it stops reading.
    let _stdout = child.stdout.take().expect("stdout is piped");
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = sent.clone();
    std::thread::spawn(move || {
        let mut line = initialize(0).to_string().into_bytes();
        line.push(b'\n');
        for id in 1.. {
            if stdin.write_all(&line).is_err() {
                break;
            }
            counter.store(id, Ordering::Relaxed);
            // 4 KiB a request, 16 KiB a reply.
            let pad = " ".repeat(4096);
            line = format!("{{\"jsonrpc\":\"2.0\",{pad}\"id\":{id},\"method\":\"tools/list\"}}\n")
                .into_bytes();
        }
    });
    // The pipe and the server's buffer hold 32 requests: past 64, it has
    // read at least 32, whose replies are more than its stdout's pipe holds.
    let started = Instant::now();
    while sent.load(Ordering::Relaxed) < 64 {
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("loops mcp does not read its stdin");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(kill("-TERM", child.id()), "SIGTERM reaches the server");
    let signalled = Instant::now();
    while child
        .try_wait()
        .expect("the server can be waited for")
        .is_none()
    {
        if signalled.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("loops mcp did not exit within {DEADLINE:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
