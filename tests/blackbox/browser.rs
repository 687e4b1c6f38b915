//! The dashboard of `loops serve` (issue 29) in a real browser: headless
//! Chromium, driven through WebDriver ([`loops_tests::webdriver`]), logs
//! in with the URL the server prints, sees the loops, opens one and pauses
//! it from its page (the store changes), follows a running run's output
//! as it arrives, and opens a workflow's graph. Each page's screenshot is
//! written under `target/screenshots/` for review. Without Chromium or
//! chromedriver the tests skip, saying so, unless `CI` is set (CI installs
//! them).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use loops_tests::webdriver::{Browser, ENTER};
use loops_tests::{TestEnv, wait_for};
use serde_json::json;

use crate::mcp::cli_json;
use crate::serve::Server;
use crate::workflows::{create_workflow, exec_step};

/// The longest a page, or a change on it, may take.
const DEADLINE: Duration = Duration::from_secs(30);

/// A `loops serve` of `env` and a browser logged in to it.
struct Dashboard {
    browser: Browser,
    server: Server,
}

impl Dashboard {
    /// Starts the server and the browser, and logs in with the printed
    /// URL; or `None`, saying why `test` skips, without the browser.
    fn open(env: &TestEnv, test: &str) -> Option<Dashboard> {
        let browser = Browser::start(&format!("browser::{test}"))?;
        let server = Server::start(env);
        let dashboard = Dashboard { browser, server };
        dashboard.browser.goto(&dashboard.server.login_url());
        // The cookie is set and the login answers 303 to the loops.
        dashboard.wait_at("/");
        Some(dashboard)
    }

    /// The address of `path` on the server.
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.addr)
    }

    /// Loads `path`.
    fn visit(&self, path: &str) {
        self.browser.goto(&self.url(path));
    }

    /// Waits until the browser shows `path` (with its query).
    fn wait_at(&self, path: &str) {
        let want = self.url(path);
        wait_for(&format!("the browser at {want}"), DEADLINE, || {
            (self.browser.current_url() == want).then_some(())
        });
    }

    /// Writes the screenshot `browser-<name>.png`.
    fn shoot(&self, name: &str) -> PathBuf {
        self.browser.screenshot(&format!("browser-{name}"))
    }
}

/// The `data-id`s of the rows of `table#loops`.
fn loop_rows(browser: &Browser) -> BTreeSet<String> {
    let rows = browser.find_all("table#loops tr.loop");
    rows.iter()
        .map(|row| row.attribute("data-id").expect("a loop row has its id"))
        .collect()
}

