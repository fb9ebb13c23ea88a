//! The shell examples that can run against a gateway in front of the test dashboard: every
//! code block of docs/quick-start.md and README.md marked `<!-- checked: shows: TEXT -->` is
//! run, page by page, in order, in one bash session, with `GATEWAY`, `METRICS` and `STATE` set for a
//! gateway in front of the shared real dashboard, as the page tells the reader to set them.
//! A block that exits non-zero, or whose output does not contain its TEXT, fails the test.

use std::path::Path;
use std::process::Command;

use crate::common::*;

const MARK: &str = "<!-- checked: shows: ";

/// One marked block: what its output must contain, and its script.
struct Example {
    shows: String,
    script: String,
}

/// The marked ```sh blocks of a page, in order.
fn marked_examples(page: &str) -> Vec<Example> {
    let mut examples = Vec::new();
    let mut lines = page.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix(MARK) else {
            continue;
        };
        let shows = rest.trim_end().trim_end_matches("-->").trim().to_string();
        assert_eq!(
            lines.next(),
            Some("```sh"),
            "a marked block is ```sh: {line}"
        );
        let script: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        examples.push(Example {
            shows,
            script: script.join("\n"),
        });
    }
    examples
}

/// The examples as one script: each block's output between markers, stopping at the first
/// block that fails.
fn session_script(examples: &[Example]) -> String {
    let mut script = String::from("set -euo pipefail\n");
    for (i, example) in examples.iter().enumerate() {
        script.push_str(&format!(
            "echo '@@block {i}'\n{}\necho '@@end {i}'\n",
            example.script
        ));
    }
    script
}

/// The output of block `i`, if the session got to its end.
fn block_output(stdout: &str, i: usize) -> Option<&str> {
    let start = stdout.find(&format!("@@block {i}\n"))?;
    let end = stdout.find(&format!("@@end {i}\n"))?;
    stdout.get(start..end)
}

/// Runs `page`'s marked examples (at least `at_least`) against a gateway in front of the
/// shared dashboard, and fails on the first that does not finish or show what it says.
fn run_examples(page: &str, at_least: usize) {
    let page_path = Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
    let text = std::fs::read_to_string(&page_path).unwrap();
    let examples = marked_examples(&text);
    assert!(
        examples.len() >= at_least,
        "{page}: marked examples: {}",
        examples.len()
    );

    let gw = Gateway::new()
        .no_users_file()
        .tls(true)
        .upstream(Dashboard::shared())
        .start();
    let work = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(session_script(&examples))
        .current_dir(work.path())
        .env("GATEWAY", gw.url(""))
        .env("METRICS", format!("http://{}", gw.metrics_addr))
        .env("STATE", gw.state_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (i, example) in examples.iter().enumerate() {
        let Some(output) = block_output(&stdout, i) else {
            panic!(
                "{page}: block {i} did not finish ({}):\n{}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                out.status, example.script
            );
        };
        assert!(
            output.contains(&example.shows),
            "{page}: block {i} does not show {:?}:\n{}\noutput:\n{output}",
            example.shows,
            example.script
        );
    }
    assert!(out.status.success(), "{}\nstderr:\n{stderr}", out.status);
}

#[test]
fn the_quick_starts_examples_run_against_a_gateway_and_show_what_the_page_says() {
    run_examples("docs/quick-start.md", 5);
}

#[test]
fn the_readme_s_example_runs_against_a_gateway_and_shows_what_it_says() {
    run_examples("README.md", 1);
}
