//! A small synchronous W3C WebDriver client, for the tests that drive the
//! dashboard of `loops serve` in a real browser (issue 29). It starts
//! `chromedriver` on a free loopback port, opens a session with headless
//! Chromium in a temporary profile, and speaks the protocol, JSON over
//! HTTP/1.1, on a plain `TcpStream`: one connection per command, so no
//! client crate is needed. Dropping the [`Browser`] ends the session and
//! kills the driver's process group.
//!
//! ```no_run
//! use std::time::Duration;
//! use loops_tests::webdriver::Browser;
//! let Some(browser) = Browser::start("a_test") else { return };
//! browser.goto("http://127.0.0.1:8470/");
//! let table = browser.wait_for("table#loops", Duration::from_secs(10));
//! assert!(table.text().contains("nightly"));
//! browser.screenshot("loops");
//! ```
//!
//! Without `chromium` or `chromedriver` on `PATH`, [`Browser::start`]
//! says the test skips and returns `None`; in CI, or with
//! `LOOPS_REQUIRE_BROWSER=1` (which `.ci/run` sets), it fails instead
//! ([`crate::program_on_path`]).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The key under which the protocol passes an element reference.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The Enter key, for [`Element::send_keys`].
pub const ENTER: &str = "\u{E007}";

/// The longest chromedriver may take to start, and one command to answer.
const DEADLINE: Duration = Duration::from_secs(60);

/// The Chromium flags of every session: headless, without the sandbox
/// (CI runs as root in a container), and a fixed window for screenshots.
const CHROMIUM_ARGS: [&str; 5] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// Set to `1` (or `true`), a missing browser fails the test instead of
/// skipping it.
pub const REQUIRE_BROWSER: &str = "LOOPS_REQUIRE_BROWSER";

/// `program`, or a panic naming `test` when it is missing and
/// `LOOPS_REQUIRE_BROWSER` is set.
fn require_browser(test: &str, program: Option<PathBuf>) -> Option<PathBuf> {
    let required = std::env::var(REQUIRE_BROWSER).is_ok_and(|v| matches!(v.trim(), "1" | "true"));
    assert!(
        program.is_some() || !required,
        "{REQUIRE_BROWSER} is set, and {test} has no browser (chromium and chromedriver on PATH)"
    );
    program
}

