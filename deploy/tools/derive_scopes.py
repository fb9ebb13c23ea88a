#!/usr/bin/env python3
"""Derive conf/scopes/16.2.toml: the security scope and permission the Ceph dashboard
itself requires for every operation of its REST API.

How it works (and why it is trustworthy):

The dashboard decides 401/403 in ``AuthManagerTool._check_authorization``
(services/auth.py), a CherryPy ``before_handler`` tool:

* the tool only runs when the merged CherryPy config of the controller (and the
  handler) has ``tools.authenticate.on`` true (``Router(..., secure=...)``);
  otherwise the endpoint is public (no token needed);
* ``scope = getattr(controller_instance, '_security_scope')``; if it is empty any
  valid token is enough;
* ``perms = getattr(handler, '_security_permissions')``; if a scope is set and
  ``perms`` is empty every user gets 403; otherwise the user needs *all* of
  ``perms`` on ``scope``.

``_security_permissions`` is built at import and route-generation time from the
``@Read/Create/Update/DeletePermission`` decorators and, for RESTController
methods (list/create/get/set/delete/bulk_set/bulk_delete/singleton_set,
``@RESTController.Collection``/``Resource``), from ``_permission_map``
(GET->read, POST->create, PUT->update, DELETE->delete) when no decorator is
present. A plain ``@Endpoint`` without a decorator gets nothing. Inheritance,
``setattr`` of the wrapped handler on the class, and controllers that are
routed only because they inherit ``_routed`` (e.g. ``RBDPool(Pool)``) all
matter, so instead of re-implementing those rules this script imports the
dashboard's own Python package (with the ``ceph_module`` C extension stubbed
and the ``mgr`` proxy pointed at a mock), lets the dashboard build its real
CherryPy/Routes mapper with ``Router.generate_routes('')``, and then, for every
operation of the OpenAPI document (``/docs/api-all.json``), dispatches a
concrete URL through that mapper exactly like CherryPy's RoutesDispatcher does
and reads scope, permissions and ``tools.authenticate.on`` from the handler
that would really run. It cross-checks the result against the docs view
(``ENDPOINT_MAP``, what the OpenAPI is generated from) and against the
``security`` field of the JSON, and fails on any disagreement it cannot
explain.

Nothing is contacted over the network; the ``mgr`` object is a mock, so no
handler code runs.

Usage (needs a Python that can import the dashboard: cherrypy, routes, jwt,
bcrypt, rados, rbd, cephfs, ceph_argparse; on Debian 12 that is
/usr/bin/python3 with ceph-mgr-dashboard installed; the script re-executes
itself with /usr/bin/python3 when the current interpreter lacks cherrypy):

    deploy/tools/derive_scopes.py                      # writes conf/scopes/16.2.toml
    deploy/tools/derive_scopes.py --check              # exit 1 if it is stale
    deploy/tools/derive_scopes.py --mgr-dir /path/to/src/pybind/mgr \\
        --openapi /path/to/api-all.json --ceph-version 17.2.9 --output /tmp/s.toml

Ceph 18.2 and 20.2 (conf/scopes/18.2.toml, conf/scopes/20.2.toml): run it with the
release's own Python and dashboard package, inside the release's Debian root
(deploy/ceph-dev/release-root.sh), with the dashboard's own offline OpenAPI generator:

    deploy/ceph-dev/release-root.sh run 20.2 --bind "$PWD" -- python3 \
        "$PWD/deploy/tools/derive_scopes.py" --openapi generate \
        --output "$PWD/conf/scopes/20.2.toml"

For another Ceph version point --mgr-dir at that version's ``src/pybind/mgr``
(or /usr/share/ceph/mgr of an installed ceph-mgr-dashboard) and --openapi at
the ``GET /docs/api-all.json`` of that version (``--openapi generate`` builds it
offline from the same sources with the dashboard's own generator).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import types
from collections import Counter

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
DEFAULT_MGR_DIR = '/usr/share/ceph/mgr'
DEFAULT_OPENAPI = '/work/shared/ceph-dashboard/ceph-16.2-api-all.json'
DEFAULT_OUTPUT = os.path.join(REPO, 'conf', 'scopes', '16.2.toml')
SYSTEM_PYTHON = '/usr/bin/python3'

PERMISSION_MAP = {'GET': 'read', 'POST': 'create', 'PUT': 'update', 'DELETE': 'delete'}
METHODS = ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')
# Any value works for the dispatch as long as it is a single URL segment that
# no literal route segment uses.
DUMMY_SEGMENT = 'cg-probe-nonexistent'


class DeriveError(Exception):
    pass


def reexec_with_system_python():
    """The dashboard's deps are Debian packages; pyenv/venv pythons lack them."""
    try:
        import cherrypy  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
        return
    except ImportError:
        pass
    if os.environ.get('CG_DERIVE_REEXEC') or not os.path.exists(SYSTEM_PYTHON) \
            or os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON):
        sys.exit('derive_scopes: cannot import cherrypy; run with a Python that has the '
                 'ceph-mgr-dashboard dependencies (e.g. /usr/bin/python3)')
    os.environ['CG_DERIVE_REEXEC'] = '1'
    os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)


