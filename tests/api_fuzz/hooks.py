"""Schemathesis hooks for the API fuzz runs of tests/it/api_fuzz.rs, which loads them through
SCHEMATHESIS_HOOKS: each request asks for the API version its operation documents, and the
gateway's auth endpoints get raw bodies besides the schema-violating ones Schemathesis makes.
"""

import json

import schemathesis
from hypothesis import strategies as st

VENDOR_PREFIX = "application/vnd.ceph.api."
DEFAULT_MEDIA_TYPE = VENDOR_PREFIX + "v1.0+json"
# The gateway reads an auth body whole up to 64 KiB and refuses more with 413: garbage
# stays around that bound.
MAX_GARBAGE_BYTES = 70 * 1024

AUTH_OPERATIONS = ["POST /api/auth", "POST /api/auth/check", "POST /api/auth/logout"]


def documented_media_type(operation):
    """The vendor media type of the operation's success answer: the gateway refuses an
    API request without a vendor Accept (415), and the dashboard one at another version."""
    responses = operation.definition.raw.get("responses") or {}
    for status, response in sorted(responses.items()):
        if not str(status).startswith("2") or not isinstance(response, dict):
            continue
        for media_type in response.get("content") or {}:
            if media_type.startswith(VENDOR_PREFIX):
                return media_type
    return DEFAULT_MEDIA_TYPE


@schemathesis.hook
def before_call(context, case, kwargs):
    """Accept: the operation's vendor media type, unless the case sets one itself."""
    headers = dict(case.headers or {})
    if not any(name.lower() == "accept" for name in headers):
        headers["Accept"] = documented_media_type(case.operation)
        case.headers = headers


def nested(depth):
    """`[[...]]`: JSON nested `depth` deep."""
    return b"[" * depth + b"]" * depth


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=64)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=16), inner, max_size=4),
    max_leaves=20,
)

# Bodies no schema describes: any bytes (invalid UTF-8 included), text, JSON that is not
# an object or has the wrong fields, JSON cut short, nesting past any parser's depth
# limit, and sizes around the body limit.
GARBAGE_BODIES = st.one_of(
    st.binary(max_size=2048),
    st.text(max_size=512).map(str.encode),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()).flatmap(
        lambda b: st.integers(0, max(len(b) - 1, 0)).map(lambda n: b[:n])
    ),
    st.integers(1, MAX_GARBAGE_BYTES // 2).map(nested),
    st.integers(MAX_GARBAGE_BYTES - 8 * 1024, MAX_GARBAGE_BYTES).map(lambda n: b" " * (n - 2) + b"{}"),
)

CONTENT_TYPES = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/javascript", "text/plain", "application/x-www-form-urlencoded"]
)


def with_raw_body(args):
    case, body, content_type = args
    case.body = body
    case.media_type = "application/octet-stream"
    case.headers = {**(case.headers or {}), "Content-Type": content_type}
    return case


@schemathesis.hook.apply_to(name=AUTH_OPERATIONS)
def before_generate_case(context, strategy):
    """Half the auth endpoints' cases carry a raw body instead of the generated one."""
    raw = st.tuples(strategy, GARBAGE_BODIES, CONTENT_TYPES).map(with_raw_body)
    return st.one_of(strategy, raw)
