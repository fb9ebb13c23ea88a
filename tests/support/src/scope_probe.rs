//! The scope probe: every operation of the dashboard's release's scope table
//! (conf/scopes/<release>.toml) that needs a
//! token, sent through the gateway and straight to the dashboard as the same users, and
//! whether each refused it (403) alike. tests/it/scope_table.rs runs it for every release,
//! tests/it/import.rs for an imported custom role.
//!
//! Allowed requests are really forwarded (with the gateway's administrator service account)
//! and really run on the dashboard (with the users' own rights): path values are dummies
//! (`cg-probe-nonexistent`) and bodies `{}`, so they fail harmlessly, as
//! deploy/tools/probe_scopes.py does.

use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

use super::{assert_forbidden, Dashboard, Reply, RunningGateway, V1};

const DUMMY: &str = "cg-probe-nonexistent";

/// Real objects of the cluster by the path parameter that names them.
type Objects = std::collections::BTreeMap<&'static str, String>;

/// The objects a cluster holding data has (deploy/ceph-dev start-dashboard.sh --data): its
/// pool, RBD image, RGW user and OSD; none for a cluster without.
fn cluster_objects(dash: &Dashboard) -> Objects {
    if !dash.holds_data() {
        return Objects::new();
    }
    let pool = dash.get("CG_DATA_POOL");
    let image = dash.get("CG_DATA_IMAGE");
    Objects::from([
        ("pool_name", pool.to_string()),
        ("image_spec", format!("{pool}%2F{image}")),
        ("uid", dash.get("CG_RGW_USER").to_string()),
        ("svc_id", "0".to_string()),
    ])
}

#[derive(Debug)]
struct Operation {
    method: Method,
    template: String,
    scope: String,
    permission: String,
    public: bool,
}

