#!/usr/bin/env python3
"""Helpers of bench/run.sh: tokens, free ports, parsing the load tools' output, the
10,000-connection memory probe, login timing, and the final report (JSON, SVG, markdown).

Standard library only. Every network call goes to 127.0.0.1 and is bounded in time.

    benchtool.py ports N
    benchtool.py backend-token
    benchtool.py forge SECRET_FILE TOKEN          -> JSON of forged tokens for the checks
    benchtool.py wrk FILE                         -> JSON summary of a wrk run
    benchtool.py h2load FILE [LOG]                -> JSON summary of an h2load run (+ latencies)
    benchtool.py conns PORT N PID PATH HEADER...  -> JSON: RSS of PID with N idle keep-alive connections
    benchtool.py logins PORT USER PASSWORD N      -> JSON: sequential login latencies
    benchtool.py callgrind DUMP N REPORT_TXT      -> JSON: instructions per request of a callgrind dump
    benchtool.py callgrind-summary WORKDIR        -> JSON: the counts of section 8 and clustergate's ratios to the floor and to HAProxy
    benchtool.py repeat N                         -> standard input, N times
    benchtool.py connsnap FILE NGINX_STATUS_PORT HAPROXY_SOCKET -> connection and handshake counters
    benchtool.py report WORKDIR RESULTS_DIR STAMP -> writes STAMP.json, latest.{json,svg,md}
"""

import asyncio
import base64
import hashlib
import hmac
import http.client
import json
import math
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import time

# Plain HTTP contenders (the main table and the SVG), then the same proxies terminating TLS 1.3.
PLAIN = ["direct", "nginx", "haproxy", "pingora", "pingora_nosteal", "clustergate", "clustergate_steal",
         "clustergate_redis"]
TLS = ["nginx_tls", "haproxy_tls", "clustergate_tls"]
CONTENDERS = PLAIN + TLS
LABELS = {
    "direct": "1 direct (nginx backend)",
    "nginx": "2 nginx proxy_pass, no auth",
    "haproxy": "3 HAProxy jwt_verify HS256",
    "pingora": "pingora 0.9's own proxy, no auth (floor), default runtime (work stealing)",
    "pingora_nosteal": "pingora 0.9's own proxy, no auth (floor), `work_stealing: false`",
    "clustergate": "4 clustergate (default: `server.work_stealing = false`)",
    "clustergate_steal": "4 clustergate with `server.work_stealing = true`",
    "clustergate_redis": "5 clustergate, state in Redis",
    "nginx_tls": "nginx proxy_pass, TLS 1.3 (OpenSSL)",
    "haproxy_tls": "HAProxy jwt_verify HS256, TLS 1.3 (OpenSSL)",
    "clustergate_tls": "clustergate, TLS 1.3 (rustls)",
}
SHORT = {"direct": "direct", "nginx": "nginx", "haproxy": "HAProxy", "pingora": "pingora",
         "pingora_nosteal": "pingora no-steal", "clustergate": "clustergate",
         "clustergate_steal": "clustergate steal", "clustergate_redis": "clustergate+Redis",
         "nginx_tls": "nginx TLS", "haproxy_tls": "HAProxy TLS", "clustergate_tls": "clustergate TLS"}
# the process whose CPU time counts for each contender (bench/run.sh's PROCS)
PROC_OF = {"direct": "backend", "nginx_tls": "nginx", "haproxy_tls": "haproxy"}


def out(obj):
    json.dump(obj, sys.stdout, indent=None, sort_keys=False)
    sys.stdout.write("\n")


# ------------------------------------------------------------------ tokens