# --------------------------------------------------------------------------
# Loading the dashboard in-process
# --------------------------------------------------------------------------

def stub_ceph_module():
    """ceph_module is the C extension inside the ceph-mgr binary; mgr_module.py
    only subclasses a few of its types at import time."""
    try:
        import ceph_module  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
        return
    except ImportError:
        pass

    class _Base:
        def __init__(self, *args, **kwargs):
            pass

    mod = types.ModuleType('ceph_module')

    def _getattr(name):
        if name.startswith('__'):
            raise AttributeError(name)
        cls = type(name, (_Base,), {})
        setattr(mod, name, cls)
        return cls
    mod.__getattr__ = _getattr  # PEP 562: any Base* type the mgr asks for
    sys.modules['ceph_module'] = mod


def load_dashboard(mgr_dir):
    """Import the dashboard package exactly as ceph-mgr does (``import dashboard``
    runs module.py, which imports the plugins that contribute controllers) and
    build its route mapper. Returns (controllers_pkg, routes_mapper)."""
    import logging  # pylint: disable=import-outside-toplevel
    from unittest import mock  # pylint: disable=import-outside-toplevel

    if not os.path.isfile(os.path.join(mgr_dir, 'dashboard', 'controllers', '__init__.py')):
        raise DeriveError(f'{mgr_dir}/dashboard/controllers/__init__.py not found '
                          '(--mgr-dir must be the folder that contains dashboard/)')
    os.environ.pop('UNITTEST', None)  # UNITTEST makes the package import its test mocks
    logging.disable(logging.CRITICAL)
    stub_ceph_module()
    sys.path.insert(0, mgr_dir)

    import dashboard  # pylint: disable=import-outside-toplevel,import-error
    mgr = mock.MagicMock(name='mgr')
    mgr.get_frontend_path.return_value = os.path.join(mgr_dir, 'dashboard', 'frontend', 'dist')
    mgr.get_module_option.return_value = None
    if hasattr(dashboard.mgr, 'init'):
        dashboard.mgr.init(mgr)
    else:  # UNITTEST-style package with a plain attribute
        dashboard.mgr = mgr

    ctrls = sys.modules['dashboard.controllers']
    if hasattr(ctrls, 'Router') and hasattr(ctrls.Router, 'generate_routes'):
        mapper, _ = ctrls.Router.generate_routes('')          # >= 16.2 layout
    elif hasattr(ctrls, 'generate_routes'):
        mapper, _ = ctrls.generate_routes('')                 # octopus layout
    else:
        raise DeriveError('cannot find generate_routes in dashboard.controllers')
    return ctrls, mapper


def docs_spec():
    """The dashboard's own offline OpenAPI generator (what docs.py __main__
    writes); call after load_dashboard(), it reads ENDPOINT_MAP."""
    import importlib  # pylint: disable=import-outside-toplevel
    docs = importlib.import_module('dashboard.controllers.docs')
    return docs.Docs._gen_spec(True, '/', offline=True)  # pylint: disable=protected-access