impl Operation {
    /// The template with each `{param}` that `objects` names replaced by that real object,
    /// the others by the dummy value.
    fn path_with(&self, objects: &Objects) -> String {
        let mut out = String::new();
        let mut rest = self.template.as_str();
        while let Some(start) = rest.find('{') {
            let end = rest[start..]
                .find('}')
                .map(|e| start + e)
                .expect("closing brace");
            out.push_str(&rest[..start]);
            let param = &rest[start + 1..end];
            out.push_str(objects.get(param).map_or(DUMMY, String::as_str));
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

/// The scope table derived from Ceph `release`'s dashboard.
pub fn scope_table(release: &str) -> std::path::PathBuf {
    std::path::Path::new(crate::REPO_ROOT)
        .join("conf/scopes")
        .join(format!("{release}.toml"))
}

fn operations(release: &str) -> Vec<Operation> {
    let path = scope_table(release);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
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

/// One user's view of one operation: did the gateway and the dashboard refuse it?
struct Decision {
    gateway: Reply,
    dashboard: Reply,
}

impl Decision {
    fn agrees(&self) -> bool {
        (self.gateway.status == 403) == (self.dashboard.status == 403)
    }

    /// For a read both answered 200: the key paths of the answer only one side has (what
    /// the dashboard filters by its caller's permissions shows here). Empty otherwise.
    fn shape_difference(&self) -> (Vec<String>, Vec<String>) {
        let both_ok = self.gateway.status == 200 && self.dashboard.status == 200;
        let parse = |r: &Reply| serde_json::from_slice::<Value>(&r.body).ok();
        let (Some(through), Some(direct), true) =
            (parse(&self.gateway), parse(&self.dashboard), both_ok)
        else {
            return (Vec::new(), Vec::new());
        };
        let (through, direct) = (key_paths(&through), key_paths(&direct));
        (
            through.difference(&direct).cloned().collect(),
            direct.difference(&through).cloned().collect(),
        )
    }
}

/// Every key path of `value` through its objects (`a.b.c`), down to `MAX_DEPTH` levels, not
/// into arrays: what the dashboard filters by permission is an object's keys (a report's
/// sections, an RGW user's `keys`), while deeper levels and lists are the cluster's data
/// (maps keyed by daemon, counters, log lines), the same whoever reads them, which change
/// from one call to the next (a log that was empty has lines a moment later).
fn key_paths(value: &Value) -> std::collections::BTreeSet<String> {
    const MAX_DEPTH: usize = 3;
    fn walk(value: &Value, at: String, depth: usize, out: &mut std::collections::BTreeSet<String>) {
        if depth == MAX_DEPTH {
            return;
        }
        if let Value::Object(map) = value {
            for (key, inner) in map {
                let path = format!("{at}.{key}");
                out.insert(path.clone());
                walk(inner, path, depth + 1, out);
            }
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(value, String::new(), 0, &mut out);
    out
}

fn describe(r: &Reply) -> String {
    let text = r.text();
    format!("{} {}", r.status, &text[..text.len().min(120)])
}

/// A user probed: its name, its gateway token and its dashboard token.
pub struct Subject {
    pub name: String,
    pub gateway_token: String,
    pub dashboard_token: String,
}

/// What the probe found.
#[derive(Debug)]
pub struct ProbeOutcome {
    /// Operations of the table that need a token.
    pub operations: usize,
    /// Of them, sent through the gateway and compared.
    pub compared: usize,
    /// How many the dashboard refused, per subject.
    pub refused: Vec<usize>,
    /// `/ui-api` operations the gateway does not forward (404).
    pub not_forwarded: usize,
    /// Each disagreement, one line each.
    pub mismatches: Vec<String>,
}

impl ProbeOutcome {
    /// Fails unless every subject was refused something (the probe reached the dashboard's
    /// checks) and nothing differed.
    pub fn assert_clean(&self) {
        let summary = self.summary();
        assert!(
            self.refused.iter().any(|n| *n > 0),
            "the dashboard refused nothing: {summary}"
        );
        assert!(
            self.mismatches.is_empty(),
            "{summary}\n{}",
            self.mismatches.join("\n")
        );
    }

    pub fn summary(&self) -> String {
        format!(
            "{} operations needing a token: {} compared through the gateway (dashboard \
             refused {:?} per user); {} outside /api not forwarded by the gateway (404); \
             {} mismatches",
            self.operations,
            self.compared,
            self.refused,
            self.not_forwarded,
            self.mismatches.len()
        )
    }
}

/// Sends every operation of `dash`'s release's table needing a token through `gw` and to
/// `dash` as each subject.
pub async fn probe_scopes(
    gw: &RunningGateway,
    dash: &Dashboard,
    subjects: &[Subject],
) -> ProbeOutcome {
    let ops = table_operations(dash, |_| true, 250);
    probe(gw, dash, subjects, ops, &Objects::new()).await
}

/// The parity probe: every read (GET) of `dash`'s release's table needing a token, through
/// `gw` and to `dash` as each subject; a read both answer 200 must have the same key paths
/// both ways, as well as the same decision.
pub async fn probe_reads(
    gw: &RunningGateway,
    dash: &Dashboard,
    subjects: &[Subject],
) -> ProbeOutcome {
    let ops = table_operations(dash, |op| op.method == Method::GET, 100);
    probe(gw, dash, subjects, ops, &cluster_objects(dash)).await
}

/// The operations of `dash`'s release's table that need a token and that `keep` keeps:
/// more than `at_least` of them, or the table was not read as it should be.
fn table_operations(
    dash: &Dashboard,
    keep: impl Fn(&Operation) -> bool,
    at_least: usize,
) -> Vec<Operation> {
    let ops: Vec<Operation> = operations(dash.release())
        .into_iter()
        .filter(|op| !op.public && keep(op))
        .collect();
    assert!(
        ops.len() > at_least,
        "only {} operations of the table",
        ops.len()
    );
    ops
}

async fn probe(
    gw: &RunningGateway,
    dash: &Dashboard,
    subjects: &[Subject],
    ops: Vec<Operation>,
    objects: &Objects,
) -> ProbeOutcome {
    let mut outcome = ProbeOutcome {
        operations: ops.len(),
        compared: 0,
        refused: vec![0; subjects.len()],
        not_forwarded: 0,
        mismatches: Vec::new(),
    };
    for op in &ops {
        let path = op.path_with(objects);
        let body = op.body();
        // Without a token the gateway answers 401 itself, for every operation it forwards.
        let anonymous = gw.api(op.method.clone(), &path, None, body.as_ref()).await;
        if !op.must_be_forwarded() && anonymous.status == 404 {
            outcome.not_forwarded += 1;
            continue;
        }
        if anonymous.status != 401 {
            outcome.mismatches.push(format!(
                "{} without a token: {}",
                op.label(),
                describe(&anonymous)
            ));
        }
        outcome.compared += 1;
        // Every subject's pair of requests at once: some operations take the dashboard 10 s
        // (e.g. waiting for an RGW daemon that does not exist), and the decision is taken
        // before the handler runs, so running them side by side changes no answer's status.
        let decisions = join_all(subjects.iter().map(|subject| async {
            let (gateway, dashboard) = tokio::join!(
                gw.api(
                    op.method.clone(),
                    &path,
                    Some(&subject.gateway_token),
                    body.as_ref(),
                ),
                reference_answer(
                    dash,
                    op.method.clone(),
                    &path,
                    &subject.dashboard_token,
                    body.as_ref()
                ),
            );
            Decision { gateway, dashboard }
        }))
        .await;
        for ((i, subject), decision) in subjects.iter().enumerate().zip(decisions) {
            if decision.dashboard.status == 403 {
                outcome.refused[i] += 1;
            }
            let user = &subject.name;
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
            let (only_through, only_direct) = decision.shape_difference();
            if !only_through.is_empty() || !only_direct.is_empty() {
                outcome.mismatches.push(format!(
                    "{} as {user}: keys only through the gateway {only_through:?}, only directly {only_direct:?}",
                    op.label()
                ));
            }
            if !decision.agrees() || decision.gateway.status == 401 {
                outcome.mismatches.push(format!(
                    "{} as {user}: gateway {}; dashboard {}",
                    op.label(),
                    describe(&decision.gateway),
                    describe(&decision.dashboard)
                ));
            }
        }
    }
    outcome
}

/// The dashboard's own answer to the probe's request. Under the probe's load (three releases'
/// managers on two cores) a dashboard has closed a connection before its answer was
/// complete (20.2, once in CI): that is no decision of the dashboard's, so the request
/// (always for a made-up name, changing nothing) is sent once more.
async fn reference_answer(
    dash: &Dashboard,
    method: Method,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> Reply {
    match dash
        .try_send(method.clone(), path, Some(token), V1, body)
        .await
    {
        Ok(reply) => reply,
        Err(e) => {
            eprintln!("{method} {path}: the dashboard dropped the request ({e}); sending it again");
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            dash.send(method, path, Some(token), V1, body).await
        }
    }
}
