#!/usr/bin/env python3
"""Whether timing tells which usernames exist: the gateway's refusal of a wrong password
for a user imported from the dashboard (a bcrypt hash of cost 12, as `ceph dashboard
ac-user-create` makes) against its refusal of a username nobody has (checked against the
stand-in hash). The two kinds are sent interleaved, one at a time, over one kept-alive
connection to a gateway started here on 127.0.0.1 (no dashboard needed: the users file
checks passwords); the medians and their ratio are reported. Close to 1.0 is the goal; the
test suite checks only that both kinds check a password once (tests/it/credentials.rs).

  bench/refusal_timing.py [--logins 15] [--gateway target/release/clustergate]
                          [--hasher target/release/examples/bcrypt-hash] [--out FILE.json]

Build both first: cargo build --release --bin clustergate --example bcrypt-hash.
Measurement only; nothing is asserted.
"""
import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

V1 = "application/vnd.ceph.api.v1.0+json"
IMPORTED = "imported"
UNKNOWN = "nobody-by-this-name"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_owner_only(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def configure(work, hasher):
    """The gateway's files in `work`: (config path, port, metrics port)."""
    bcrypt = subprocess.run([hasher, "12"], input=b"Imp0rted-Pass", capture_output=True,
                            check=True).stdout.decode().strip()
    write_owner_only(os.path.join(work, "users.toml"),
                     f'[[users]]\nusername = "{IMPORTED}"\npassword_hash = "{bcrypt}"\n'
                     'roles = ["read-only"]\n')
    write_owner_only(os.path.join(work, "jwt-secret"), os.urandom(32).hex() + "\n")
    write_owner_only(os.path.join(work, "upstream.pass"), "unused\n")
    port, metrics, nowhere = free_port(), free_port(), free_port()
    config = os.path.join(work, "clustergate.toml")
    with open(config, "w") as f:
        f.write(f"""[server]
listen = "127.0.0.1:{port}"
tls = false
state_dir = "state"
threads = 1
[metrics]
listen = "127.0.0.1:{metrics}"
[auth]
users_file = "users.toml"
secret_file = "jwt-secret"
# every attempt is checked against a hash: no lockout, no limit per client address
lockout_attempts = 0
max_failed_logins_per_ip_per_minute = 0
[upstream]
servers = ["http://127.0.0.1:{nowhere}"]
username = "clustergate"
password_file = "upstream.pass"
""")
    return config, port, metrics


def wait_healthy(metrics_port, process, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"refusal_timing: the gateway exited ({process.returncode})")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("refusal_timing: the gateway did not become healthy")


def refusal_ms(conn, username):
    body = json.dumps({"username": username, "password": "not-the-password"})
    started = time.perf_counter()
    conn.request("POST", "/api/auth", body=body,
                 headers={"Accept": V1, "Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    took = (time.perf_counter() - started) * 1000
    if resp.status != 400:
        sys.exit(f"refusal_timing: {username}: {resp.status}, expected 400")
    return took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--logins", type=int, default=15, help="refusals of each kind")
    parser.add_argument("--gateway", default="target/release/clustergate")
    parser.add_argument("--hasher", default="target/release/examples/bcrypt-hash")
    parser.add_argument("--out", help="also write the result here (JSON)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="refusal-timing.") as work:
        config, port, metrics = configure(work, args.hasher)
        log = open(os.path.join(work, "gateway.log"), "w")
        gateway = subprocess.Popen([args.gateway, "run", "--config", config],
                                   stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_healthy(metrics, gateway)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            refusal_ms(conn, UNKNOWN)  # warm-up: the connection, the first hash
            imported, unknown = [], []
            for _ in range(args.logins):
                imported.append(refusal_ms(conn, IMPORTED))
                unknown.append(refusal_ms(conn, UNKNOWN))
            conn.close()
        finally:
            gateway.send_signal(signal.SIGTERM)
            try:
                gateway.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gateway.kill()
                gateway.wait()
    result = {
        "logins_each": args.logins,
        "imported_bcrypt_median_ms": round(statistics.median(imported), 2),
        "unknown_user_median_ms": round(statistics.median(unknown), 2),
        "ratio_unknown_to_imported": round(statistics.median(unknown) / statistics.median(imported), 3),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