# --------------------------------------------------------------------------
# Resolving one operation
# --------------------------------------------------------------------------

def concrete_url(template):
    return re.sub(r'\{[^}]*\}', DUMMY_SEGMENT, template)


def handler_facts(inst, handler):
    """What AuthManagerTool sees for this controller instance + handler."""
    config = {}
    config.update(getattr(inst, '_cp_config', {}) or {})
    config.update(getattr(handler, '_cp_config', {}) or {})
    secure = bool(config.get('tools.authenticate.on', False))
    scope = getattr(inst, '_security_scope', None) or ''
    perms = getattr(handler, '_security_permissions', None) or []
    return {'secure': secure, 'scope': scope, 'perms': sorted(set(perms))}


def dispatch(mapper, method, template):
    """Mirror cherrypy.dispatch.RoutesDispatcher.find_handler."""
    routes_mapper = mapper.mapper
    result = routes_mapper.match(concrete_url(template),
                                 environ={'REQUEST_METHOD': method})
    if not result:
        return None
    # RoutesDispatcher.connect() stores the controller under the route name
    name = result.get('controller')
    inst = mapper.controllers.get(name, name)
    action = result.get('action')
    handler = getattr(inst, action, None) if action else None
    if handler is None:
        return None
    facts = handler_facts(inst, handler)
    facts['handler'] = f'{type(inst).__name__}.{action}'
    facts['module'] = type(inst).__module__.rsplit('.', 1)[-1]
    return facts


def documented(ctrls, method, template):
    """The endpoints the docs generator used for this path/method."""
    out = []
    for endpoint in ctrls.ENDPOINT_MAP.get(template, []):
        if endpoint.method != method:
            continue
        handler = getattr(endpoint.inst, endpoint.action)
        facts = handler_facts(endpoint.inst, handler)
        facts['handler'] = f'{endpoint.ctrl.__name__}.{endpoint.action}'
        facts['version'] = endpoint_version(endpoint)
        out.append(facts)
    return out


def endpoint_version(endpoint):
    """The API version the endpoint's request wrapper checks ('' for none), as text."""
    config = endpoint.config or {}
    version = config.get('version')
    # A proxy endpoint (the web UI's files) is served as it is, without the request
    # wrapper that checks the version.
    if version is None or config.get('proxy'):
        return ''
    if hasattr(version, 'major'):
        return f'{version.major}.{version.minor}'
    return str(version)  # early pacific: versions were strings


def openapi_operations(spec):
    ops = []
    for path, item in spec['paths'].items():
        for method, op in item.items():
            if method.upper() not in METHODS:
                continue
            ops.append((path, method.upper(), 'security' in op))
    return ops


def derive(ctrls, mapper, spec):
    rows, problems, notes = [], [], []
    for path, method, doc_secure in openapi_operations(spec):
        eff = dispatch(mapper, method, path)
        docs = documented(ctrls, method, path)
        if eff is None:
            problems.append(f'{method} {path}: no route in the dashboard matches '
                            '(OpenAPI document from another version?)')
            continue
        key = (eff['secure'], eff['scope'], tuple(eff['perms']))
        versions = {doc['version'] for doc in docs if doc['handler'] == eff['handler']}
        versions = versions or {doc['version'] for doc in docs}
        if len(versions) > 1:
            problems.append(f'{method} {path}: handlers with several versions {versions}')
        version = versions.pop() if versions else None
        if version is None:
            problems.append(f'{method} {path}: no documented endpoint says its version')
            version = ''
        for doc in docs:
            if (doc['secure'], doc['scope'], tuple(doc['perms'])) != key:
                problems.append(f'{method} {path}: documented handler {doc["handler"]} '
                                f'{doc} differs from dispatched {eff["handler"]} {eff}')
        if not docs:
            notes.append(f'{method} {path}: not in ENDPOINT_MAP; dispatched to {eff["handler"]}')
        if eff['secure'] != doc_secure:
            problems.append(f'{method} {path}: OpenAPI security={doc_secure} but the '
                            f'dispatched handler {eff["handler"]} has '
                            f'tools.authenticate.on={eff["secure"]}')
        if eff['secure'] and eff['scope'] and not eff['perms']:
            problems.append(f'{method} {path}: scope {eff["scope"]!r} without permissions: '
                            'the dashboard answers 403 to every user (not representable)')
        if len(eff['perms']) > 1:
            problems.append(f'{method} {path}: needs several permissions {eff["perms"]} '
                            '(not representable)')
        if eff['secure'] and eff['scope']:
            scope, permission = eff['scope'], eff['perms'][0] if eff['perms'] else ''
        else:
            # public, or token only: the tool returns before looking at permissions
            scope, permission = '', ''
        rows.append({'method': method, 'path': path, 'scope': scope,
                     'permission': permission, 'public': not eff['secure'],
                     'version': version,
                     'handler': eff['handler'], 'module': eff['module']})
    rows.sort(key=lambda r: (r['path'], r['method']))
    return rows, problems, notes


