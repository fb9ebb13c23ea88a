#!/usr/bin/env python3
"""The web UI's landing page over TLS, directly from the dashboard and through the gateway
(TLS, its generated certificate; the answer cache's UI files on): Chromium's navigation
timing, median of 10 fresh-context loads each, alternating (bench/ui_polling/navigation.js).

  bench/landing_page.py --env DIR/dashboard.env [--gateway target/release/clustergate]
                        [--loads 10] [--out bench/results/X.json]

DIR is a dashboard started with TLS (20.2 serves TLS; CG_CEPH_TLS=1 for 16.2).
Measurement only; nothing is asserted.
"""
import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from manager_load import read_env, start_gateway  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_PATH = os.path.join(HERE, "..", "tests", "ui", "node_modules")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--gateway", default="target/debug/clustergate")
    ap.add_argument("--loads", type=int, default=10)
    ap.add_argument("--out")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    env = read_env(args.env)
    release = env.get("CG_CEPH_RELEASE", "16.2")
    if env.get("CG_DASH_TLS") != "1":
        raise SystemExit("a dashboard serving TLS is needed (20.2, or CG_CEPH_TLS=1)")
    work = tempfile.mkdtemp(prefix="cg-landing-page-")
    shutil.copy(env["CG_DASH_CA_CERT"], f"{work}/dashboard-ca.pem")
    repo = os.path.abspath(os.path.join(HERE, ".."))
    table = os.path.join(repo, "conf", "scopes", f"{release}.toml")
    access = f'scopes_file = "{table}"' if os.path.exists(table) else ""
    gateway, port = start_gateway(args.gateway, env, work, tls=True,
                                  upstream='ca_file = "dashboard-ca.pem"', access=access)
    try:
        sites = [env["CG_DASH_URL"], f"https://127.0.0.1:{port}"]
        node_env = {**os.environ, "NODE_PATH": os.environ.get("NODE_PATH", NODE_PATH),
                    "CG_NAV_SITES": " ".join(sites), "CG_NAV_LOADS": str(args.loads)}
        out = subprocess.run(["node", os.path.join(HERE, "ui_polling", "navigation.js")],
                             env=node_env, capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            raise SystemExit(f"navigation.js: {out.stderr[-2000:]}")
        direct, through = json.loads(out.stdout)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
    results = {"release": release, "gateway": args.gateway, "loads": args.loads,
               "direct": direct, "gateway_tls": through}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = args.out or f"bench/results/{stamp}-landing-page-{release}.json"
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    line = (f"| {release} | {direct['median_ms']} ms, {direct['median_bytes']} B | "
            f"{through['median_ms']} ms, {through['median_bytes']} B |")
    print(json.dumps(results))
    print(line)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