/// A WebDriver error: the protocol's code (`no such element`, …) and its
/// message, or a transport failure (code `transport`).
#[derive(Debug)]
pub struct Error {
    /// The protocol's error code.
    pub code: String,
    /// What went wrong.
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A headless Chromium driven through chromedriver; the session ends and
/// the driver dies when this drops.
pub struct Browser {
    driver: Child,
    /// `127.0.0.1:<port>` of chromedriver.
    addr: String,
    /// The session id; empty until the session is open.
    session: String,
    /// Chromium's profile (`--user-data-dir`) and chromedriver's log.
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and opens a headless Chromium session, or, when
    /// either program is missing, says `test` skips and returns `None`.
    ///
    /// # Panics
    /// When a program is missing and `LOOPS_REQUIRE_BROWSER` is set.
    pub fn start(test: &str) -> Option<Browser> {
        let chromium = require_browser(test, crate::program_on_path(test, "chromium"))?;
        let chromedriver = require_browser(test, crate::program_on_path(test, "chromedriver"))?;
        let dir = tempfile::tempdir().expect("a temp dir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let log = dir.path().join("chromedriver.log");
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own group, so that drop reaches Chromium too.
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let mut browser = Browser {
            driver,
            addr: format!("127.0.0.1:{port}"),
            session: String::new(),
            dir,
        };
        crate::wait_for("chromedriver to be ready", DEADLINE, || {
            let (_, status) = http(&browser.addr, "GET", "/status", None).ok()?;
            status["value"]["ready"].as_bool()?.then_some(())
        });
        let profile = browser.dir.path().join("profile");
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|&a| a.to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
        }}});
        let opened = browser.send("POST", "/session", Some(&capabilities));
        let opened = opened.unwrap_or_else(|e| panic!("{e}\n{}", browser.driver_log()));
        browser.session = opened["sessionId"]
            .as_str()
            .expect("a new session has an id")
            .to_owned();
        Some(browser)
    }

    /// Loads `url` and waits for the page to load.
    pub fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(&json!({ "url": url })));
    }

    /// The address of the page shown.
    pub fn current_url(&self) -> String {
        let url = self.command("GET", "/url", None);
        url.as_str().expect("the URL is a string").to_owned()
    }

    /// The page's HTML as the browser holds it now.
    pub fn source(&self) -> String {
        let source = self.command("GET", "/source", None);
        source.as_str().expect("the source is a string").to_owned()
    }

    /// The first element `css` matches; panics, with the page, when none
    /// does.
    pub fn find(&self, css: &str) -> Element<'_> {
        self.try_find(css)
            .unwrap_or_else(|e| panic!("no element {css:?} ({e}) in:\n{}", self.source()))
    }

    /// The first element `css` matches, or the driver's error.
    pub fn try_find(&self, css: &str) -> Result<Element<'_>, Error> {
        let found = self.send_in_session("POST", "/element", Some(&by_css(css)))?;
        Ok(self.element(&found))
    }

    /// Every element `css` matches, in document order.
    pub fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.command("POST", "/elements", Some(&by_css(css)));
        let found = found.as_array().expect("a list of elements");
        found.iter().map(|e| self.element(e)).collect()
    }

    /// Polls until `css` matches an element, failing after `timeout`.
    pub fn wait_for(&self, css: &str, timeout: Duration) -> Element<'_> {
        crate::wait_for(&format!("an element {css:?}"), timeout, || {
            self.try_find(css).ok()
        })
    }

    /// Polls until an element `css` matches holds `text`, failing after
    /// `timeout`; that element.
    pub fn wait_for_text(&self, css: &str, text: &str, timeout: Duration) -> Element<'_> {
        let what = format!("an element {css:?} holding {text:?}");
        crate::wait_for(&what, timeout, || {
            // The page may change under the poll: an element gone stale
            // is just not there yet.
            let element = self.try_find(css).ok()?;
            element.try_text().ok()?.contains(text).then_some(element)
        })
    }

    /// Clicks the first element `css` matches, polling until the click
    /// lands, failing after `timeout`. A page that a navigation or its live
    /// view replaces between the find and the click leaves a stale element,
    /// whose click does nothing: it is found again.
    pub fn click_when_ready(&self, css: &str, timeout: Duration) {
        crate::wait_for(&format!("a click on {css:?}"), timeout, || {
            self.try_find(css).ok()?.try_click().ok()
        });
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the
    /// page and returns what it returns.
    pub fn execute(&self, script: &str, args: &[Value]) -> Value {
        let body = json!({ "script": script, "args": args });
        self.command("POST", "/execute/sync", Some(&body))
    }

    /// Writes a PNG of the window to `target/screenshots/<name>.png` and
    /// returns its path.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.command("GET", "/screenshot", None);
        let png = decode_base64(png.as_str().expect("a screenshot is base64"));
        let dir = screenshots_dir();
        std::fs::create_dir_all(&dir).expect("the screenshots directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("a screenshot file");
        path
    }

    /// An [`Element`] from the protocol's reference to it.
    fn element(&self, reference: &Value) -> Element<'_> {
        let id = reference[ELEMENT_KEY]
            .as_str()
            .expect("an element reference");
        Element {
            browser: self,
            id: id.to_owned(),
        }
    }

    /// A session command that must succeed; its `value`.
    fn command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        self.send_in_session(method, path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// A command under `/session/<id>`; its `value`, or the error.
    fn send_in_session(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        self.send(method, &format!("/session/{}{path}", self.session), body)
    }

    /// A command; its `value`, or the error.
    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Error> {
        let (status, mut reply) = http(&self.addr, method, path, body)?;
        let value = reply["value"].take();
        if status == 200 {
            return Ok(value);
        }
        Err(Error {
            code: value["error"]
                .as_str()
                .unwrap_or("unknown error")
                .to_owned(),
            message: value["message"].as_str().unwrap_or_default().to_owned(),
        })
    }

    /// The end of chromedriver's log, for a failure's message.
    fn driver_log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("chromedriver.log"));
        let log = log.unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // Closes Chromium; the kill below is for what remains.
            let _ = http(
                &self.addr,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            );
        }
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.driver.wait();
    }
}

/// An element of the page shown, valid until the page changes.
pub struct Element<'a> {
    browser: &'a Browser,
    /// The driver's reference to it.
    id: String,
}

impl Element<'_> {
    /// Clicks it (a link or a button: the browser follows it).
    pub fn click(&self) {
        self.command("POST", "/click", Some(&json!({})));
    }

    /// Clicks it, or the driver's error (a stale element).
    pub fn try_click(&self) -> Result<(), Error> {
        self.send("POST", "/click", Some(&json!({}))).map(drop)
    }

    /// Types `text` into it, as keys ([`ENTER`] submits a form).
    pub fn send_keys(&self, text: &str) {
        self.command("POST", "/value", Some(&json!({ "text": text })));
    }

    /// Its rendered text.
    pub fn text(&self) -> String {
        self.try_text()
            .unwrap_or_else(|e| panic!("WebDriver text of an element: {e}"))
    }

    /// Its rendered text, or the driver's error (a stale element).
    pub fn try_text(&self) -> Result<String, Error> {
        let text = self.send("GET", "/text", None)?;
        Ok(text.as_str().unwrap_or_default().to_owned())
    }

    /// Its attribute `name`, if it has one.
    pub fn attribute(&self, name: &str) -> Option<String> {
        let value = self.command("GET", &format!("/attribute/{name}"), None);
        value.as_str().map(str::to_owned)
    }

    /// The first element inside it that `css` matches.
    pub fn find(&self, css: &str) -> Element<'_> {
        let found = self.command("POST", "/element", Some(&by_css(css)));
        self.browser.element(&found)
    }

    /// Every element inside it that `css` matches.
    pub fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let found = self.command("POST", "/elements", Some(&by_css(css)));
        let found = found.as_array().expect("a list of elements");
        found.iter().map(|e| self.browser.element(e)).collect()
    }

    /// A command on this element that must succeed; its `value`.
    fn command(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        self.send(method, path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} element{path}: {e}"))
    }

    /// A command under `/session/<id>/element/<id>`.
    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Error> {
        let path = format!("/element/{}{path}", self.id);
        self.browser.send_in_session(method, &path, body)
    }
}

