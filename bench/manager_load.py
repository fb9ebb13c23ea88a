#!/usr/bin/env python3
"""How much work N open browser tabs make the active ceph-mgr do, directly and through the
gateway (with its answer cache): the bench of "Protecting the manager" (docs/protecting-the-manager.md).

Each tab replays what the web UI's landing page polls (bench/results/ui-polling-*.md):
/api/summary, the health call and /api/prometheus/notifications?from=last every 5 s and
/api/feature_toggles every 30 s, each tab starting at a random moment of the first period,
on its own kept-alive connection, as one of the logged-in users of --roles in turn (a user
per role; directly, real dashboard accounts of those roles that the bench makes and removes
again; through the gateway, users-file users that the dashboard sees as the accounts the
gateway manages for their roles). For N in --tabs, first directly
against the dashboard, then through the gateway, it measures over --seconds (after a 10 s
warm-up) the ceph-mgr process's CPU seconds (utime + stime of /proc/PID/stat; the pid
deploy/ceph-dev recorded) per minute, with an idle baseline. Through the gateway it also
reports the staleness of the answers: from the gateway's access log, the age of each
answer served without asking the dashboard (its time minus the start of the last request
of the same path that did ask). A dashboard serving TLS (20.2) is asked over TLS directly,
and by the gateway (plain HTTP to the gateway) with its CA; releases other than 16.2 get
their scope table (conf/scopes/<release>.toml).

  bench/manager_load.py --env DIR/dashboard.env [--tabs 10,50,200] [--seconds 60]
                        [--roles administrator,read-only,pool-manager]
                        [--gateway target/release/clustergate] [--out bench/results/X.json]

Measurement only; nothing is asserted.
"""
import argparse
import bisect
import datetime
import http.client
import json
import os
import random
import re
import shutil
import signal
import ssl
import socket
import subprocess
import sys
import tempfile
import threading
import time

V1 = "application/vnd.ceph.api.v1.0+json"
PERIOD = 5.0
# What each open tab polls (path, every seconds); the health call is the release's own.
POLLS_16 = [("/api/summary", PERIOD), ("/api/health/minimal", PERIOD),
            ("/api/prometheus/notifications?from=last", PERIOD), ("/api/feature_toggles", 30.0)]
POLLS_20 = [("/api/summary", PERIOD), ("/api/health/snapshot", PERIOD),
            ("/api/multi-cluster/get_config", PERIOD),
            ("/api/prometheus/notifications?from=last", PERIOD), ("/api/feature_toggles", 30.0)]
PASSWORD = "Bench-Manager-Load-1"


def bench_user(role):
    return f"bench-{role}"


def read_env(path):
    env = {}
    for line in open(path):
        if "=" in line and not line.startswith("#"):
            key, value = line.rstrip("\n").split("=", 1)
            env[key] = value
    return env


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return ticks / os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(host, port, tls):
    """A connection to the dashboard (TLS: its own certificate, not checked) or the gateway."""
    if tls:
        return http.client.HTTPSConnection(host, port, timeout=30,
                                           context=ssl._create_unverified_context())
    return http.client.HTTPConnection(host, port, timeout=30)


def login(host, port, username, password, tls=False):
    conn = connect(host, port, tls)
    body = json.dumps({"username": username, "password": password})
    conn.request("POST", "/api/auth", body, {"Accept": V1, "Content-Type": "application/json"})
    reply = conn.getresponse()
    data = reply.read()
    if reply.status != 201:
        raise SystemExit(f"login at {host}:{port}: {reply.status} {data[:200]!r}")
    return json.loads(data)["token"]


class Tab(threading.Thread):
    """One open tab: its polls, due in turn, on one kept-alive connection."""

    def __init__(self, host, port, token, polls, stop, stats, tls):
        super().__init__(daemon=True)
        self.target = (host, port, tls)
        self.headers = {"Accept": V1, "Authorization": f"Bearer {token}",
                        "Accept-Encoding": "gzip, deflate, br"}
        offset = random.uniform(0, PERIOD)
        self.due = [[time.monotonic() + offset, path, every] for path, every in polls]
        self.stop, self.stats = stop, stats

    def run(self):
        conn = connect(*self.target)
        while not self.stop.is_set():
            poll = min(self.due, key=lambda d: d[0])
            wait = poll[0] - time.monotonic()
            if wait > 0 and self.stop.wait(wait):
                break
            poll[0] += poll[2]
            started = time.monotonic()
            try:
                conn.request("GET", poll[1], headers=self.headers)
                reply = conn.getresponse()
                reply.read()
                status = reply.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = connect(*self.target)
                status = 0
            self.stats.append((status, time.monotonic() - started))


