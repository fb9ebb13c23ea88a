//! `deploy/kubernetes/`: every manifest validates against the Kubernetes API's schemas
//! (kubernetes-validate, strict, for the oldest and newest releases it is meant for), the
//! Deployment's ports and probes are the ones its configuration listens on, its grace period
//! covers the drain, and the configuration in each ConfigMap passes `check-config` with the
//! Secret's files laid out as the pod sees them.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use serde::Deserialize;
use serde_yaml::Value;

/// The oldest release with the preStop `sleep` action on by default, and the newest the
/// validator knows.
const KUBERNETES_RELEASES: [&str; 2] = ["1.30.0", "1.37.0"];
/// Where the Deployment mounts the ConfigMap and the Secret; the configuration's paths are
/// relative to the first.
const CONFIG_MOUNT: &str = "/etc/clustergate/config";
const SECRETS_MOUNT: &str = "/etc/clustergate/secrets";

fn kubernetes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes")
}

fn manifests() -> Vec<PathBuf> {
    let base = kubernetes_dir();
    let mut files: Vec<PathBuf> = [base.clone(), base.join("rook")]
        .iter()
        .flat_map(|dir| fs::read_dir(dir).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Every document of every manifest file.
fn documents(file: &Path) -> Vec<Value> {
    let text = fs::read_to_string(file).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn find(kind: &str, name: &str, file: &Path) -> Value {
    documents(file)
        .into_iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {}", file.display()))
}

fn config_text(configmap_file: &Path) -> String {
    find("ConfigMap", "clustergate-config", configmap_file)["data"]["clustergate.toml"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn config_of(configmap_file: &Path) -> toml::Table {
    config_text(configmap_file).parse().unwrap()
}

fn listen_port(config: &toml::Table, section: &str) -> u64 {
    let listen = config[section]["listen"].as_str().unwrap();
    listen.rsplit(':').next().unwrap().parse().unwrap()
}

fn container() -> Value {
    let deployment = find(
        "Deployment",
        "clustergate",
        &kubernetes_dir().join("deployment.yaml"),
    );
    deployment["spec"]["template"]["spec"]["containers"][0].clone()
}

fn container_port(container: &Value, name: &str) -> u64 {
    container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("the container has no port named {name}"))["containerPort"]
        .as_u64()
        .unwrap()
}

#[test]
fn every_manifest_validates_against_the_kubernetes_api_schemas() {
    let venv = std::env::var_os("CG_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".test-venv"));
    let validator = venv.join("bin/kubernetes-validate");
    assert!(
        validator.is_file(),
        "kubernetes-validate is not installed at {}: run deploy/install-deps.sh --test \
         (tests/run.sh does)",
        validator.display()
    );
    let files = manifests();
    assert!(files.len() >= 8, "manifests found: {files:?}");
    for release in KUBERNETES_RELEASES {
        let out = Command::new(&validator)
            .args(["--strict", "--quiet", "-k", release])
            .args(&files)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "Kubernetes {release}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_deployments_ports_and_probes_are_the_ones_its_configuration_listens_on() {
    let shipped: toml::Table =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/clustergate.toml"))
            .unwrap()
            .parse()
            .unwrap();
    let container = container();
    for configmap in [
        kubernetes_dir().join("configmap.yaml"),
        kubernetes_dir().join("rook/configmap.yaml"),
    ] {
        let config = config_of(&configmap);
        let (https, metrics) = (
            listen_port(&config, "server"),
            listen_port(&config, "metrics"),
        );
        assert_eq!(
            https,
            listen_port(&shipped, "server"),
            "{}",
            configmap.display()
        );
        assert_eq!(
            metrics,
            listen_port(&shipped, "metrics"),
            "{}",
            configmap.display()
        );
        assert_eq!(container_port(&container, "https"), https);
        assert_eq!(container_port(&container, "metrics"), metrics);
        // The kubelet reaches the admin listener on the pod's address.
        assert!(config["metrics"]["listen"]
            .as_str()
            .unwrap()
            .starts_with("0.0.0.0:"));
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["readinessProbe"]["httpGet"]["port"], "metrics");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "metrics");

    let services = documents(&kubernetes_dir().join("service.yaml"));
    let target = |name: &str| {
        services
            .iter()
            .find(|s| s["metadata"]["name"] == name)
            .unwrap()["spec"]["ports"][0]["targetPort"]
            .clone()
    };
    assert_eq!(target("clustergate"), "https");
    assert_eq!(target("clustergate-metrics"), "metrics");
}

#[test]
fn the_grace_period_covers_the_prestop_wait_the_drain_and_the_shutdown_grace() {
    let deployment = find(
        "Deployment",
        "clustergate",
        &kubernetes_dir().join("deployment.yaml"),
    );
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap();
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    for configmap in [
        kubernetes_dir().join("configmap.yaml"),
        kubernetes_dir().join("rook/configmap.yaml"),
    ] {
        let server = &config_of(&configmap)["server"];
        let drain = server["drain_seconds"].as_integer().unwrap() as u64;
        let shutdown = server["shutdown_grace_seconds"].as_integer().unwrap() as u64;
        assert!(
            drain > 2,
            "balancers need two failed checks: drain_seconds {drain}"
        );
        assert!(
            pre_stop + drain + shutdown < grace,
            "preStop {pre_stop} + drain {drain} + shutdown grace {shutdown} >= {grace}"
        );
    }
    assert_eq!(deployment["spec"]["replicas"], 3);
    // All replicas' requests at once stay below the dashboard's 10 CherryPy threads.
    for configmap in ["configmap.yaml", "rook/configmap.yaml"] {
        let config = config_of(&kubernetes_dir().join(configmap));
        let per_gateway = config["upstream"]["max_in_flight"].as_integer().unwrap();
        let replicas = deployment["spec"]["replicas"].as_i64().unwrap();
        assert!(
            replicas * per_gateway < 10,
            "{configmap}: {replicas} x {per_gateway}"
        );
    }
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    assert_eq!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
            ["topologyKey"],
        "kubernetes.io/hostname"
    );
    let mounts = container["volumeMounts"].as_sequence().unwrap();
    let mounted = |path: &str| mounts.iter().any(|m| m["mountPath"] == path);
    assert!(
        mounted(CONFIG_MOUNT) && mounted(SECRETS_MOUNT),
        "{mounts:?}"
    );
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "run",
            "--config",
            &format!("{CONFIG_MOUNT}/clustergate.toml")
        ]
    );

    let budget = find(
        "PodDisruptionBudget",
        "clustergate",
        &kubernetes_dir().join("poddisruptionbudget.yaml"),
    );
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"],
        deployment["spec"]["template"]["metadata"]["labels"]
    );
}

const MIB: u64 = 1024 * 1024;

/// A Kubernetes quantity of bytes ("256Mi", "1Gi", "268435456").
fn bytes_of(quantity: &str) -> u64 {
    let units = [("Ki", 1024), ("Mi", MIB), ("Gi", 1024 * MIB)];
    units
        .iter()
        .find_map(|(suffix, unit)| Some(quantity.strip_suffix(suffix)?.parse::<u64>().ok()? * unit))
        .unwrap_or_else(|| quantity.parse().unwrap())
}

/// A Kubernetes quantity of CPUs ("2", "1500m"), whole cores rounded down (at least 1).
fn cores_of(quantity: &str) -> u64 {
    let millis = match quantity.strip_suffix('m') {
        Some(m) => m.parse::<u64>().unwrap(),
        None => quantity.parse::<u64>().unwrap() * 1000,
    };
    (millis / 1000).max(1)
}

/// An integer setting of `section`, or its default (docs/configuration/).
fn setting(config: &toml::Table, section: &str, key: &str, default: u64) -> u64 {
    config
        .get(section)
        .and_then(|s| s.get(key))
        .map_or(default, |v| v.as_integer().unwrap() as u64)
}

/// What a gateway configured by `config` may hold at most, in a container limited to
/// `limit` bytes and `cores` CPUs: every bound its configuration sets, added up.
fn worst_case_memory(config: &toml::Table, limit: u64, cores: u64) -> u64 {
    // Measured (docs/benchmarks.md): 16 MB resident idle, 63 MB with 10,000 connections.
    const PROCESS: u64 = 64 * MIB;
    // The block of one argon2id password hash (users::password: 19 MiB).
    const HASH: u64 = 19 * MIB;
    // An answer read whole to take dashboard tokens out (token_redaction).
    const REDACTED_ANSWER: u64 = 4 * MIB;
    let max_body = setting(config, "upstream", "max_body_bytes", 10 * MIB);
    // server.body_budget_bytes, else derived as edge::body_budget does: a quarter of
    // the memory limit, never less than the largest body.
    let bodies = setting(
        config,
        "server",
        "body_budget_bytes",
        (limit / 4).max(max_body),
    );
    let cache_on = config
        .get("answer_cache")
        .and_then(|s| s.get("enabled"))
        .is_none_or(|v| v.as_bool().unwrap());
    let cache = if cache_on {
        setting(config, "answer_cache", "max_bytes", 64 * MIB)
    } else {
        0
    };
    let answer = setting(config, "answer_cache", "max_answer_bytes", 8 * MIB);
    let in_flight = setting(config, "upstream", "max_in_flight", 8);
    let hashes = setting(config, "auth", "max_concurrent_hashes", (cores / 2).max(1));
    // Answers read ahead of slow clients (upstream::answer_buffer): all of them together.
    let answer_buffers = setting(config, "upstream", "answer_buffers_total_bytes", 64 * MIB);
    PROCESS
        + bodies
        + cache
        + in_flight * (answer + REDACTED_ANSWER)
        + hashes * HASH
        + answer_buffers
}

/// The pod's memory limit holds everything each ConfigMap's configuration lets the gateway
/// hold at once: request bodies (`server.body_budget_bytes`), kept answers, answers in
/// flight and read ahead of slow clients, password hashes, and the process with many connections (capped per address).
/// Past it the kernel kills the gateway (issue 33: 21 open requests did, before bodies
/// had a budget).
#[test]
fn the_memory_limit_holds_the_worst_case_of_the_configured_bounds() {
    let resources = &container()["resources"];
    let limit = bytes_of(resources["limits"]["memory"].as_str().unwrap());
    let cores = cores_of(resources["limits"]["cpu"].as_str().unwrap());
    for configmap in ["configmap.yaml", "rook/configmap.yaml"] {
        let config = config_of(&kubernetes_dir().join(configmap));
        let per_address = setting(&config, "server", "max_connections_per_ip", 64);
        assert!(
            per_address > 0,
            "{configmap}: connections per address uncapped"
        );
        let worst = worst_case_memory(&config, limit, cores);
        assert!(
            worst <= limit,
            "{configmap}: the configured bounds add up to {} MiB, over the pod's limit of {} MiB",
            worst / MIB,
            limit / MIB
        );
    }
    // What the sum counts: a budget of bodies that took all memory would be seen.
    let mut unbounded = config_of(&kubernetes_dir().join("configmap.yaml"));
    unbounded["server"].as_table_mut().unwrap().insert(
        "body_budget_bytes".into(),
        toml::Value::Integer(limit as i64),
    );
    assert!(worst_case_memory(&unbounded, limit, cores) > limit);
}

/// The pod's user and group (deployment.yaml: runAsUser, runAsGroup, fsGroup).
const POD_UID: u32 = 65532;

fn running_as_root() -> bool {
    // SAFETY: geteuid takes nothing and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Lays out the pod's view: `config/clustergate.toml` and `secrets/` with a valid stand-in for
/// each key of the Secret, `secret_mode` each. As root, the files are root's in the pod's
/// group, as the kubelet writes them with the pod's fsGroup; otherwise the test user's.
fn pod_files(configmap: &Path, secret: &Path, dir: &Path, secret_mode: u32) -> PathBuf {
    let config = dir.join("config/clustergate.toml");
    let secrets = dir.join("secrets");
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::create_dir_all(&secrets).unwrap();
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(&config, config_text(configmap)).unwrap();
    let (ca, chain, key) = operator_certificate();
    let hash = String::from_utf8(cli(&["hash-password"], Some("Operat0r-Pass")).stdout).unwrap();
    let mut keys: Vec<String> = find("Secret", "clustergate-secrets", secret)["stringData"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    // Rook's own Secret, projected beside the gateway's (deployment.yaml).
    keys.push("rook-dashboard-password".to_owned());
    for name in keys {
        let content = match name.as_str() {
            "tls.crt" => chain.clone(),
            "tls.key" => key.clone(),
            "dashboard-ca.pem" => ca.clone(),
            "users.toml" => format!(
                "[[users]]\nusername = \"operator\"\npassword_hash = \"{}\"\nroles = [\"administrator\"]\n",
                hash.trim()
            ),
            "jwt-signing-key" | "redis-encryption-key" | "dashboard-accounts-key" => {
                TEST_SECRET.to_owned()
            }
            _ => "stand-in password".to_owned(),
        };
        let path = secrets.join(&name);
        fs::write(&path, content).unwrap();
        if running_as_root() {
            std::os::unix::fs::chown(&path, Some(0), Some(POD_UID)).unwrap();
        }
        fs::set_permissions(&path, fs::Permissions::from_mode(secret_mode)).unwrap();
    }
    config
}

/// `clustergate check-config` on `config`, as the pod's user when the test can be it.
fn check_config_as_the_pod(config: &Path) -> std::process::Output {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(bin());
    command.args(["check-config", "--config", config.to_str().unwrap()]);
    if running_as_root() {
        command.uid(POD_UID).gid(POD_UID);
    }
    command.output().unwrap()
}

#[test]
fn the_configuration_in_each_configmap_passes_check_config() {
    for (configmap, secret) in [
        ("configmap.yaml", "secret.yaml"),
        ("rook/configmap.yaml", "rook/secret.yaml"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        // The kubelet's mode for the Secret's files: defaultMode 0440 (deployment.yaml).
        let mode = if running_as_root() { 0o440 } else { 0o600 };
        let config = pod_files(
            &kubernetes_dir().join(configmap),
            &kubernetes_dir().join(secret),
            dir.path(),
            mode,
        );
        let out = check_config_as_the_pod(&config);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{configmap}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_secret_file_others_may_read_is_refused_in_the_pods_layout() {
    let dir = tempfile::tempdir().unwrap();
    let config = pod_files(
        &kubernetes_dir().join("configmap.yaml"),
        &kubernetes_dir().join("secret.yaml"),
        dir.path(),
        0o444,
    );
    let out = check_config_as_the_pod(&config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
}

#[test]
fn the_shipped_secrets_are_empty_so_that_nobody_runs_with_them() {
    for secret in ["secret.yaml", "rook/secret.yaml"] {
        let data = find(
            "Secret",
            "clustergate-secrets",
            &kubernetes_dir().join(secret),
        );
        for (key, value) in data["stringData"].as_mapping().unwrap() {
            assert_eq!(value.as_str(), Some(""), "{secret}: {key:?}");
        }
    }
}