def routes_missing_from_openapi(ctrls, spec):
    """Endpoints the dashboard serves that the given OpenAPI document lacks."""
    have = {(p, m) for p, m, _ in openapi_operations(spec)}
    missing = []
    for template, endpoints in ctrls.ENDPOINT_MAP.items():
        for endpoint in endpoints:
            if (template, endpoint.method) not in have:
                missing.append(f'{endpoint.method} {template}')
    return sorted(set(missing))


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def toml_str(value):
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append('\\' + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append(f'\\u{ord(ch):04x}')
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


def render(rows, ceph_version, openapi_name, all_scopes):
    scopes = Counter(r['scope'] for r in rows if r['scope'])
    public = sum(1 for r in rows if r['public'])
    token_only = sum(1 for r in rows if not r['public'] and not r['scope'])
    lines = [
        '# Access table of the Ceph manager dashboard REST API: for every operation, the',
        '# security scope and the permission the dashboard itself requires (its',
        "# AuthManagerTool: no token -> 401; scope set and the user's roles lack",
        '# the permission on it -> 403). clustergate enforces the same at the edge.',
        '#',
        f'# GENERATED by deploy/tools/derive_scopes.py from Ceph {ceph_version}',
        f'# (dashboard sources + {openapi_name}). Do not edit by hand; regenerate with',
        '#   deploy/tools/derive_scopes.py [--mgr-dir DIR] [--openapi api-all.json]',
        '#       [--ceph-version X.Y.Z] [--output conf/scopes.toml]',
        '# and check it against a live dashboard with deploy/tools/probe_scopes.py.',
        '#',
        '# One [[operation]] per operation of GET /docs/api-all.json, sorted by path,',
        '# then method (byte order). Keys:',
        '#   method      GET | POST | PUT | DELETE | PATCH',
        '#   path        the OpenAPI path template, exactly as in the document',
        '#   scope       security scope, or "" when any valid token is enough',
        '#   permission  read | create | update | delete; "" when scope is ""',
        '#   public      true: the dashboard needs no token at all (secure=False)',
        '#   version     the API version the operation serves (Accept: application/',
        '#               vnd.ceph.api.vX.Y+json; X equal, Y at most); "" for none',
        '# The comment after [[operation]] names the dashboard handler that runs;',
        '# "!" marks a permission that differs from the HTTP method default',
        '# (GET read, POST create, PUT update, DELETE delete).',
        '#',
        f'# {len(rows)} operations: {public} public, {token_only} token only, '
        f'{len(rows) - public - token_only} scoped:',
    ]
    for scope, count in sorted(scopes.items()):
        lines.append(f'#   {scope:<20} {count}')
    unused = sorted(set(all_scopes) - set(scopes))
    if unused:
        lines.append(f'# Scopes no operation requires: {", ".join(unused)}')
    lines += ['', f'ceph_version = {toml_str(ceph_version)}', '']
    for r in rows:
        note = f'{r["module"]}.py {r["handler"]}'
        if r['permission'] and r['permission'] != PERMISSION_MAP.get(r['method']):
            note += f'  ! {r["method"]} needs {r["permission"]}'
        lines += [
            f'[[operation]]  # {note}',
            f'method = {toml_str(r["method"])}',
            f'path = {toml_str(r["path"])}',
            f'scope = {toml_str(r["scope"])}',
            f'permission = {toml_str(r["permission"])}',
            f'public = {"true" if r["public"] else "false"}',
            f'version = {toml_str(r["version"])}',
            '',
        ]
    return '\n'.join(lines)


def detect_ceph_version(mgr_dir):
    """Installed package version, e.g. 16.2.15+ds-0+deb12u2 -> 16.2.15."""
    candidates = []
    try:
        out = subprocess.run(['dpkg-query', '-W', '-f=${Version}', 'ceph-mgr-dashboard'],
                             capture_output=True, text=True, check=False, timeout=30)
        if out.returncode == 0:
            candidates.append(out.stdout)
    except (OSError, subprocess.SubprocessError):
        pass
    if not mgr_dir.startswith('/usr/share/ceph/'):
        candidates = []  # a source tree: the installed package says nothing about it
    for text in candidates:
        match = re.search(r'(\d+\.\d+\.\d+)', text.split(':', 1)[-1])
        if match:
            return match.group(1)
    raise DeriveError('cannot detect the Ceph version; pass --ceph-version')


def main():
    reexec_with_system_python()
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    ap.add_argument('--mgr-dir', default=DEFAULT_MGR_DIR,
                    help='folder holding dashboard/ and mgr_module.py (default %(default)s)')
    ap.add_argument('--openapi', default=DEFAULT_OPENAPI,
                    help='GET /docs/api-all.json of that version, or "generate" to build it '
                         'offline from the sources (default %(default)s)')
    ap.add_argument('--ceph-version', help='default: the installed ceph-mgr-dashboard package')
    ap.add_argument('--output', default=DEFAULT_OUTPUT, help='default %(default)s')
    ap.add_argument('--check', action='store_true',
                    help='do not write; exit 1 if --output differs from the derivation')
    ap.add_argument('--verbose', action='store_true')
    args = ap.parse_args()

    try:
        ctrls, mapper = load_dashboard(os.path.abspath(args.mgr_dir))
        version = args.ceph_version or detect_ceph_version(args.mgr_dir)
        if args.openapi == 'generate':
            spec, openapi_name = docs_spec(), 'its offline /docs/api-all.json'
        else:
            with open(args.openapi, encoding='utf-8') as fh:
                spec = json.load(fh)
            openapi_name = os.path.basename(args.openapi)
        rows, problems, notes = derive(ctrls, mapper, spec)
        extra = routes_missing_from_openapi(ctrls, spec)
    except DeriveError as exc:
        sys.exit(f'derive_scopes: {exc}')

    for note in notes + [f'served but not in the OpenAPI document: {e}' for e in extra]:
        print(f'note: {note}', file=sys.stderr)
    if problems:
        for problem in problems:
            print(f'error: {problem}', file=sys.stderr)
        sys.exit(f'derive_scopes: {len(problems)} problem(s); nothing written')

    security = sys.modules.get('dashboard.security')
    all_scopes = security.Scope.all_scopes() if security else []
    text = render(rows, version, openapi_name, all_scopes)
    if args.verbose:
        for r in rows:
            print(f'{r["method"]:6} {r["path"]:60} {r["scope"] or "-":18} '
                  f'{r["permission"] or "-":7} {"public" if r["public"] else ""} {r["handler"]}')
    if args.check:
        try:
            with open(args.output, encoding='utf-8') as fh:
                current = fh.read()
        except OSError:
            current = None
        if current != text:
            sys.exit(f'derive_scopes: {args.output} is stale; re-run without --check')
        print(f'{args.output} is up to date ({len(rows)} operations)')
        return
    tmp = args.output + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as fh:
        fh.write(text)
    os.replace(tmp, args.output)
    print(f'wrote {args.output}: {len(rows)} operations (Ceph {version})')


if __name__ == '__main__':
    main()