def replay(host, port, tokens, polls, tabs, seconds, pid, tls=False):
    stop, stats = threading.Event(), []
    threads = [Tab(host, port, tokens[i % len(tokens)], polls, stop, stats, tls) for i in range(tabs)]
    for t in threads:
        t.start()
    time.sleep(10)  # every tab started and past its first round
    del stats[:]
    cpu0, t0, wall0 = cpu_seconds(pid), time.monotonic(), time.time()
    time.sleep(seconds)
    cpu1, t1, wall1 = cpu_seconds(pid), time.monotonic(), time.time()
    measured = list(stats)
    stop.set()
    for t in threads:
        t.join(timeout=35)
    latencies = sorted(s[1] for s in measured)
    return {
        "window": (wall0, wall1),
        "mgr_cpu_s_per_min": round((cpu1 - cpu0) * 60 / (t1 - t0), 3),
        "requests": len(measured),
        "not_ok": sum(1 for s in measured if s[0] != 200),
        "latency_p50_ms": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
        "latency_p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 1) if latencies else None,
    }


def dashboard_account(host, port, tls, admin_token, method, role):
    """Makes (POST) or removes (DELETE) the dashboard's own account of `role` for the direct
    runs, with the administrator's token."""
    name = bench_user(role)
    conn = connect(host, port, tls)
    headers = {"Accept": V1, "Content-Type": "application/json",
               "Authorization": f"Bearer {admin_token}"}
    if method == "POST":
        body = json.dumps({"username": name, "password": PASSWORD, "roles": [role],
                           "enabled": True, "pwdUpdateRequired": False})
        conn.request("POST", "/api/user", body, headers)
    else:
        conn.request("DELETE", f"/api/user/{name}", headers=headers)
    reply = conn.getresponse()
    data = reply.read()
    if reply.status not in (200, 201, 204) and not (method == "DELETE" and reply.status == 404):
        raise SystemExit(f"{method} dashboard account {name}: {reply.status} {data[:200]!r}")


def idle(pid, seconds):
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return round((cpu_seconds(pid) - cpu0) * 60 / (time.monotonic() - t0), 3)


ACCESS = re.compile(r'^(\S+) .*clustergate::access: method=GET path="([^"]+)".* status=(\d+) backend="([^"]*)" micros=(\d+)')