/// A locator for the CSS selector `css`.
fn by_css(css: &str) -> Value {
    json!({"using": "css selector", "value": css})
}

/// One HTTP/1.1 exchange with chromedriver at `addr`: the status and the
/// JSON body. chromedriver keeps the connection open whatever the request
/// says, so the reply ends where its `Content-Length` (or its last chunk)
/// says.
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value), Error> {
    let failed = |message: String| Error {
        code: "transport".to_owned(),
        message: format!("{method} {path}: {message}"),
    };
    let transport = |e: std::io::Error| failed(e.to_string());
    let mut stream = TcpStream::connect(addr).map_err(transport)?;
    stream.set_read_timeout(Some(DEADLINE)).map_err(transport)?;
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(transport)?;
    let mut raw = Vec::new();
    let mut buffer = [0_u8; 64 * 1024];
    let (status, payload) = loop {
        let read = stream.read(&mut buffer).map_err(transport)?;
        raw.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&raw);
        if let Some(reply) = whole_reply(&text, read == 0) {
            break reply;
        }
        if read == 0 {
            return Err(failed(format!("the reply ends early: {text:?}")));
        }
    };
    let value = serde_json::from_str(&payload).map_err(|e| failed(format!("{e}: {payload:?}")))?;
    Ok((status, value))
}

/// The status and body of the reply in `raw` once it is whole (`closed`:
/// the peer has closed the connection), else `None`.
fn whole_reply(raw: &str, closed: bool) -> Option<(u16, String)> {
    let (head, payload) = raw.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let mut length = None;
    let mut chunked = false;
    for line in head.lines().skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            length = value.parse::<usize>().ok();
        } else if name == "transfer-encoding" {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    let body = match length {
        _ if chunked => dechunk(payload)?,
        Some(length) => payload.get(..length)?.to_owned(),
        None if closed => payload.to_owned(),
        None => return None,
    };
    Some((status, body))
}

/// The body of a chunked transfer, or `None` until its last chunk is in.
fn dechunk(mut rest: &str) -> Option<String> {
    let mut body = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// `target/screenshots` of the workspace whose test executable runs:
/// `target/<profile>/deps/<test>` is three levels below `target`.
fn screenshots_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("test executables live in target/<profile>/deps");
    target.join("screenshots")
}

/// Decodes standard base64 (padding optional), as screenshots come.
fn decode_base64(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let (mut bits, mut held) = (0_u32, 0_u32);
    for byte in text.bytes() {
        let sextet = match byte {
            b'A'..=b'Z' => byte - b'A',
            b'a'..=b'z' => byte - b'a' + 26,
            b'0'..=b'9' => byte - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\r' | b'\n' => continue,
            other => panic!("not base64: byte {other:#x}"),
        };
        bits = (bits << 6) | u32::from(sextet);
        held += 6;
        if held >= 8 {
            held -= 8;
            out.extend((bits >> held).to_le_bytes().first());
            bits &= (1 << held) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(decode_base64("aGVsbG8="), b"hello");
        assert_eq!(decode_base64("aGVsbG8"), b"hello");
        assert_eq!(decode_base64("aGk/Pz4+"), b"hi??>>");
        assert_eq!(decode_base64(""), b"");
    }

    #[test]
    fn a_reply_is_whole_at_its_length_or_last_chunk() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length:7\r\n\r\n";
        assert_eq!(whole_reply(&format!("{head}{{\"a\""), false), None);
        let whole = whole_reply(&format!("{head}{{\"a\":1}}"), false);
        assert_eq!(whole, Some((200, "{\"a\":1}".to_owned())));
        let chunked = "HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n";
        assert_eq!(whole_reply(chunked, false), None);
        let whole = whole_reply(&format!("{chunked}0\r\n\r\n"), false);
        assert_eq!(whole, Some((404, "{}".to_owned())));
    }

    #[test]
    fn chunks_are_joined() {
        assert_eq!(
            dechunk("4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n").as_deref(),
            Some("{\"a\":1}")
        );
        assert_eq!(dechunk("9\r\nshort\r\n"), None);
    }
}