#[test]
fn the_loops_page_lists_the_loops_and_a_loop_is_paused_from_its_page() {
    let env = TestEnv::new();
    let nightly = env.create_command("nightly", "true", &["--every", "1h"]);
    let backup = env.create_command("backup", "true", &["--every", "5m"]);
    let reports = env.create_command("reports", "true", &["--cron", "0 9 * * 1"]);
    env.loops(["run-now", "nightly"]).run();
    let Some(web) = Dashboard::open(
        &env,
        "the_loops_page_lists_the_loops_and_a_loop_is_paused_from_its_page",
    ) else {
        return;
    };
    let browser = &web.browser;

    // Every loop the CLI lists, with its name, link and status.
    browser.wait_for("table#loops", DEADLINE);
    web.shoot("loops");
    let listed = cli_json(&env, &["list"]);
    let listed = listed.as_array().expect("list --json is a list");
    assert_eq!(listed.len(), 3);
    for doc in listed {
        let id = doc["id"].as_str().expect("an id");
        let row = browser.find(&format!("tr.loop[data-id=\"{id}\"]"));
        assert_eq!(
            row.attribute("data-status").as_deref(),
            doc["status"].as_str()
        );
        let link = row.find("td:first-child a");
        assert_eq!(Some(link.text().trim()), doc["name"].as_str());
        assert_eq!(link.attribute("href"), Some(format!("/loops/{id}")));
    }
    let all: BTreeSet<String> = [&nightly, &backup, &reports].map(String::clone).into();
    assert_eq!(loop_rows(browser), all);

    // The search box filters by name, through the form's GET.
    let search = browser.find("form#filters input[name=q]");
    search.send_keys(&format!("back{ENTER}"));
    wait_for("the search to filter the loops", DEADLINE, || {
        (browser.current_url().contains("q=back") && loop_rows(browser).len() == 1).then_some(())
    });
    assert_eq!(loop_rows(browser), BTreeSet::from([backup.clone()]));
    browser.find("form#filters select[name=status]");

    // A loop's page: its card, next fire times, heat map and runs.
    web.visit("/");
    browser
        .find(&format!("tr.loop[data-id=\"{nightly}\"] td:first-child a"))
        .click();
    web.wait_at(&format!("/loops/{nightly}"));
    assert!(browser.find("h1").text().contains("nightly"));
    let status = "dl#card dd[data-field=status]";
    assert!(browser.find(status).text().contains("active"));
    assert_eq!(browser.find_all("ol#next-runs li").len(), 5);
    let runs = cli_json(&env, &["runs", "nightly"]);
    let run_id = runs[0]["id"].as_str().expect("a run id");
    let run_row = browser.find(&format!("table#runs tr[data-run=\"{run_id}\"]"));
    let run_link = run_row.find("a");
    assert_eq!(run_link.attribute("href"), Some(format!("/runs/{run_id}")));
    assert!(!browser.find_all("div#heatmap a.cell").is_empty());
    web.shoot("loop");

    // Pause from the page: the POST answers 303 back here, and the store
    // says paused; resume undoes it.
    let action = browser.find("form[action$=\"/pause\"]").attribute("action");
    assert_eq!(action, Some(format!("/loops/{nightly}/pause")));
    // The live view may show the new status before the POST's answer
    // replaces the page, so each click after one finds its element again.
    browser.click_when_ready("button#pause", DEADLINE);
    browser.wait_for_text(status, "paused", DEADLINE);
    web.wait_at(&format!("/loops/{nightly}"));
    assert_eq!(cli_json(&env, &["show", &nightly])["status"], "paused");
    web.shoot("loop-paused");
    browser.click_when_ready("button#resume", DEADLINE);
    browser.wait_for_text(status, "active", DEADLINE);
    assert_eq!(cli_json(&env, &["show", &nightly])["status"], "active");
    assert_eq!(cli_json(&env, &["show", &backup])["status"], "active");

    // The run's page, reached from the loop's.
    browser.click_when_ready(&format!("table#runs tr[data-run=\"{run_id}\"] a"), DEADLINE);
    web.wait_at(&format!("/runs/{run_id}"));
    let run_status = browser.find("dl#run dd[data-field=status]").text();
    assert!(run_status.contains("succeeded"), "{run_status}");
    web.shoot("run");

    web.visit("/daemons");
    browser.wait_for("table#daemons", DEADLINE);
    web.shoot("daemons");
}

#[test]
fn a_page_without_the_cookie_is_an_html_refusal() {
    let env = TestEnv::new();
    env.create_command("nightly", "true", &["--every", "1h"]);
    let Some(browser) = Browser::start("browser::a_page_without_the_cookie_is_an_html_refusal")
    else {
        return;
    };
    let server = Server::start(&env);
    browser.goto(&format!("http://{}/", server.addr));
    let kind = browser.execute("return document.contentType;", &[]);
    assert_eq!(kind, "text/html");
    assert!(browser.find_all("table#loops").is_empty());
    assert!(!browser.source().contains("nightly"));
    browser.screenshot("browser-refused");
    // The same browser, once logged in, sees the loops.
    browser.goto(&server.login_url());
    browser.wait_for_text("table#loops", "nightly", DEADLINE);
}

/// `loops run-now <loop>` in the background, whose command prints until
/// the gate file exists; dropping it opens the gate and reaps the runner.
struct Runner {
    child: Child,
    gate: PathBuf,
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.gate, "");
        let ended = (0..250).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            matches!(self.child.try_wait(), Ok(Some(_)))
        });
        if !ended {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The highest `N` of the `line N` lines in `text`.
fn last_line(text: &str) -> Option<u32> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("line ")?.parse().ok())
        .max()
}