def staleness(log_path, window):
    """Ages (s) of the answers the gateway served without the dashboard within `window`:
    each from the start of the latest request of its path that asked the dashboard and
    started before it was logged (a request that waited for another is often logged before
    the one it waited for)."""
    asked, kept = {}, []
    for line in open(log_path, errors="replace"):
        m = ACCESS.match(line)
        if not m:
            continue
        at = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        path, backend, micros = m.group(2), m.group(4), int(m.group(5))
        if backend:
            asked.setdefault(path, []).append(at - micros / 1e6)
        elif window[0] <= at <= window[1]:
            kept.append((path, at))
    ages = []
    for path, at in kept:
        starts = sorted(asked.get(path, []))
        i = bisect.bisect_right(starts, at)
        if i:
            ages.append(at - starts[i - 1])
    ages.sort()
    if not ages:
        return {"answers_kept": 0}
    return {"answers_kept": len(ages), "age_p50_ms": round(1000 * ages[len(ages) // 2]),
            "age_p99_ms": round(1000 * ages[int(len(ages) * 0.99)]), "age_max_ms": round(1000 * ages[-1])}


def start_gateway(binary, env, work, roles, tls=False, upstream="", access=""):
    """The gateway in `work`, forwarding to `env`'s dashboard, a user of each of `roles`:
    (process, port)."""
    port, metrics = free_port(), free_port()
    hashed = subprocess.run([binary, "hash-password"], input=PASSWORD.encode(),
                            capture_output=True, check=True).stdout.decode().strip()
    with open(f"{work}/users.toml", "w") as f:
        for role in roles:
            f.write(f'[[users]]\nusername = "{bench_user(role)}"\npassword_hash = "{hashed}"\n'
                    f'roles = ["{role}"]\n')
    shutil.copy(env["CG_SERVICE_PASSWORD_FILE"], f"{work}/upstream.pass")
    os.chmod(f"{work}/upstream.pass", 0o600)
    servers = ", ".join(f'"{u}"' for u in env["CG_DASH_URLS"].split())
    with open(f"{work}/clustergate.toml", "w") as f:
        f.write(f'[server]\nlisten = "127.0.0.1:{port}"\ntls = {str(tls).lower()}\nstate_dir = "state"\n\n'
                f'[metrics]\nlisten = "127.0.0.1:{metrics}"\n\n'
                f'[auth]\nusers_file = "users.toml"\n\n'
                f'[upstream]\nservers = [{servers}]\nusername = "{env["CG_SERVICE_USER"]}"\n'
                f'password_file = "upstream.pass"\n{upstream}\n\n[access]\n{access}\n')
    log = open(f"{work}/gateway.log", "w")
    proc = subprocess.Popen([binary, "run", "--config", f"{work}/clustergate.toml"],
                            stdout=log, stderr=log, env={**os.environ, "RUST_LOG": "info"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", metrics, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                return proc, port
        except OSError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the gateway did not get ready: {open(f'{work}/gateway.log').read()[-2000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--tabs", default="10,50,200")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--roles", default="administrator,read-only,pool-manager")
    ap.add_argument("--gateway", default="target/debug/clustergate")
    ap.add_argument("--out")
    args = ap.parse_args()
    # Stopped early, it still stops the gateway it started (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    env = read_env(args.env)
    pid = int(env["CG_MGR_X_PID"])
    release = env.get("CG_CEPH_RELEASE", "16.2")
    polls = POLLS_20 if release.startswith("20") else POLLS_16
    dash = re.match(r"(https?)://([^:/]+):(\d+)", env["CG_DASH_URL"])
    tls, host, port = dash.group(1) == "https", dash.group(2), int(dash.group(3))
    work = tempfile.mkdtemp(prefix="cg-manager-load-")
    upstream, access = "", ""
    if tls:
        shutil.copy(env["CG_DASH_CA_CERT"], f"{work}/dashboard-ca.pem")
        upstream = 'ca_file = "dashboard-ca.pem"'
    scopes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conf",
                          "scopes", f"{release}.toml")
    if release != "16.2" and os.path.exists(scopes):
        access = f'scopes_file = "{os.path.abspath(scopes)}"'
    roles = args.roles.split(",")
    gateway, gw_port = start_gateway(args.gateway, env, work, roles, upstream=upstream, access=access)
    results = {"release": release, "seconds": args.seconds, "polls": polls, "roles": roles,
               "gateway": args.gateway, "runs": []}
    admin = login(host, port, env["CG_ADMIN_USER"], env["CG_ADMIN_PASSWORD"], tls)
    try:
        direct_tokens = []
        for role in roles:
            dashboard_account(host, port, tls, admin, "DELETE", role)  # left by a stopped run
            dashboard_account(host, port, tls, admin, "POST", role)
            direct_tokens.append(login(host, port, bench_user(role), PASSWORD, tls))
        gw_tokens = [login("127.0.0.1", gw_port, bench_user(role), PASSWORD) for role in roles]
        results["idle_mgr_cpu_s_per_min"] = idle(pid, min(args.seconds, 30))
        print(f"idle: {results['idle_mgr_cpu_s_per_min']} mgr CPU s/min", flush=True)
        for tabs in [int(t) for t in args.tabs.split(",")]:
            direct = replay(host, port, direct_tokens, polls, tabs, args.seconds, pid, tls)
            through = replay("127.0.0.1", gw_port, gw_tokens, polls, tabs, args.seconds, pid)
            through.update(staleness(f"{work}/gateway.log", through["window"]))
            ratio = through["mgr_cpu_s_per_min"] / direct["mgr_cpu_s_per_min"]
            base = results["idle_mgr_cpu_s_per_min"]
            above = (through["mgr_cpu_s_per_min"] - base) / max(direct["mgr_cpu_s_per_min"] - base, 1e-9)
            run = {"tabs": tabs, "direct": direct, "gateway": through, "ratio": round(ratio, 3),
                   "ratio_above_idle": round(above, 3)}
            results["runs"].append(run)
            print(json.dumps(run), flush=True)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
        for role in roles:
            dashboard_account(host, port, tls, admin, "DELETE", role)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or f"bench/results/{stamp}-manager-load-{release}.json"
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    with open(out.replace(".json", ".md"), "w") as f:
        f.write(table(results))
    print(table(results))


def table(results):
    lines = [f"ceph-mgr CPU of N open tabs (Ceph {results['release']}, users of "
             f"{', '.join(results.get('roles', ['administrator']))} in turn, {results['seconds']:.0f} s each; "
             f"idle {results['idle_mgr_cpu_s_per_min']} s/min)", "",
             "| tabs | requests/min | mgr CPU s/min direct | through the gateway | ratio | "
             "ratio above idle | answers kept | age p50 / p99 / max (ms) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for run in results["runs"]:
        d, g = run["direct"], run["gateway"]
        per_min = round(g["requests"] * 60 / results["seconds"])
        ages = f"{g.get('age_p50_ms', '-')} / {g.get('age_p99_ms', '-')} / {g.get('age_max_ms', '-')}"
        lines.append(f"| {run['tabs']} | {per_min} | {d['mgr_cpu_s_per_min']} | {g['mgr_cpu_s_per_min']} | "
                     f"{run['ratio']} | {run['ratio_above_idle']} | {g.get('answers_kept', 0)} of "
                     f"{g['requests']} | {ages} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
