#!/usr/bin/env python3
"""Check conf/scopes/16.2.toml against a live dashboard (or anything that claims to
enforce the same rules, e.g. clustergate in front of one).

For every operation in the table it sends the request, with path parameters
filled with a dummy value (``cg-probe-nonexistent``), ``{}`` as the JSON body
of POST/PUT, and ``Accept: application/vnd.ceph.api.vX.Y+json`` with the
version the OpenAPI document lists for the operation (v1.0 when unknown):

* once without a token: expected 401 unless the table says ``public = true``,
  and then neither 401 nor 403 (public operations are only sent this way, so
  e.g. ``/api/auth/logout`` never revokes the probe's tokens);
* once per account with that account's token: expected 403 iff the
  operation's ``scope`` is not "" and the account lacks ``permission`` on it.
  The account's permissions are the ``permissions`` map the login answer
  (``POST /api/auth``) returns; when a role is given for the account they are
  also compared with that system role's definition in Ceph 16.2.

The dashboard decides 401/403 in a before-handler tool, before it looks at the
API version or the body, so 403 vs not-403 is the authorization decision even
when the handler then fails (400/404/415/500). Any other status counts as
"allowed".

SAFETY: requests really run with the accounts' rights (a pool-manager user
really reaches the pool handlers). The dummy names make them fail harmlessly,
but only point this at a throwaway cluster: the URL must be a loopback address.

Usage:
    . /tmp/ceph-dashboard/dashboard.env      # CEPH_DASH_URL, CEPH_DASH_*_USER/PASSWORD
    deploy/tools/probe_scopes.py --account poolmgr:PASSWORD:pool-manager
    deploy/tools/probe_scopes.py --url http://127.0.0.1:18080 \\
        --account viewer:PW:read-only --account poolmgr:PW:pool-manager --report out.json

With ``--pair-accounts`` (needs ``--admin USER:PASSWORD``, default the admin
of a sourced dashboard.env) it also creates, through the REST API, one role
and one user per (scope, permission) pair (every scope the dashboard lists
at ``/ui-api/scope`` times read/create/update/delete; role
``cg-probe-<scope>-<permission>`` grants exactly that pair), probes with all
of them and deletes them again. Every scoped operation is then allowed for
exactly one of those users, which pins down both its scope and its
permission (viewer/pool-manager alone cannot tell, e.g., a POST that needs
``update`` from one that needs ``create``). Each operation then really runs
once with dummy arguments, as it would for an administrator.

Accounts: every ``--account USER:PASSWORD[:ROLE]``, plus the whitespace
separated ``USER:PASSWORD[:ROLE]`` items of $CG_PROBE_ACCOUNTS, plus (unless
--no-env-accounts) the viewer (read-only) and admin (administrator) of a
sourced dashboard.env. Prints one line per mismatch and finally
``N operations, M mismatches``; exits 0 when M is 0, 1 otherwise, 2 on usage
or connection errors.
"""

import argparse
import ipaddress
import json
import os
import re
import secrets
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import tomllib  # Python >= 3.11
except ImportError:  # pragma: no cover
    import tomli as tomllib  # type: ignore

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
DEFAULT_TABLE = os.path.join(REPO, 'conf', 'scopes', '16.2.toml')
DEFAULT_OPENAPI = '/work/shared/ceph-dashboard/ceph-16.2-api-all.json'
DUMMY = 'cg-probe-nonexistent'
V1 = 'application/vnd.ceph.api.v1.0+json'
GATE_403_DETAIL = "You don't have permissions to access that resource"

ALL_SCOPES = ['cephfs', 'config-opt', 'dashboard-settings', 'grafana', 'hosts', 'iscsi',
              'log', 'manager', 'monitor', 'nfs-ganesha', 'osd', 'pool', 'prometheus',
              'rbd-image', 'rbd-mirroring', 'rgw', 'user']