#[test]
fn a_running_runs_output_arrives_live() {
    let env = TestEnv::new();
    let gate = env.home().join("gate");
    // A line every 300 ms for about 20 s, or until the gate opens.
    env.write_script(
        "ticker",
        &format!(
            "i=0\nwhile [ $i -lt 70 ] && [ ! -e '{}' ]; do\n  i=$((i+1))\n  echo line $i\n  sleep 0.3\ndone",
            gate.display()
        ),
    );
    env.create_command("ticker", "ticker", &["--every", "1h"]);
    let Some(web) = Dashboard::open(&env, "a_running_runs_output_arrives_live") else {
        return;
    };
    let browser = &web.browser;
    let _runner = Runner {
        child: env.spawn(&["run-now", "ticker"]),
        gate,
    };
    let run_id = wait_for("the run to start", DEADLINE, || {
        let runs = env.loops(["--json", "runs", "ticker"]).run().json();
        let run = runs.as_array()?.first()?.clone();
        (run["status"] == "running").then(|| run["id"].as_str().map(str::to_owned))?
    });

    web.visit(&format!("/runs/{run_id}"));
    let status = browser.find("dl#run dd[data-field=status]").text();
    assert!(status.contains("running"), "{status}");
    // Output only on request, as --show-output.
    assert!(browser.find_all("pre#output").is_empty());
    let show = browser.find("a#show-output");
    assert_eq!(
        show.attribute("href"),
        Some(format!("/runs/{run_id}?output=1"))
    );
    show.click();
    web.wait_at(&format!("/runs/{run_id}?output=1"));
    let first = browser
        .wait_for_text("pre#output", "line ", DEADLINE)
        .text();
    let seen = last_line(&first).expect("a line of output");
    // A mark on the page: if it survives, the new lines came without a
    // reload.
    browser.execute("window.loopsTestMark = 1;", &[]);
    let later = format!("line {}", seen + 3);
    let output = browser.wait_for_text("pre#output", &later, DEADLINE).text();
    assert!(output.starts_with("line 1\n"), "{output}");
    assert_eq!(
        browser.execute("return window.loopsTestMark;", &[]),
        json!(1),
        "the page reloaded instead of following the output"
    );
    web.shoot("run-live");
    let still = cli_json(&env, &["runs", "ticker"]);
    assert_eq!(still[0]["id"], run_id.as_str());
    assert_eq!(
        still[0]["status"], "running",
        "the run ended before the test"
    );
}

#[test]
fn a_workflows_graph_has_a_node_per_step() {
    let env = TestEnv::new();
    let workflow = json!({
        "name": "release",
        "description": "build, test, deploy",
        "steps": [
            exec_step("build", "true", &[]),
            exec_step("test", "true", &["build"]),
            exec_step("deploy", "true", &["test"]),
        ],
    });
    let id = create_workflow(&env, &workflow);
    let Some(web) = Dashboard::open(&env, "a_workflows_graph_has_a_node_per_step") else {
        return;
    };
    let browser = &web.browser;
    web.visit("/workflows");
    let row = browser.wait_for(&format!("table#workflows tr[data-id=\"{id}\"]"), DEADLINE);
    assert!(row.text().contains("release"));
    web.shoot("workflows");
    row.find(&format!("a[href=\"/workflows/{id}\"]")).click();
    web.wait_at(&format!("/workflows/{id}"));
    let graph = browser.wait_for("svg#dag", DEADLINE);
    let steps: BTreeSet<String> = graph
        .find_all("g.node")
        .iter()
        .map(|node| node.attribute("data-step").expect("a node names its step"))
        .collect();
    let want: BTreeSet<String> = ["build", "test", "deploy"].map(str::to_owned).into();
    assert_eq!(steps, want);
    web.shoot("workflow");
}