def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwt_hs256(claims: dict, secret: bytes, header=None) -> str:
    header = header or {"typ": "JWT", "alg": "HS256"}
    signing = b64url(json.dumps(header, separators=(",", ":")).encode()) + "." + \
        b64url(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
    return signing + "." + b64url(sig)


def cmd_ports(n):
    """N distinct free TCP ports on 127.0.0.1 (bound to port 0, then released)."""
    socks, ports = [], []
    try:
        for _ in range(int(n)):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    print(" ".join(map(str, ports)))


def cmd_backend_token():
    """What the stand-in dashboard returns from POST /api/auth: a JWT-shaped token whose
    exp is far ahead, so the gateway never renews it during a run (its signature is not
    checked by anyone)."""
    now = int(time.time())
    claims = {"iss": "ceph-dashboard", "jti": "bench", "exp": now + 10 * 365 * 86400,
              "iat": now, "username": "clustergate"}
    print(jwt_hs256(claims, b"not-a-secret-the-backend-is-a-stand-in"))


def cmd_forge(secret_file, token):
    """Tokens each token-checking contender must refuse with 401, made from a valid one."""
    secret = open(secret_file, "rb").read().strip()
    head, payload, _sig = token.split(".")
    claims = json.loads(b64url_decode(payload))
    other = dict(claims)
    other["username"] = other["sub"] = "admin"
    expired = dict(claims)
    expired["iat"] = claims["iat"] - 7200
    expired["exp"] = claims["iat"] - 3600
    none_header = b64url(json.dumps({"typ": "JWT", "alg": "none"}, separators=(",", ":")).encode())
    out({
        "no_token": "",
        "garbage": "not.a.jwt",
        "bad_signature": jwt_hs256(claims, b"another-secret-of-at-least-32-bytes!!"),
        "tampered_payload": head + "." + b64url(json.dumps(other, separators=(",", ":")).encode()) + "." + _sig,
        "alg_none": none_header + "." + payload + ".",
        "expired": jwt_hs256(expired, secret),
    })


# ------------------------------------------------------------------ load tools' output

def percentile(sorted_values, q):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[k]


def parse_duration(text):
    m = re.match(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        return None
    v = float(m.group(1))
    return v * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]


def cmd_wrk(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    r = {"rps": None, "requests": None, "seconds": None, "non_2xx": 0, "socket_errors": 0,
         "latency_ms": {}}
    m = re.search(r"Requests/sec:\s*([\d.]+)", text)
    if m:
        r["rps"] = float(m.group(1))
    m = re.search(r"(\d+) requests in ([\d.]+\w+),", text)
    if m:
        r["requests"] = int(m.group(1))
        r["seconds"] = parse_duration(m.group(2))
    m = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
    if m:
        r["non_2xx"] = int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        r["socket_errors"] = sum(int(x) for x in m.groups())
    for q, v in re.findall(r"^\s*(50|75|90|99)%\s+([\d.]+\w+)", text, re.M):
        d = parse_duration(v)
        if d is not None:
            r["latency_ms"]["p" + q] = round(d * 1000, 3)
    out(r)


def h2load_summary(text):
    r = {"rps": None, "seconds": None, "done": None, "succeeded": None, "failed": None,
         "errored": None, "timeout": None, "status": {}}
    m = re.search(r"finished in ([\d.]+\w+), ([\d.]+) req/s", text)
    if m:
        r["seconds"] = parse_duration(m.group(1))
        r["rps"] = float(m.group(2))
    m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                  r"(\d+) failed, (\d+) errored, (\d+) timeout", text)
    if m:
        (_t, _s, r["done"], r["succeeded"], r["failed"], r["errored"], r["timeout"]) = map(int, m.groups())
    m = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    if m:
        r["status"] = dict(zip(["2xx", "3xx", "4xx", "5xx"], map(int, m.groups()), strict=True))
    # what a TLS run negotiated (h2load prints it for the first connection)
    tls = {k: v.strip() for k, v in re.findall(r"^(TLS Protocol|Cipher|Server Temp Key): (.+)$", text, re.M)}
    if tls:
        r["tls"] = tls
    return r


def read_h2load_log(path):
    """Per-request rows: start (us since epoch), status, duration (us)."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split("\t")
            if len(parts) >= 3:
                try:
                    rows.append((int(parts[0]), int(parts[1]), int(parts[2])))
                except ValueError:
                    pass
    return rows


def latency_summary(durations_us):
    d = sorted(durations_us)
    ms = lambda v: None if v is None else round(v / 1000.0, 3)  # noqa: E731
    return {
        "n": len(d),
        "p50_ms": ms(percentile(d, 0.50)),
        "p90_ms": ms(percentile(d, 0.90)),
        "p99_ms": ms(percentile(d, 0.99)),
        "p999_ms": ms(percentile(d, 0.999)),
        "max_ms": ms(d[-1]) if d else None,
        "mean_ms": round(statistics.fmean(d) / 1000.0, 3) if d else None,
    }


def cmd_h2load(path, log=None):
    r = h2load_summary(open(path, encoding="utf-8", errors="replace").read())
    if log:
        rows = read_h2load_log(log)
        ok = [d for (_s, st, d) in rows if 200 <= st < 300]
        r["logged"] = len(rows)
        r["logged_non_2xx"] = len(rows) - len(ok)
        r.update(latency_summary(ok))
        if len(rows) > 1:
            span = (max(s for s, _, _ in rows) - min(s for s, _, _ in rows)) / 1e6
            r["achieved_rps"] = round(len(rows) / span, 1) if span > 0 else None
    out(r)


# ------------------------------------------------------------------ memory with idle connections

def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024.0, 1)
    return None


def open_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


async def hold_connections(port, n, pid, path, headers, settle, deadline_s):
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n" +
               "".join(h + "\r\n" for h in headers) + "\r\n").encode()
    conns, answered, failed = [], 0, 0
    gate = asyncio.Semaphore(200)
    deadline = time.monotonic() + deadline_s

    async def one():
        nonlocal answered, failed
        async with gate:
            left = deadline - time.monotonic()
            if left <= 0:
                failed += 1
                return
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port), timeout=min(left, 10))
                conns.append(writer)
                writer.write(request)
                await writer.drain()
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=min(left, 10))
                m = re.search(rb"\r\ncontent-length:\s*(\d+)", head, re.I)
                if m:
                    await asyncio.wait_for(reader.readexactly(int(m.group(1))), timeout=10)
                if head.startswith(b"HTTP/1.1 200"):
                    answered += 1
                else:
                    failed += 1
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
                failed += 1

    t0 = time.monotonic()
    await asyncio.gather(*(one() for _ in range(n)))
    opened_s = time.monotonic() - t0
    await asyncio.sleep(settle)
    # every connection still open? a closed one reads EOF at once
    result = {"requested": n, "answered": answered, "failed": failed,
              "open_client_side": sum(1 for w in conns if not w.is_closing()),
              "server_fds": open_fds(pid), "rss_mb": rss_mb(pid),
              "seconds_to_open": round(opened_s, 2)}
    for w in conns:
        w.close()
    await asyncio.sleep(0.5)
    return result


def cmd_conns(port, n, pid, path, *headers):
    n = int(n)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1000), hard))
    out(asyncio.run(hold_connections(int(port), n, int(pid), path, list(headers),
                                     settle=2.0, deadline_s=90.0)))


# ------------------------------------------------------------------ logins

def cmd_logins(port, user, password, n):
    body = json.dumps({"username": user, "password": password})
    headers = {"Accept": "application/vnd.ceph.api.v1.0+json", "Content-Type": "application/json"}
    times, statuses = [], []
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    for _ in range(int(n)):
        t0 = time.perf_counter()
        conn.request("POST", "/api/auth", body=body, headers=headers)
        resp = conn.getresponse()
        resp.read()
        times.append((time.perf_counter() - t0) * 1000)
        statuses.append(resp.status)
    conn.close()
    t = sorted(times)
    out({"n": len(t), "median_ms": round(statistics.median(t), 2), "min_ms": round(t[0], 2),
         "p90_ms": round(percentile(t, 0.9), 2), "max_ms": round(t[-1], 2),
         "all_201": all(s == 201 for s in statuses)})



# ------------------------------------------------------------------ per-run records

def cpu_busy(before, after):
    """Busy share of each core between two copies of /proc/stat's cpuN lines."""
    def read(path):
        d = {}
        for line in open(path):
            f = line.split()
            vals = list(map(int, f[1:]))
            idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
            d[f[0]] = (sum(vals[:8]), idle)
        return d
    a, b = read(before), read(after)
    res = {}
    for k in b:
        if k in a:
            tot = b[k][0] - a[k][0]
            idle = b[k][1] - a[k][1]
            res[k] = round(1 - idle / tot, 3) if tot > 0 else None
    return res


def children_cpu_seconds(path):
    """bash `times`: the second line is the children's user and system time."""
    lines = open(path).read().split("\n")
    total = 0.0
    for part in lines[1].split():
        m = re.match(r"(\d+)m([\d.]+)s", part)
        if m:
            total += int(m.group(1)) * 60 + float(m.group(2))
    return total



def proc_ticks(pid):
    """utime + stime of a process (all its threads), in clock ticks; 0 if gone."""
    try:
        st = open(f"/proc/{pid}/stat").read()
    except OSError:
        return 0
    f = st[st.rindex(")") + 2:].split()
    return int(f[11]) + int(f[12])


def children_of(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            if int(st[st.rindex(")") + 2:].split()[1]) == int(pid):
                kids.append(int(d))
    return kids


def cmd_procsnap(path, *name_pids):
    """CPU ticks used so far by each named server (the pid and its children, e.g. nginx's
    workers), written to PATH as JSON."""
    snap = {}
    for np in name_pids:
        name, pid = np.split("=", 1)
        snap[name] = sum(proc_ticks(p) for p in [int(pid)] + children_of(pid))
    with open(path, "w") as f:
        json.dump(snap, f)


def cmd_repeat(n):
    """Standard input, N times (curl's config of the handshake runs: one URL per request)."""
    sys.stdout.write(sys.stdin.read() * int(n))


def cmd_connsnap(path, nginx_status_port, haproxy_socket):
    """Counters of connections and TLS handshakes, written to PATH as JSON: nginx's accepted
    connections (stub_status), HAProxy's TLS connections and session reuse (`show info`), and
    the host's passive TCP opens (every accepted connection, of any process)."""
    snap = {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", int(nginx_status_port), timeout=5)
        conn.request("GET", "/")
        m = re.search(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s*$", conn.getresponse().read().decode(), re.M)
        conn.close()
        if m:
            snap["nginx_accepted"] = int(m.group(1))
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(5)
            sock.connect(haproxy_socket)
            sock.sendall(b"show info\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        info = dict(line.split(": ", 1) for line in data.decode().splitlines() if ": " in line)
        snap["haproxy_tls_connections"] = int(info["CumSslConns"])
        snap["haproxy_tls_rate"] = int(info["SslRate"])
        snap["haproxy_full_handshake_rate"] = int(info["SslFrontendKeyRate"])
    except (OSError, KeyError, ValueError):
        pass
    lines = [line.split() for line in open("/proc/net/snmp") if line.startswith("Tcp:")]
    if len(lines) == 2:
        snap["tcp_passive_opens"] = int(lines[1][lines[0].index("PassiveOpens")])
    with open(path, "w") as f:
        json.dump(snap, f)


def cmd_record(runs, *kvs):
    a = dict(kv.split("=", 1) for kv in kvs)
    row = {"phase": a["phase"], "contender": a["contender"], "round": int(a["round"])}
    secs = float(a.get("seconds", 0)) or None
    if "wrk" in a:
        import io
        import contextlib
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            cmd_wrk(a["wrk"])
        w = json.loads(buf.getvalue())
        row.update({"tool": "wrk", "rps": w["rps"], "requests": w["requests"], "non_2xx": w["non_2xx"],
                    "socket_errors": w["socket_errors"], "wrk_latency_ms": w["latency_ms"]})
    if "h2load" in a:
        h = h2load_summary(open(a["h2load"], encoding="utf-8", errors="replace").read())
        row.update({"tool": "h2load", "rps": h["rps"], "done": h["done"], "status": h["status"],
                    "non_2xx": sum(v for k, v in h["status"].items() if k != "2xx") if h["status"] else None,
                    "errored": h["errored"], "timeout": h["timeout"]})
        if h.get("tls"):
            row["tls"] = h["tls"]
    if "curl_codes" in a:
        codes = [line.strip() for line in open(a["curl_codes"], errors="replace") if re.fullmatch(r"\d{3}\s*", line)]
        row.update({"tool": "curl", "requests": len(codes), "non_2xx": sum(not c.startswith("2") for c in codes),
                    "rps": round(len(codes) / secs, 1) if secs else None})
    if "log" in a:
        rows = read_h2load_log(a["log"])
        ok = [d for (_s, st, d) in rows if 200 <= st < 300]
        row["log"] = a["log"]
        row["non_2xx"] = len(rows) - len(ok)
        row.update(latency_summary(ok))
        if len(rows) > 1:
            starts = [s for s, _, _ in rows]
            span = (max(starts) - min(starts)) / 1e6
            row["achieved_rps"] = round(len(rows) / span, 1) if span > 0 else None
    if "cpu_before" in a:
        busy = cpu_busy(a["cpu_before"], a["cpu_after"])
        row["cpu0_busy"] = busy.get("cpu0")
        row["cpu1_busy"] = busy.get("cpu1")
    if "procs_before" in a:
        hz = os.sysconf("SC_CLK_TCK")
        b0, b1 = json.load(open(a["procs_before"])), json.load(open(a["procs_after"]))
        used = {k: (b1[k] - b0.get(k, 0)) / hz for k in b1}
        n = row.get("requests") or row.get("done") or row.get("n")
        row["server_cpu_s"] = {k: round(v, 2) for k, v in used.items()}
        if n:
            # CPU of the measured contender's own processes per request: robust on a busy
            # machine, where other processes take turns on the same core
            row["cpu_us_per_request"] = {k: round(v * 1e6 / n, 2) for k, v in used.items()}
    if "conns_before" in a:
        c0, c1 = json.load(open(a["conns_before"])), json.load(open(a["conns_after"]))
        row["connections"] = {k: c1[k] - c0[k] for k in c1 if k in c0 and not k.endswith("_rate")}
        mid = json.load(open(a["conns_mid"])) if "conns_mid" in a else {}
        row["connections"].update({k + "_mid_run": v for k, v in mid.items() if k.endswith("_rate")})
    if "times_before" in a and secs:
        row["loader_cpu"] = round((children_cpu_seconds(a["times_after"]) -
                                   children_cpu_seconds(a["times_before"])) / secs, 3)
    with open(runs, "a") as f:
        f.write(json.dumps(row) + "\n")


def cmd_annotate_flood(runs, flood_out):
    """Adds the login flood's own figures to the last record (the run it overlapped)."""
    lines = [line for line in open(runs).read().split("\n") if line.strip()]
    last = json.loads(lines[-1])
    h = h2load_summary(open(flood_out, encoding="utf-8", errors="replace").read())
    last["logins_rps"] = h["rps"]
    last["logins_status"] = h["status"]
    last["logins_done"] = h["done"]
    lines[-1] = json.dumps(last)
    with open(runs, "w") as f:
        f.write("\n".join(lines) + "\n")


def tool_version(cmd, pattern=None):
    import subprocess
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        text = (p.stdout + "\n" + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    if pattern:
        m = re.search(pattern, text)
        return m.group(0).strip() if m else None
    return text.split("\n")[0].strip() if text else None


def cmd_meta():
    e = os.environ
    root = e["B_ROOT"]
    cpu = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    ncpu = os.cpu_count()
    kernel = os.uname().release
    commit = tool_version(["git", "-C", root, "rev-parse", "HEAD"]) or "unknown"
    dirty = bool(tool_version(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"]))
    srv, load = e.get("B_SERVER_CPUS", ""), e.get("B_LOAD_CPUS", "")
    loadavg = open("/proc/loadavg").read().split()[:3]
    meta = {
        "date": e["B_DATE"],
        "machine": f"{cpu}, {ncpu} cores, {mem_kb / 1048576:.0f} GiB, Linux {kernel}",
        "machine_details": {"cpu": cpu, "cores": ncpu, "memory_gib": round(mem_kb / 1048576, 1),
                            "kernel": kernel, "hostname": os.uname().nodename},
        "git_commit": commit + ("-dirty" if dirty else ""),
        "loadavg_start": " ".join(loadavg),
        "note": e.get("B_NOTE") or None,
        "pinning": {
            "servers": f"core {srv}" if srv else "not pinned",
            "load": f"core {load}" if load else "not pinned",
            "how": "taskset -c: the nginx backend, the nginx proxy, HAProxy, the pingora floor, clustergate (and the "
                   "Ceph mon and mgr) on the server cores; wrk, h2load and the probes on the load cores"
                   if srv else "fewer than 2 cores: nothing pinned",
            "server_threads": {"nginx_workers": 1, "haproxy_nbthread": 1,
                               "clustergate_threads": int(e["B_CG_THREADS"]),
                               "pingora_floor_threads": int(e["B_CG_THREADS"])},
        },
        "settings": {
            "quick": e["B_QUICK"] == "1",
            "rounds": int(e["B_ROUNDS"]), "saturation_seconds": int(e["B_SAT_S"]),
            "rate": int(e["B_RATE"]), "rate_seconds": int(e["B_RATE_S"]),
            "connections": int(e["B_CONNS"]),
            "check_seconds": int(e["B_CHECK_S"]), "check_rounds": int(e["B_CHECK_ROUNDS"]),
            "check_connections": int(e["B_CHECK_CONNS"]),
            "flood_seconds": int(e["B_FLOOD_S"]), "flood_rounds": int(e["B_FLOOD_ROUNDS"]),
            "flood_clients": int(e["B_FLOOD_CLIENTS"]), "logins": int(e["B_LOGINS"]),
            "idle_connections": int(e["B_IDLE_CONNS"]),
            "clustergate_rust_log": e["B_CG_LOG"],
            "tls_key": {"rsa": "RSA 2048", "ec": "ECDSA P-256"}.get(e.get("B_TLS_KEY"), e.get("B_TLS_KEY")),
            "request": "GET /api/health/minimal with Authorization: Bearer <gateway token> and "
                       "Accept: application/vnd.ceph.api.v1.0+json, to every contender",
            "saturation_tool": "wrk -t1 --latency (median of the rounds)",
            "latency_tool": "h2load --h1 --rps (constant rate per connection; 1 s warm-up; "
                            "percentiles over every request of every round)",
        },
        "tools": {
            "wrk": tool_version(["wrk", "-v"], r"wrk \S+"),
            "h2load": tool_version(["h2load", "--version"], r"nghttp2/\S+"),
            "nginx": tool_version([e["B_NGINX"], "-v"], r"nginx/\S+"),
            "haproxy": tool_version([e["B_HAPROXY"], "-v"], r"HAProxy version \S+"),
            "clustergate": tool_version([e["B_CG"], "--version"]),
            "rustc": tool_version(["rustc", "--version"]),
            "python": tool_version([sys.executable, "--version"]),
            "ceph": tool_version(["ceph", "--version"], r"ceph version \S+"),
            "perf": tool_version(["perf", "--version"]),
            "curl": tool_version(["curl", "--version"], r"curl \S+"),
        },
    }
    out(meta)


def cmd_perf_summary(self_txt, children_txt):
    """The top entries of perf report's self and children views."""
    def top(path, n):
        rows = []
        if not os.path.exists(path):
            return rows
        for line in open(path, errors="replace"):
            m = re.match(r"\s+([\d.]+)%\s+(?:([\d.]+)%\s+)?\[[.k]\]\s+(.*)", line)
            if m:
                sym = re.sub(r"(\s+-)+\s*$", "", m.group(3)).strip()
                rows.append({"percent": float(m.group(1)), "symbol": sym[:160]})
            if len(rows) >= n:
                break
        return rows
    out({"self": top(self_txt, 25), "children": top(children_txt, 25),
         "files": [os.path.basename(self_txt), os.path.basename(children_txt)]})

def cmd_callgrind(dump, requests, report_txt):
    """Instructions per request from a callgrind dump of N requests, with the gateway's
    own functions that cost the most (inclusive); callgrind_annotate's view kept as text."""
    n = int(requests)
    text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=99.5", "--show=Ir",
                           dump], capture_output=True, text=True, check=True).stdout
    with open(report_txt, "w") as f:   # the costliest functions; the whole view is megabytes
        f.write("\n".join(text.splitlines()[:300]) + "\n")
    total, own = None, []
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)", line)
        if not m:
            continue
        count = int(m.group(1).replace(",", ""))
        what = m.group(2)
        if what.startswith("PROGRAM TOTALS"):
            total = count
        elif "clustergate::" in what and len(own) < 15:
            symbol = re.sub(r" \[/.*\]$", "", what.split(":", 1)[-1] if ".rs:" in what else what)[:160]
            # an async fn shows once per nesting of its state machine: keep the largest
            if all(o["symbol"] != symbol for o in own):
                own.append({"symbol": symbol, "per_request": round(count / n)})
    out({"requests": n, "instructions_per_request": round(total / n) if total else None,
         "simulated_per_request": simulated_events(dump, n),
         "top_own_inclusive": own, "file": os.path.basename(report_txt)})


# valgrind's simulated first-level caches and branch predictor (--cache-sim, --branch-sim):
# the events that tell instructions that wait from instructions that run
SIMULATED = {"I1mr": "I1 misses", "D1mr": "D1 read misses", "D1mw": "D1 write misses",
             "Dw": "data writes", "Bcm": "conditional branches mispredicted",
             "Bim": "indirect branches mispredicted"}


def simulated_events(dump, n):
    """The simulated events of a dump's `summary:` line, per request."""
    names, totals = [], []
    with open(dump) as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:"):
                totals = [int(v) for v in line.split()[1:]]
    counts = dict(zip(names, totals, strict=True))
    return {event: round(counts[event] / n) for event in SIMULATED if event in counts}


CALLGRIND_LABELS = ("floor", "proxied", "proxied_logged", "check", "proxied_key", "haproxy")


def callgrind_summary(extra):
    """Instructions per request of each count, and the proxied ones over the floor's."""
    counts = {label: (extra.get(f"callgrind_{label}") or {}).get("instructions_per_request")
              for label in CALLGRIND_LABELS}
    floor = counts.get("floor")
    ratios = {f"{label}_vs_floor": round(counts[label] / floor, 3)
              for label in ("proxied", "proxied_logged", "proxied_key") if counts.get(label) and floor}
    haproxy = counts.get("haproxy")
    ratios.update({f"{label}_vs_haproxy": round(counts[label] / haproxy, 3)
                   for label in ("proxied", "floor") if counts.get(label) and haproxy})
    return {"instructions_per_request": counts, "ratios": ratios}


def cmd_callgrind_summary(workdir):
    extra = {}
    for label in CALLGRIND_LABELS:
        path = os.path.join(workdir, "extra", f"callgrind_{label}.json")
        if os.path.exists(path):
            with open(path) as f:
                extra[f"callgrind_{label}"] = json.load(f)
    out(callgrind_summary(extra))


# ------------------------------------------------------------------ report

def load_jsonl(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def rnd(v, nd=3):
    return None if v is None else round(v, nd)


def ratio(a, b, nd=3):
    if a is None or b is None or b == 0:
        return None
    return round(a / b, nd)


def wrk_phase(runs, phase, contenders):
    """Per contender, over the rounds of a wrk phase: median req/s, every round's req/s, the
    rounds' details, and the median CPU µs per request of its own processes and the backend."""
    rps, rounds, detail, cpu_req, cpu_backend = {}, {}, {}, {}, {}
    for c in contenders:
        mine = [r for r in runs if r["phase"] == phase and r["contender"] == c]
        vals = [r["rps"] for r in mine if r.get("rps")]
        rounds[c] = vals
        rps[c] = round(statistics.median(vals), 1) if vals else None
        detail[c] = [{k: r.get(k) for k in ("round", "rps", "requests", "non_2xx", "socket_errors",
                                            "loader_cpu", "cpu0_busy", "cpu1_busy", "server_cpu_s",
                                            "cpu_us_per_request", "connections") if k in r}
                     for r in mine]
        for into, proc in ((cpu_req, PROC_OF.get(c, c)), (cpu_backend, "backend")):
            xs = [r["cpu_us_per_request"].get(proc) for r in mine if r.get("cpu_us_per_request")]
            xs = [x for x in xs if x is not None]
            into[c] = round(statistics.median(xs), 2) if xs else None
    return rps, rounds, detail, cpu_req, cpu_backend


def handshake_check(detail):
    """Connections the servers counted per request in the handshake runs: 1.0 when every
    request opened its own connection (a little more: the connections open at the end)."""
    counter = {"nginx_tls": "nginx_accepted", "haproxy_tls": "haproxy_tls_connections",
               "clustergate_tls": "tcp_passive_opens"}
    outp = {}
    for c, rows in detail.items():
        per = []
        for r in rows:
            n, conns = r.get("requests"), (r.get("connections") or {}).get(counter[c])
            row = {"round": r["round"], "requests": n, "counter": counter[c], "counted": conns,
                   "per_request": ratio(conns, n)}
            if c == "haproxy_tls":
                # full handshakes (keys computed) ÷ TLS connections, per second, mid-run
                mid = r.get("connections") or {}
                row["haproxy_full_handshakes_per_connection"] = ratio(
                    mid.get("haproxy_full_handshake_rate_mid_run"), mid.get("haproxy_tls_rate_mid_run"))
            per.append(row)
        outp[c] = per
    return outp


def cmd_report(workdir, resdir, stamp):
    meta = json.load(open(os.path.join(workdir, "meta.json")))
    runs = load_jsonl(os.path.join(workdir, "runs.jsonl"))
    extra = {}
    xdir = os.path.join(workdir, "extra")
    for name in sorted(os.listdir(xdir)) if os.path.isdir(xdir) else []:
        if name.endswith(".json"):
            try:
                extra[name[:-5]] = json.load(open(os.path.join(xdir, name)))
            except ValueError:
                extra.setdefault("errors", []).append(f"unreadable {name}")
    extra["correctness"] = load_jsonl(os.path.join(workdir, "checks.jsonl"))
    errs = os.path.join(workdir, "errors.txt")
    if os.path.exists(errs):
        extra.setdefault("errors", []).extend(line.strip() for line in open(errs) if line.strip())

    rps, rps_rounds, sat_detail, cpu_req, cpu_req_backend = wrk_phase(runs, "saturation", CONTENDERS)
    hs_rps, hs_rounds, hs_detail, hs_cpu, _ = wrk_phase(runs, "handshake", TLS)
    # fixed rate: every request of every round, pooled
    lat, lat_rounds = {}, {}
    for c in CONTENDERS:
        durs = []
        per = []
        for r in runs:
            if r["phase"] == "rate" and r["contender"] == c:
                rows = read_h2load_log(r["log"])
                d = [x for (_s, st, x) in rows if 200 <= st < 300]
                durs.extend(d)
                s = latency_summary(d)
                s.update({"round": r["round"], "non_2xx": len(rows) - len(d),
                          "achieved_rps": r.get("achieved_rps"), "cpu0_busy": r.get("cpu0_busy")})
                per.append(s)
        lat[c] = latency_summary(durs)
        lat_rounds[c] = per

    def pick(key):
        return {c: lat[c].get(key) for c in CONTENDERS}

    p50, p99, p999 = pick("p50_ms"), pick("p99_ms"), pick("p999_ms")
    proxies = CONTENDERS[1:]
    negotiated = {c: next((r["tls"] for r in runs if r["contender"] == c and r.get("tls")), None) for c in TLS}

    def added(m):
        return {c: rnd(None if m[c] is None or m["direct"] is None else m[c] - m["direct"]) for c in proxies}

    # token check
    chk = {}
    for who in ("clustergate", "ceph"):
        vals = [r["rps"] for r in runs if r["phase"] == "check" and r["contender"] == who and r.get("rps")]
        chk[who] = round(statistics.median(vals), 1) if vals else None
    # login flood
    def pooled(phase):
        durs = []
        for r in runs:
            if r["phase"] == phase:
                durs.extend(x for (_s, st, x) in read_h2load_log(r["log"]) if 200 <= st < 300)
        return latency_summary(durs)
    base, flood = pooled("flood_base"), pooled("flood")
    flood_logins = [r.get("logins_rps") for r in runs if r["phase"] == "flood" and r.get("logins_rps")]

    res = {
        "date": meta["date"],
        "machine": meta["machine"],
        "git_commit": meta["git_commit"],
        "rps": rps,
        "p99_ms": p99,
        "ratios": {
            "clustergate_vs_haproxy_rps": ratio(rps["clustergate"], rps["haproxy"]),
            "clustergate_vs_nginx_rps": ratio(rps["clustergate"], rps["nginx"]),
            # the floor with the same runtime as clustergate's default
            "clustergate_vs_pingora_rps": ratio(rps["clustergate"], rps["pingora_nosteal"]),
            "redis_vs_memory_rps": ratio(rps["clustergate_redis"], rps["clustergate"]),
            "check_vs_ceph_rps": ratio(chk["clustergate"], chk["ceph"], 1),
            "login_flood_p99": ratio(flood["p99_ms"], base["p99_ms"]),
        },
        "p99_added_ms": added(p99),
        "login_ms": (extra.get("login") or {}).get("median_ms"),
        "login_redis_ms": (extra.get("login_redis") or {}).get("median_ms"),
        "rss_idle_mb": extra.get("rss_idle_mb"),
        "rss_10k_conns_mb": (extra.get("conns") or {}).get("rss_mb"),
        # ---- beyond the keys the issue asks for
        "p50_ms": p50,
        "p999_ms": p999,
        "p50_added_ms": added(p50),
        "p999_added_ms": added(p999),
        "rps_vs_direct": {c: ratio(rps[c], rps["direct"]) for c in proxies},
        "p50_vs_direct": {c: ratio(p50[c], p50["direct"]) for c in proxies},
        "p99_vs_direct": {c: ratio(p99[c], p99["direct"]) for c in proxies},
        "p999_vs_direct": {c: ratio(p999[c], p999["direct"]) for c in proxies},
        "clustergate_vs": {
            "nginx": {"rps": ratio(rps["clustergate"], rps["nginx"]),
                      "p99_added_ms_difference": rnd(None if p99["clustergate"] is None or p99["nginx"] is None
                                                      else p99["clustergate"] - p99["nginx"])},
            "haproxy": {"rps": ratio(rps["clustergate"], rps["haproxy"]),
                        "p99_added_ms_difference": rnd(None if p99["clustergate"] is None or p99["haproxy"] is None
                                                        else p99["clustergate"] - p99["haproxy"])},
        },
        "cpu_us_per_request": cpu_req,
        "backend_cpu_us_per_request": cpu_req_backend,
        "cpu_ratios": {
            "clustergate_vs_haproxy": ratio(cpu_req["clustergate"], cpu_req["haproxy"]),
            "clustergate_vs_nginx": ratio(cpu_req["clustergate"], cpu_req["nginx"]),
            "clustergate_vs_pingora": ratio(cpu_req["clustergate"], cpu_req["pingora_nosteal"]),
            "pingora_vs_haproxy": ratio(cpu_req["pingora"], cpu_req["haproxy"]),
            "pingora_vs_nginx": ratio(cpu_req["pingora"], cpu_req["nginx"]),
            "pingora_nosteal_vs_haproxy": ratio(cpu_req["pingora_nosteal"], cpu_req["haproxy"]),
            "pingora_nosteal_vs_nginx": ratio(cpu_req["pingora_nosteal"], cpu_req["nginx"]),
        },
        # pingora's runtime both ways, for its own proxy and for clustergate (same threads)
        "work_stealing": {
            "clustergate_default": False,
            "threads": meta["pinning"]["server_threads"]["clustergate_threads"],
            "rps": {"pingora_steal": rps["pingora"], "pingora_nosteal": rps["pingora_nosteal"],
                    "clustergate_steal": rps["clustergate_steal"], "clustergate_nosteal": rps["clustergate"]},
            "cpu_us_per_request": {"pingora_steal": cpu_req["pingora"], "pingora_nosteal": cpu_req["pingora_nosteal"],
                                   "clustergate_steal": cpu_req["clustergate_steal"],
                                   "clustergate_nosteal": cpu_req["clustergate"]},
            "p99_ms": {"pingora_steal": p99["pingora"], "pingora_nosteal": p99["pingora_nosteal"],
                       "clustergate_steal": p99["clustergate_steal"], "clustergate_nosteal": p99["clustergate"]},
            "nosteal_vs_steal": {
                "pingora_rps": ratio(rps["pingora_nosteal"], rps["pingora"]),
                "pingora_cpu_per_request": ratio(cpu_req["pingora_nosteal"], cpu_req["pingora"]),
                "clustergate_rps": ratio(rps["clustergate"], rps["clustergate_steal"]),
                "clustergate_cpu_per_request": ratio(cpu_req["clustergate"], cpu_req["clustergate_steal"]),
            },
            "vs_haproxy_rps": {"pingora_steal": ratio(rps["pingora"], rps["haproxy"]),
                               "pingora_nosteal": ratio(rps["pingora_nosteal"], rps["haproxy"]),
                               "clustergate_steal": ratio(rps["clustergate_steal"], rps["haproxy"]),
                               "clustergate_nosteal": ratio(rps["clustergate"], rps["haproxy"])},
        },
        # TLS 1.3 terminated by each proxy (plain HTTP to the same backend)
        "tls": {
            "rps": {c: rps[c] for c in TLS},
            "cpu_us_per_request": {c: cpu_req[c] for c in TLS},
            "p50_ms": {c: p50[c] for c in TLS},
            "p99_ms": {c: p99[c] for c in TLS},
            "p999_ms": {c: p999[c] for c in TLS},
            "handshake_rps": hs_rps,
            "handshake_cpu_us_per_request": hs_cpu,
            "ratios": {
                "clustergate_vs_haproxy_rps": ratio(rps["clustergate_tls"], rps["haproxy_tls"]),
                "clustergate_vs_nginx_rps": ratio(rps["clustergate_tls"], rps["nginx_tls"]),
                "clustergate_vs_haproxy_handshake_rps": ratio(hs_rps["clustergate_tls"], hs_rps["haproxy_tls"]),
                "clustergate_vs_nginx_handshake_rps": ratio(hs_rps["clustergate_tls"], hs_rps["nginx_tls"]),
                "clustergate_vs_haproxy_cpu_per_request": ratio(cpu_req["clustergate_tls"], cpu_req["haproxy_tls"]),
                "clustergate_vs_nginx_cpu_per_request": ratio(cpu_req["clustergate_tls"], cpu_req["nginx_tls"]),
                "clustergate_vs_haproxy_handshake_cpu": ratio(hs_cpu["clustergate_tls"], hs_cpu["haproxy_tls"]),
                "clustergate_vs_nginx_handshake_cpu": ratio(hs_cpu["clustergate_tls"], hs_cpu["nginx_tls"]),
                "clustergate_vs_haproxy_p99": ratio(p99["clustergate_tls"], p99["haproxy_tls"]),
                "clustergate_vs_nginx_p99": ratio(p99["clustergate_tls"], p99["nginx_tls"]),
            },
            "negotiated": negotiated,
            "handshake_rounds": hs_rounds,
            "handshake_runs": hs_detail,
            "new_connection_per_request": handshake_check(hs_detail),
            "certificate": f"one self-signed {meta['settings'].get('tls_key')} certificate per run, for "
                           "127.0.0.1, served by all three",
            "handshake_tool": "curl --no-sessionid --parallel (as many transfers at a time as the other runs' "
                              "connections) with Connection: close: a new connection and a full handshake "
                              "(no session resumed) for every request",
        },
        "rate_share_of_saturation": {c: ratio(meta["settings"]["rate"], rps[c]) for c in CONTENDERS},
        "rps_rounds": rps_rounds,
        "saturation_runs": sat_detail,
        "latency_at_fixed_rate": lat,
        "latency_rounds": lat_rounds,
        "check_rps": chk,
        "check_runs": [{k: r.get(k) for k in ("contender", "round", "rps", "non_2xx")}
                       for r in runs if r["phase"] == "check"],
        "login": extra.get("login"),
        "login_flood": {"p99_base_ms": base["p99_ms"], "p99_flood_ms": flood["p99_ms"],
                        "p50_base_ms": base["p50_ms"], "p50_flood_ms": flood["p50_ms"],
                        "requests_base": base["n"], "requests_flood": flood["n"],
                        "wrong_password_logins_per_s": rnd(statistics.median(flood_logins), 1) if flood_logins else None},
        "memory": {"rss_idle_mb": extra.get("rss_idle_mb"),
                   "rss_before_first_login_mb": extra.get("rss_start_mb"),
                   "connections": extra.get("conns"),
                   "rss_after_load_mb": extra.get("rss_after_load_mb")},
        "correctness": extra.get("correctness"),
        "profile": extra.get("profile"),
        "instructions_per_request": callgrind_summary(extra)["instructions_per_request"],
        "instructions_ratios": callgrind_summary(extra)["ratios"],
        "callgrind": {label: extra.get(f"callgrind_{label}") for label in CALLGRIND_LABELS},
        "settings": meta["settings"],
        "pinning": meta["pinning"],
        "tools": meta["tools"],
        "machine_details": meta["machine_details"],
        "load_average": {"start": meta.get("loadavg_start"), "end": extra.get("loadavg_end")},
        "busy_machine_note": meta.get("note"),
        "errors": extra.get("errors", []),
        "duration_s": extra.get("duration_s"),
        "build_s": extra.get("build_s"),
    }
    warnings = []
    for r in runs:
        what = f"{r['phase']} {r['contender']} round {r['round']}"
        if r.get("non_2xx"):
            # Its req/s, CPU and latency would be those of refusals (a 503 of the dashboard's
            # places costs a fraction of a forwarded request), not of forwarding.
            res["errors"].append(f"{what}: {r['non_2xx']} answers were not 2xx: its figures "
                                 "measure refusals, not forwarding")
        if r.get("socket_errors"):
            warnings.append(f"{what}: {r['socket_errors']} socket errors")
        if r["phase"] in ("rate", "flood_base", "flood") and r.get("achieved_rps") and \
                r["achieved_rps"] < 0.95 * meta["settings"]["rate"]:
            warnings.append(f"{what}: reached {r['achieved_rps']} req/s of {meta['settings']['rate']}")
    conns = extra.get("conns") or {}
    if conns and conns.get("answered") != conns.get("requested"):
        warnings.append(f"idle connections: {conns.get('answered')} of {conns.get('requested')} answered")
    if conns.get("rss_mb") is not None and extra.get("rss_idle_mb") is not None and conns.get("requested"):
        conns["kb_per_connection"] = round((conns["rss_mb"] - extra["rss_idle_mb"]) * 1024 / conns["requested"], 1)
    res["warnings"] = warnings
    res["targets"] = targets(res)
    os.makedirs(resdir, exist_ok=True)
    # A quick run checks the suite: it is kept as STAMP-quick.json and never becomes
    # latest.* (what the README shows).
    quick = res["settings"]["quick"]
    base = f"{stamp}-quick" if quick else stamp
    text = json.dumps(res, indent=2) + "\n"
    for name in [f"{base}.json"] + ([] if quick else ["latest.json"]):
        with open(os.path.join(resdir, name + ".tmp"), "w") as f:
            f.write(text)
        os.replace(os.path.join(resdir, name + ".tmp"), os.path.join(resdir, name))
    if not quick:
        with open(os.path.join(resdir, "latest.svg"), "w") as f:
            f.write(svg(res))
    with open(os.path.join(resdir, f"{base}.md" if quick else "latest.md"), "w") as f:
        f.write(markdown(res))
    out({"json": os.path.join(resdir, f"{base}.json"), "ratios": res["ratios"],
         "rps": rps, "p99_ms": p99, "p99_added_ms": res["p99_added_ms"], "login_ms": res["login_ms"],
         "rss_idle_mb": res["rss_idle_mb"], "rss_10k_conns_mb": res["rss_10k_conns_mb"],
         "errors": res["errors"], "warnings": res["warnings"]})


def targets(res):
    """The issue's targets, as met (true), missed (false) or not measured (null)."""
    def ge(a, b):
        return None if a is None or b is None else a >= b

    def lt(a, b):
        return None if a is None or b is None else a < b
    r, a = res["ratios"], res["p99_added_ms"]
    return {
        "rps_at_least_haproxy": ge(r["clustergate_vs_haproxy_rps"], 1.0),
        "tls_rps_at_least_haproxy": ge(res["tls"]["ratios"]["clustergate_vs_haproxy_rps"], 1.0),
        "tls_handshake_rps_at_least_haproxy": ge(res["tls"]["ratios"]["clustergate_vs_haproxy_handshake_rps"], 1.0),
        "rps_at_least_0.9x_nginx": ge(r["clustergate_vs_nginx_rps"], 0.9),
        "p99_added_below_nginx_and_haproxy": None if None in (a["clustergate"], a["nginx"], a["haproxy"])
        else a["clustergate"] < min(a["nginx"], a["haproxy"]),
        "p99_added_below_0.5ms": lt(a["clustergate"], 0.5),
        "check_at_least_50x_ceph": ge(r["check_vs_ceph_rps"], 50),
        "login_below_50ms": lt(res["login_ms"], 50),
        "login_flood_p99_below_2x": lt(r["login_flood_p99"], 2),
        "rss_idle_below_30mb": lt(res["rss_idle_mb"], 30),
        "rss_10k_conns_below_120mb": lt(res["rss_10k_conns_mb"], 120),
    }


def fmt(v, nd=2):
    if v is None:
        return "–"
    if isinstance(v, float) and v >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def markdown(res):
    s = res["settings"]
    L = []
    L.append(f"Benchmark of {res['date']} on {res['machine']}, commit `{res['git_commit'][:12]}`"
             f"{' (QUICK mode: short runs)' if s.get('quick') else ''}. "
             f"Servers pinned to {res['pinning']['servers']}, load generators to {res['pinning']['load']}; "
             f"{s['rounds']} interleaved rounds; saturation with wrk, {s['connections']} connections, "
             f"{s['saturation_seconds']} s per run; latency with h2load at {s['rate']:,} req/s, "
             f"{s['rate_seconds']} s per run.")
    if res.get("busy_machine_note"):
        L.append("")
        L.append(f"_{res['busy_machine_note']}_")
    if res["errors"]:
        L += ["", "**This run is in error; its figures cannot be compared:**", ""]
        L += [f"- {e}" for e in res["errors"]]
    L.append("")
    L.append("| contender | req/s (saturation) | × direct | CPU µs/request | p50 ms | p99 ms | p99.9 ms | p99 added ms |")
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in PLAIN:
        L.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            LABELS[c], fmt(res["rps"][c], 0), "1.00" if c == "direct" else fmt(res["rps_vs_direct"][c]),
            fmt(res["cpu_us_per_request"][c], 1),
            fmt(res["p50_ms"][c], 3), fmt(res["p99_ms"][c], 3), fmt(res["p999_ms"][c], 3),
            "–" if c == "direct" else fmt(res["p99_added_ms"][c], 3)))
    L.append("")
    L.append("CPU µs/request: CPU time of the contender's own processes (the backend's excluded, "
             "except for direct) per request at saturation; unlike req/s it hardly moves when other "
             "processes share the core.")
    busy = [c for c in PLAIN if (res["rate_share_of_saturation"].get(c) or 0) > 0.5]
    if busy:
        L.append("")
        L.append("Note: the fixed rate is more than half of the saturation throughput of " +
                 ", ".join(f"{SHORT[c]} ({res['rate_share_of_saturation'][c]:.0%})" for c in busy) +
                 " on this run, so their latency includes queueing.")
    r = res["ratios"]
    lf = res["login_flood"]
    L.append("")
    L.append("| measure | value |")
    L.append("| --- | ---: |")
    L.append(f"| clustergate req/s ÷ HAProxy | {fmt(r['clustergate_vs_haproxy_rps'])} |")
    L.append(f"| clustergate req/s ÷ nginx | {fmt(r['clustergate_vs_nginx_rps'])} |")
    L.append(f"| clustergate CPU per request ÷ HAProxy / ÷ nginx | {fmt(res['cpu_ratios']['clustergate_vs_haproxy'])} / "
             f"{fmt(res['cpu_ratios']['clustergate_vs_nginx'])} |")
    L.append(f"| pingora floor CPU per request ÷ HAProxy / ÷ nginx | {fmt(res['cpu_ratios']['pingora_vs_haproxy'])} / "
             f"{fmt(res['cpu_ratios']['pingora_vs_nginx'])} |")
    L.append(f"| clustergate ÷ pingora floor (both without work stealing): req/s / CPU per request | "
             f"{fmt(r['clustergate_vs_pingora_rps'])} / {fmt(res['cpu_ratios']['clustergate_vs_pingora'])} |")
    L.append(f"| `POST /api/auth/check` req/s: clustergate / Ceph dashboard | "
             f"{fmt(res['check_rps']['clustergate'], 0)} / {fmt(res['check_rps']['ceph'], 0)} "
             f"= {fmt(r['check_vs_ceph_rps'], 1)}× |")
    L.append(f"| clustergate with its state in Redis ÷ in memory: req/s | {fmt(r['redis_vs_memory_rps'])} |")
    L.append(f"| one login (argon2id, median of {(res.get('login') or {}).get('n', '–')}) | {fmt(res['login_ms'])} ms |")
    L.append(f"| one login with the state in Redis (median) | {fmt(res.get('login_redis_ms'))} ms |")
    L.append(f"| proxied p99 during a wrong-password login flood (50 clients) ÷ without | "
             f"{fmt(lf['p99_flood_ms'], 3)} / {fmt(lf['p99_base_ms'], 3)} ms = {fmt(r['login_flood_p99'])}× |")
    mem = res.get("memory") or {}
    L.append(f"| resident memory idle (after a login and a few requests) | {fmt(res['rss_idle_mb'], 1)} MB |")
    L.append(f"| resident memory idle, before the first login | {fmt(mem.get('rss_before_first_login_mb'), 1)} MB |")
    conns = mem.get("connections") or {}
    L.append(f"| resident memory with {conns.get('requested', 10000):,} idle keep-alive connections | "
             f"{fmt(res['rss_10k_conns_mb'], 1)} MB ({fmt(conns.get('kb_per_connection'), 1)} KB each) |")
    L.append(f"| resident memory at the end of the run | {fmt(mem.get('rss_after_load_mb'), 1)} MB |")
    ipr = res.get("instructions_per_request") or {}
    L.append(f"| clustergate instructions per request (callgrind, user space): proxied with a login's token / "
             f"with an API key / token check | "
             f"{fmt(ipr.get('proxied'), 0)} / {fmt(ipr.get('proxied_key'), 0)} / {fmt(ipr.get('check'), 0)} |")
    ratios = res.get("instructions_ratios") or {}
    L.append(f"| instructions per proxied request: pingora floor; clustergate over it, access log off / on | "
             f"{fmt(ipr.get('floor'), 0)}; {fmt(ratios.get('proxied_vs_floor'), 2)}x / "
             f"{fmt(ratios.get('proxied_logged_vs_floor'), 2)}x |")
    L.append(f"| instructions per proxied request: HAProxy with `jwt_verify`; the floor / clustergate over it | "
             f"{fmt(ipr.get('haproxy'), 0)}; {fmt(ratios.get('floor_vs_haproxy'), 2)}x / "
             f"{fmt(ratios.get('proxied_vs_haproxy'), 2)}x |")
    L += markdown_simulated(res)
    L += markdown_work_stealing(res) + markdown_tls(res)
    if not s.get("quick"):
        L.append("")
        L.append("![throughput and p99](latest.svg)")
    L.append("")
    return "\n".join(L) + "\n"


def markdown_simulated(res):
    """Per proxied request, what valgrind's simulated caches and predictor saw of each server."""
    runs = {label: (res.get("callgrind") or {}).get(label) or {} for label in ("haproxy", "floor", "proxied")}
    sims = {label: run.get("simulated_per_request") or {} for label, run in runs.items()}
    if not any(sims.values()):
        return []
    L = ["", "Per proxied request under callgrind, valgrind's simulated caches and branch predictor "
         "(the same 3,000 requests; events that make an instruction wait):", "",
         "| per proxied request | HAProxy `jwt_verify` | pingora floor | clustergate |",
         "| --- | ---: | ---: | ---: |",
         "| instructions | " + " | ".join(fmt(runs[label].get("instructions_per_request"), 0)
                                          for label in sims) + " |"]
    for event, what in SIMULATED.items():
        L.append(f"| {what} | " + " | ".join(fmt(sims[label].get(event), 0) for label in sims) + " |")
    return L


def markdown_work_stealing(res):
    ws = res["work_stealing"]
    n = ws["nosteal_vs_steal"]
    L = ["", f"pingora's runtime, {ws['threads']} thread(s): work stealing (tokio's multi-threaded runtime, "
         "pingora's default) or not (one single-threaded runtime per thread; clustergate's default, "
         "`server.work_stealing = false`).", "",
         "| | req/s, steal | req/s, no steal | no steal ÷ steal: req/s | CPU µs/request, steal | "
         "CPU µs/request, no steal | no steal ÷ steal: CPU/request |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for who, label in (("pingora", "pingora floor"), ("clustergate", "clustergate")):
        L.append(f"| {label} | {fmt(ws['rps'][who + '_steal'], 0)} | {fmt(ws['rps'][who + '_nosteal'], 0)} | "
                 f"{fmt(n[who + '_rps'])} | {fmt(ws['cpu_us_per_request'][who + '_steal'], 1)} | "
                 f"{fmt(ws['cpu_us_per_request'][who + '_nosteal'], 1)} | {fmt(n[who + '_cpu_per_request'])} |")
    return L


def markdown_tls(res):
    t = res["tls"]
    r = t["ratios"]
    neg = "; ".join(f"{SHORT[c].split()[0]} {v.get('TLS Protocol')} {v.get('Cipher')} {v.get('Server Temp Key')}"
                    for c, v in t["negotiated"].items() if v)
    L = ["", f"TLS 1.3 terminated by the proxy (the same certificate, {res['settings'].get('tls_key', 'ECDSA P-256')}; "
         "plain HTTP to the same backend"
         + (f"; negotiated with h2load: {neg}" if neg else "") + "). Keep-alive: as above. Handshakes: `curl --no-sessionid --parallel` with `Connection: close`, a new "
         "connection and a full handshake (no resumption) per request.", "",
         "| contender | req/s keep-alive | CPU µs/request | p50 ms | p99 ms | p99.9 ms | "
         "req/s, a handshake each | CPU µs/handshake+request |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in TLS:
        L.append(f"| {LABELS[c]} | {fmt(t['rps'][c], 0)} | {fmt(t['cpu_us_per_request'][c], 1)} | "
                 f"{fmt(t['p50_ms'][c], 3)} | {fmt(t['p99_ms'][c], 3)} | {fmt(t['p999_ms'][c], 3)} | "
                 f"{fmt(t['handshake_rps'][c], 0)} | {fmt(t['handshake_cpu_us_per_request'][c], 1)} |")
    L += ["", "| TLS: clustergate ÷ | HAProxy | nginx |", "| --- | ---: | ---: |",
          f"| req/s, keep-alive | {fmt(r['clustergate_vs_haproxy_rps'])} | {fmt(r['clustergate_vs_nginx_rps'])} |",
          f"| CPU per request, keep-alive | {fmt(r['clustergate_vs_haproxy_cpu_per_request'])} | "
          f"{fmt(r['clustergate_vs_nginx_cpu_per_request'])} |",
          f"| p99 at {res['settings']['rate']:,} req/s | {fmt(r['clustergate_vs_haproxy_p99'])} | "
          f"{fmt(r['clustergate_vs_nginx_p99'])} |",
          f"| req/s, a handshake each | {fmt(r['clustergate_vs_haproxy_handshake_rps'])} | "
          f"{fmt(r['clustergate_vs_nginx_handshake_rps'])} |",
          f"| CPU per handshake+request | {fmt(r['clustergate_vs_haproxy_handshake_cpu'])} | "
          f"{fmt(r['clustergate_vs_nginx_handshake_cpu'])} |"]
    bound = [SHORT[c] for c, rows in t["handshake_runs"].items()
             if any((x.get("loader_cpu") or 0) >= 0.9 for x in rows)]
    if bound:
        L += ["", "Note: in the handshake runs of " + ", ".join(bound) + " curl used 90% or more of its core: "
              "there the client, not the server, set the rate; compare their CPU per handshake."]
    return L


def esc(t):
    return str(t).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def nice_max(v):
    if not v or v <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * e >= v * 1.05:
            return m * e
    return 10 * e


def svg(res):
    W, H = 960, 440
    colors = {"direct": "#8c8c8c", "nginx": "#4c78a8", "haproxy": "#f58518", "pingora": "#b279a2",
              "pingora_nosteal": "#8e4b7f", "clustergate": "#54a24b", "clustergate_steal": "#9bd08f",
              "clustergate_redis": "#2e7d32"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
             'font-family="DejaVu Sans, Arial, sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>']
    s = res["settings"]
    parts.append(f'<text x="{W/2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
                 f'clustergate vs nginx and HAProxy on 127.0.0.1 ({esc(res["date"][:10])})</text>')
    parts.append(f'<text x="{W/2}" y="40" text-anchor="middle" fill="#555">{esc(res["machine"])}; servers on '
                 f'{esc(res["pinning"]["servers"])}, load on {esc(res["pinning"]["load"])}; commit '
                 f'{esc(res["git_commit"][:10])}{"; QUICK run" if s.get("quick") else ""}</text>')

    def panel(x0, title, values, unit, series=None):
        # values: {contender: number} or, with series, {contender: {series: number}}
        px, py, pw, ph = x0 + 60, 80, 370, 280
        parts.append(f'<text x="{x0 + 60 + pw/2}" y="66" text-anchor="middle" font-size="13" '
                     f'font-weight="bold">{esc(title)}</text>')
        allv = []
        for c in PLAIN:
            v = values.get(c)
            if isinstance(v, dict):
                allv += [x for x in v.values() if x is not None]
            elif v is not None:
                allv.append(v)
        top = nice_max(max(allv) if allv else 1)
        for i in range(6):
            val = top * i / 5
            y = py + ph - ph * i / 5
            parts.append(f'<line x1="{px}" y1="{y:.1f}" x2="{px+pw}" y2="{y:.1f}" stroke="#e5e5e5"/>')
            label = f"{val:,.0f}" if top >= 50 else f"{val:.2f}"
            parts.append(f'<text x="{px-6}" y="{y+4:.1f}" text-anchor="end" fill="#555">{label}</text>')
        parts.append(f'<text x="{x0+14}" y="{py+ph/2}" transform="rotate(-90 {x0+14} {py+ph/2})" '
                     f'text-anchor="middle" fill="#555">{esc(unit)}</text>')
        slot = pw / len(PLAIN)
        for i, c in enumerate(PLAIN):
            cx = px + slot * i
            v = values.get(c)
            if series:
                bw = slot * 0.8 / len(series)
                for j, (sk, shade) in enumerate(series):
                    sv = (v or {}).get(sk)
                    if sv is None:
                        continue
                    h = ph * sv / top
                    x = cx + slot * 0.1 + bw * j
                    parts.append(f'<rect x="{x:.1f}" y="{py+ph-h:.1f}" width="{bw-2:.1f}" height="{h:.1f}" '
                                 f'fill="{colors[c]}" fill-opacity="{shade}"/>')
                    parts.append(f'<text x="{x+bw/2-1:.1f}" y="{py+ph-h-4:.1f}" text-anchor="middle" '
                                 f'font-size="9">{sv:.2f}</text>')
            elif v is not None:
                h = ph * v / top
                x = cx + slot * 0.2
                parts.append(f'<rect x="{x:.1f}" y="{py+ph-h:.1f}" width="{slot*0.6:.1f}" height="{h:.1f}" '
                             f'fill="{colors[c]}"/>')
                parts.append(f'<text x="{cx+slot/2:.1f}" y="{py+ph-h-5:.1f}" text-anchor="middle">{v:,.0f}</text>')
            parts.append(f'<text x="{cx+slot/2:.1f}" y="{py+ph+18}" text-anchor="middle">{esc(SHORT[c])}</text>')
        parts.append(f'<line x1="{px}" y1="{py+ph}" x2="{px+pw}" y2="{py+ph}" stroke="#333"/>')

    panel(0, f"Throughput at saturation ({s['connections']} connections)", res["rps"], "requests per second")
    lat = {c: {"p50": res["p50_ms"][c], "p99": res["p99_ms"][c]} for c in PLAIN}
    panel(480, f"Latency at a fixed {s['rate']:,} req/s", lat, "milliseconds",
          series=[("p50", 0.45), ("p99", 1.0)])
    parts.append(f'<text x="{480+60+185}" y="{H-22}" text-anchor="middle" fill="#555">bars per contender: '
                 'p50 (light), p99 (dark); p99.9 in latest.md</text>')
    parts.append(f'<text x="{60+185}" y="{H-22}" text-anchor="middle" fill="#555">median of '
                 f'{s["rounds"]} interleaved runs of {s["saturation_seconds"]} s</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv):
    cmds = {
        "ports": cmd_ports, "backend-token": cmd_backend_token, "forge": cmd_forge,
        "wrk": cmd_wrk, "h2load": cmd_h2load, "conns": cmd_conns, "logins": cmd_logins,
        "report": cmd_report, "record": cmd_record, "annotate-flood": cmd_annotate_flood,
        "meta": cmd_meta, "perf-summary": cmd_perf_summary, "procsnap": cmd_procsnap,
        "callgrind": cmd_callgrind, "connsnap": cmd_connsnap, "repeat": cmd_repeat,
        "callgrind-summary": cmd_callgrind_summary,
    }
    if len(argv) < 2 or argv[1] not in cmds:
        sys.stderr.write(__doc__)
        return 2
    cmds[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