CRUD = ['create', 'delete', 'read', 'update']
# System roles of Ceph 16.2 (services/access_control.py); only used to warn
# when the login answer does not match the role the caller said it has.
SYSTEM_ROLES = {
    'administrator': {s: CRUD for s in ALL_SCOPES},
    'read-only': {s: ['read'] for s in ALL_SCOPES
                  if s not in ('dashboard-settings', 'config-opt')},
    'block-manager': {'rbd-image': CRUD, 'pool': ['read'], 'iscsi': CRUD,
                      'rbd-mirroring': CRUD, 'grafana': ['read']},
    'rgw-manager': {'rgw': CRUD, 'grafana': ['read']},
    'cluster-manager': {s: CRUD for s in ('hosts', 'osd', 'monitor', 'manager',
                                          'config-opt', 'log')} | {'grafana': ['read']},
    'pool-manager': {'pool': CRUD, 'grafana': ['read']},
    'cephfs-manager': {'cephfs': CRUD, 'grafana': ['read']},
    'ganesha-manager': {'nfs-ganesha': CRUD, 'cephfs': CRUD, 'rgw': CRUD,
                        'grafana': ['read']},
}


class ProbeError(Exception):
    pass


# --------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------

def load_table(path):
    with open(path, 'rb') as fh:
        data = tomllib.load(fh)
    ops = data.get('operation', [])
    for i, op in enumerate(ops):
        for key, kind in (('method', str), ('path', str), ('scope', str),
                          ('permission', str), ('public', bool)):
            if not isinstance(op.get(key), kind):
                raise ProbeError(f'{path}: operation[{i}].{key} missing or not {kind.__name__}')
    return data.get('ceph_version', '?'), ops


def accept_versions(openapi_path):
    """(METHOD, path) -> the vendor media type the document lists for it."""
    if not openapi_path or not os.path.exists(openapi_path):
        return {}
    with open(openapi_path, encoding='utf-8') as fh:
        spec = json.load(fh)
    out = {}
    for path, item in spec.get('paths', {}).items():
        for method, op in item.items():
            types_ = []
            for code in sorted(op.get('responses', {})):
                types_ += [t for t in op['responses'][code].get('content', {})
                           if t.startswith('application/vnd.ceph.api.v')]
            if types_:
                out[(method.upper(), path)] = types_[0]
    return out


def parse_account(text):
    user, sep, rest = text.partition(':')
    if not sep or not user:
        raise ProbeError(f'bad account {text!r}: expected USER:PASSWORD[:ROLE]')
    password, role = rest, None
    head, sep, tail = rest.rpartition(':')
    if sep and tail in SYSTEM_ROLES:
        password, role = head, tail
    return {'user': user, 'password': password, 'role': role}


def collect_accounts(args):
    accounts = [parse_account(a) for a in args.account]
    accounts += [parse_account(a) for a in os.environ.get('CG_PROBE_ACCOUNTS', '').split()]
    if not args.no_env_accounts:
        for prefix, role in (('CEPH_DASH_VIEWER', 'read-only'),
                             ('CEPH_DASH_ADMIN', 'administrator')):
            user = os.environ.get(prefix + '_USER')
            password = os.environ.get(prefix + '_PASSWORD')
            if user and password and all(a['user'] != user for a in accounts):
                accounts.append({'user': user, 'password': password, 'role': role})
    return accounts


def check_loopback(url):
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise ProbeError(f'bad URL {url!r}')
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 80, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise ProbeError(f'cannot resolve {parts.hostname}: {exc}') from exc
    for info in infos:
        if not ipaddress.ip_address(info[4][0].split('%')[0]).is_loopback:
            raise ProbeError(f'{url} is not a loopback address; this probe really runs '
                             'operations and only targets throwaway local clusters')


# --------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------

