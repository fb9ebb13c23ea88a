//! The shipped scope table against the real dashboard: for every operation of
//! conf/scopes.toml that needs a token, the gateway refuses a read-only and a pool-manager
//! user with 403 exactly when the dashboard itself refuses its users of those roles.
//!
//! Allowed requests are really forwarded (with the gateway's administrator service account)
//! and really run on the dashboard (with its viewer's and poolmgr's rights): path values
//! are dummies (`cg-probe-nonexistent`) and bodies `{}`, so they fail harmlessly, as
//! deploy/tools/probe_scopes.py does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use reqwest::Method;
use serde_json::{json, Value};

const DUMMY: &str = "cg-probe-nonexistent";

#[derive(Debug)]
struct Operation {
    method: Method,
    template: String,
    scope: String,
    permission: String,
    public: bool,
}

impl Operation {
    /// The template with every `{param}` replaced by the dummy value.
    fn path(&self) -> String {
        let mut out = String::new();
        let mut rest = self.template.as_str();
        while let Some(start) = rest.find('{') {
            let end = rest[start..]
                .find('}')
                .map(|e| start + e)
                .expect("closing brace");
            out.push_str(&rest[..start]);
            out.push_str(DUMMY);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    fn body(&self) -> Option<Value> {
        matches!(self.method, Method::POST | Method::PUT | Method::PATCH).then(|| json!({}))
    }

    /// The gateway must forward every `/api` path; the web UI's `/ui-api` it may refuse (404).
    fn must_be_forwarded(&self) -> bool {
        self.template.starts_with("/api/")
    }

    fn label(&self) -> String {
        let scope = if self.scope.is_empty() {
            "-"
        } else {
            &self.scope
        };
        format!(
            "{} {} [{scope}/{}]",
            self.method, self.template, self.permission
        )
    }
}

/// `access.closed_operations`' default: the gateway refuses these whoever asks, because
/// through it they would act on its own dashboard account.
const CLOSED_AT_THE_GATEWAY: [&str; 1] = ["POST /api/user/{username}/change_password"];

fn operations() -> Vec<Operation> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/scopes.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let table: toml::Table = toml::from_str(&text).unwrap();
    let ops = table["operation"]
        .as_array()
        .expect("[[operation]] entries");
    ops.iter()
        .map(|op| {
            let field = |k: &str| op[k].as_str().unwrap().to_string();
            Operation {
                method: Method::from_bytes(field("method").as_bytes()).unwrap(),
                template: field("path"),
                scope: field("scope"),
                permission: field("permission"),
                public: op["public"].as_bool().unwrap(),
            }
        })
        .collect()
}

/// One role's view of one operation: did the gateway and the dashboard refuse it?
struct Decision {
    gateway: Reply,
    dashboard: Reply,
}

impl Decision {
    fn agrees(&self) -> bool {
        (self.gateway.status == 403) == (self.dashboard.status == 403)
    }
}

fn describe(r: &Reply) -> String {
    let text = r.text();
    format!("{} {}", r.status, &text[..text.len().min(120)])
}

#[tokio::test]
async fn the_gateway_refuses_exactly_what_the_dashboard_refuses_for_every_operation() {
    let dash = Dashboard::shared();
    let gw = Gateway::with_dashboard_users().upstream(dash).start();
    let roles = [(VIEWER, VIEWER_PW), (POOLMGR, POOLMGR_PW)];
    let mut tokens = Vec::new();
    for (user, password) in roles {
        tokens.push((user, gw.login(user, password).await, dash.login(user).await));
    }

    let ops: Vec<Operation> = operations().into_iter().filter(|op| !op.public).collect();
    assert!(
        ops.len() > 250,
        "only {} operations in the table",
        ops.len()
    );
    let mut mismatches = Vec::new();
    let mut refused = vec![0usize; roles.len()];
    let mut not_forwarded = Vec::new();
    let mut compared = 0;
    for op in &ops {
        let path = op.path();
        let body = op.body();
        // Without a token the gateway answers 401 itself, for every operation it forwards.
        let anonymous = gw.api(op.method.clone(), &path, None, body.as_ref()).await;
        if !op.must_be_forwarded() && anonymous.status == 404 {
            not_forwarded.push(op.label());
            continue;
        }
        if anonymous.status != 401 {
            mismatches.push(format!(
                "{} without a token: {}",
                op.label(),
                describe(&anonymous)
            ));
        }
        compared += 1;
        for (i, (user, gw_token, dash_token)) in tokens.iter().enumerate() {
            let decision = Decision {
                gateway: gw
                    .api(op.method.clone(), &path, Some(gw_token), body.as_ref())
                    .await,
                dashboard: dash
                    .send(
                        op.method.clone(),
                        &path,
                        Some(dash_token),
                        V1,
                        body.as_ref(),
                    )
                    .await,
            };
            if decision.dashboard.status == 403 {
                refused[i] += 1;
            }
            if CLOSED_AT_THE_GATEWAY.contains(&format!("{} {}", op.method, op.template).as_str()) {
                assert_eq!(decision.gateway.status, 403, "{} as {user}", op.label());
                assert!(decision
                    .gateway
                    .text()
                    .contains("not offered through the gateway"));
                continue;
            }
            if decision.gateway.status == 403 && decision.agrees() {
                assert_forbidden(&decision.gateway);
            }
            if !decision.agrees() || decision.gateway.status == 401 {
                mismatches.push(format!(
                    "{} as {user}: gateway {}; dashboard {}",
                    op.label(),
                    describe(&decision.gateway),
                    describe(&decision.dashboard)
                ));
            }
        }
    }

    let summary = format!(
        "{} operations needing a token: {compared} compared through the gateway \
         (dashboard refused {} for {VIEWER}, {} for {POOLMGR}); {} outside /api not \
         forwarded by the gateway (404); {} mismatches",
        ops.len(),
        refused[0],
        refused[1],
        not_forwarded.len(),
        mismatches.len()
    );
    println!("{summary}");
    for line in &mismatches {
        println!("MISMATCH {line}");
    }
    assert!(
        refused[0] > 0 && refused[1] > 0,
        "the dashboard refused nothing: {summary}"
    );
    assert!(
        mismatches.is_empty(),
        "{summary}\n{}",
        mismatches.join("\n")
    );
}