class Client:
    def __init__(self, base, cacert, timeout):
        self.base = base.rstrip('/')
        self.timeout = timeout
        self.ctx = ssl.create_default_context(cafile=cacert) if cacert else None
        # never follow redirects (a standby answers 303): report them as they are
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=self.ctx) if self.ctx
            else urllib.request.HTTPSHandler(), NoRedirect())

    def send(self, method, path, accept=V1, token=None, body=None):
        headers = {'Accept': accept}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers['Content-Type'] = 'application/json'
        if token:
            headers['Authorization'] = f'Bearer {token}'
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=headers)
        start = time.monotonic()
        try:
            with self.opener.open(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            return {'status': None, 'error': str(exc), 'body': None,
                    'seconds': round(time.monotonic() - start, 3)}
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        return {'status': status, 'body': parsed, 'seconds': round(time.monotonic() - start, 3),
                'raw': raw[:300].decode('utf-8', 'replace') if parsed is None else None}

    def login(self, account):
        res = self.send('POST', '/api/auth', body={'username': account['user'],
                                                   'password': account['password']})
        if res['status'] != 201 or not isinstance(res['body'], dict) \
                or 'token' not in res['body']:
            raise ProbeError(f'login as {account["user"]} failed: {res["status"]} '
                             f'{res.get("body") or res.get("error") or res.get("raw")}')
        account['token'] = res['body']['token']
        account['permissions'] = {k: sorted(v) for k, v in
                                  (res['body'].get('permissions') or {}).items() if v}
        account['pwd_update_required'] = bool(res['body'].get('pwdUpdateRequired'))
        if account['pwd_update_required']:
            print(f'warning: {account["user"]} has pwdUpdateRequired: the dashboard '
                  'denies it everything', file=sys.stderr)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


# --------------------------------------------------------------------------
# Throwaway per-(scope, permission) accounts
# --------------------------------------------------------------------------

PAIR_PREFIX = 'cg-probe-'


def _admin_call(client, admin, method, path, body=None):
    res = client.send(method, path, token=admin['token'], body=body)
    if res['status'] == 401:
        client.login(admin)
        res = client.send(method, path, token=admin['token'], body=body)
    return res


def delete_pair_accounts(client, admin, names):
    for name in names:
        quoted = urllib.parse.quote(name, safe='')
        _admin_call(client, admin, 'DELETE', f'/api/user/{quoted}')
        _admin_call(client, admin, 'DELETE', f'/api/role/{quoted}')


def create_pair_accounts(client, admin, ops, created):
    """One role + user per (scope, permission) of the table. Appends every
    name it creates to ``created`` so the caller can clean up on failure."""
    scopes = {op['scope'] for op in ops if op['scope']}
    res = _admin_call(client, admin, 'GET', '/ui-api/scope')
    if res['status'] == 200 and isinstance(res['body'], list):
        scopes |= set(res['body'])  # every scope the dashboard knows, used or not
    pairs = sorted((scope, perm) for scope in scopes for perm in CRUD)
    accounts = []
    for scope, perm in pairs:
        name = f'{PAIR_PREFIX}{scope}-{perm}'
        delete_pair_accounts(client, admin, [name])  # leftovers of an aborted run
        created.append(name)
        res = _admin_call(client, admin, 'POST', '/api/role', {
            'name': name, 'description': 'temporary, deploy/tools/probe_scopes.py',
            'scopes_permissions': {scope: [perm]}})
        if res['status'] != 201:
            raise ProbeError(f'creating role {name}: {describe(res)}')
        password = f'Cg-{secrets.token_hex(12)}-9x'
        res = _admin_call(client, admin, 'POST', '/api/user', {
            'username': name, 'password': password, 'roles': [name], 'name': None,
            'email': None, 'enabled': True, 'pwdExpirationDate': None,
            'pwdUpdateRequired': False})
        if res['status'] != 201:
            raise ProbeError(f'creating user {name}: {describe(res)}')
        account = {'user': name, 'password': password, 'role': None}
        client.login(account)
        if account['permissions'] != {scope: [perm]}:
            raise ProbeError(f'{name}: login permissions {account["permissions"]}')
        accounts.append(account)
    return accounts


# --------------------------------------------------------------------------
# Probing
# --------------------------------------------------------------------------

def concrete(path):
    return re.sub(r'\{[^}]*\}', urllib.parse.quote(DUMMY, safe=''), path)


def predicted_denied(op, account):
    if op['public'] or not op['scope']:
        return False
    if account.get('pwd_update_required'):
        return True
    return op['permission'] not in account['permissions'].get(op['scope'], [])


def outcome(res):
    if res['status'] is None:
        return 'error'
    if res['status'] == 401:
        return '401'
    if res['status'] == 403:
        return '403'
    return 'other'


def describe(res):
    if res['status'] is None:
        return f'error {res.get("error")}'
    body = res.get('body')
    detail = body.get('detail') if isinstance(body, dict) else None
    return f'{res["status"]}' + (f' {detail!r}'[:120] if detail else '')


def probe_operation(client, op, accounts, versions, anonymous):
    """Returns a list of check dicts for one operation."""
    method, path = op['method'], op['path']
    url = concrete(path)
    accept = versions.get((method, path), V1)
    body = {} if method in ('POST', 'PUT', 'PATCH') else None
    checks = []

    if anonymous or op['public']:
        res = client.send(method, url, accept=accept, body=body)
        got = outcome(res)
        if op['public']:
            ok = got == 'other'
            expect = 'no 401/403 (public)'
        else:
            ok = got == '401'
            expect = '401 (token needed)'
        checks.append({'who': '(no token)', 'expect': expect, 'got': describe(res),
                       'ok': ok, 'result': res})
    if op['public']:
        return checks

    for account in accounts:
        res = client.send(method, url, accept=accept, token=account['token'], body=body)
        if res['status'] == 401:  # token revoked or expired under us: once more
            client.login(account)
            res = client.send(method, url, accept=accept, token=account['token'], body=body)
        denied = predicted_denied(op, account)
        got = outcome(res)
        ok = (got == '403') if denied else (got == 'other')
        note = None
        if got == '403' and isinstance(res['body'], dict) \
                and res['body'].get('detail') != GATE_403_DETAIL:
            note = '403 body is not the authorization tool\'s'
        checks.append({'who': account['user'], 'expect': '403' if denied else 'not 403',
                       'got': describe(res), 'ok': ok, 'note': note, 'result': res})
    return checks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    ap.add_argument('--url', default=os.environ.get('CEPH_DASH_URL'),
                    help='dashboard (or gateway) base URL, loopback only (default $CEPH_DASH_URL)')
    ap.add_argument('--table', default=DEFAULT_TABLE, help='default %(default)s')
    ap.add_argument('--openapi', default=os.environ.get('CG_PROBE_OPENAPI', DEFAULT_OPENAPI),
                    help='api-all.json for the Accept versions (default %(default)s)')
    ap.add_argument('--account', action='append', default=[], metavar='USER:PASSWORD[:ROLE]')
    ap.add_argument('--no-env-accounts', action='store_true',
                    help='ignore CEPH_DASH_VIEWER_*/CEPH_DASH_ADMIN_* from dashboard.env')
    ap.add_argument('--pair-accounts', action='store_true',
                    help='also probe with temporary one-(scope, permission) users (needs --admin)')
    ap.add_argument('--admin', metavar='USER:PASSWORD',
                    help='administrator for --pair-accounts (default the admin of dashboard.env)')
    ap.add_argument('--no-anonymous', action='store_true',
                    help='skip the no-token request for non-public operations')
    ap.add_argument('--cacert', default=os.environ.get('CEPH_DASH_CA_CERT') or None)
    ap.add_argument('--timeout', type=float, default=60.0, help='seconds per request')
    ap.add_argument('--only', help='regex: probe only operations whose "METHOD path" matches')
    ap.add_argument('--report', help='write every check as JSON to this file')
    ap.add_argument('--verbose', action='store_true', help='print every check')
    args = ap.parse_args()

    try:
        if not args.url:
            raise ProbeError('no --url and no $CEPH_DASH_URL')
        check_loopback(args.url)
        version, ops = load_table(args.table)
        if args.only:
            ops = [op for op in ops if re.search(args.only, f'{op["method"]} {op["path"]}')]
        versions = accept_versions(args.openapi)
        accounts = collect_accounts(args)
        if not accounts and not args.pair_accounts:
            raise ProbeError('no accounts (use --account USER:PASSWORD[:ROLE])')
        client = Client(args.url, args.cacert, args.timeout)
        for account in accounts:
            client.login(account)
            expected = SYSTEM_ROLES.get(account['role'] or '')
            if expected is not None and account['permissions'] != \
                    {k: sorted(v) for k, v in expected.items()}:
                print(f'warning: {account["user"]}: login permissions '
                      f'{account["permissions"]} differ from the {account["role"]} role of '
                      'Ceph 16.2; predictions use the login permissions', file=sys.stderr)
    except (ProbeError, OSError, ValueError) as exc:
        print(f'probe_scopes: {exc}', file=sys.stderr)
        return 2

    admin, created = None, []
    try:
        if args.pair_accounts:
            admin = pair_admin(args)
            client.login(admin)
            accounts += create_pair_accounts(client, admin, ops, created)
        return run_probe(args, client, version, ops, versions, accounts)
    except (ProbeError, OSError, ValueError) as exc:
        print(f'probe_scopes: {exc}', file=sys.stderr)
        return 2
    finally:
        if admin is not None and created:
            delete_pair_accounts(client, admin, created)


def pair_admin(args):
    if args.admin:
        user, sep, password = args.admin.partition(':')
        if not sep:
            raise ProbeError('--admin must be USER:PASSWORD')
    else:
        user = os.environ.get('CEPH_DASH_ADMIN_USER')
        password = os.environ.get('CEPH_DASH_ADMIN_PASSWORD')
        if not user or not password:
            raise ProbeError('--pair-accounts needs --admin or CEPH_DASH_ADMIN_USER/_PASSWORD')
    return {'user': user, 'password': password, 'role': 'administrator'}


def run_probe(args, client, version, ops, versions, accounts):
    print(f'probing {len(ops)} operations of {args.table} (Ceph {version}) at {args.url} '
          f'as {", ".join(a["user"] for a in accounts)}'
          f'{"" if args.no_anonymous else " and without a token"}', file=sys.stderr)
    report, mismatched_ops, mismatched_checks, requests_sent = [], 0, 0, 0
    for op in ops:
        checks = probe_operation(client, op, accounts, versions, not args.no_anonymous)
        requests_sent += len(checks)
        bad = [c for c in checks if not c['ok']]
        if bad:
            mismatched_ops += 1
            mismatched_checks += len(bad)
        for c in checks:
            line = (f'{"MISMATCH" if not c["ok"] else "ok      "} {op["method"]:6} '
                    f'{op["path"]}  [{op["scope"] or "-"}/{op["permission"] or "-"}'
                    f'{" public" if op["public"] else ""}]  {c["who"]}: expected '
                    f'{c["expect"]}, got {c["got"]}'
                    + (f'  ({c["note"]})' if c.get('note') else ''))
            if not c['ok'] or args.verbose:
                print(line)
            elif c.get('note'):
                print('note    ' + line[8:])
        report.append({'method': op['method'], 'path': op['path'], 'scope': op['scope'],
                       'permission': op['permission'], 'public': op['public'],
                       'checks': [{k: v for k, v in c.items()} for c in checks]})
    if args.report:
        with open(args.report, 'w', encoding='utf-8') as fh:
            json.dump(report, fh, indent=1, sort_keys=True)
    print(f'{len(ops)} operations, {mismatched_ops} mismatches '
          f'({mismatched_checks} of {requests_sent} checks)')
    return 1 if mismatched_ops else 0


if __name__ == '__main__':
    sys.exit(main())
