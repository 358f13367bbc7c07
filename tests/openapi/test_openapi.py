"""docs/openapi.yaml against a real chronoqd: the spec and the server must not drift apart.

    /usr/bin/python3 -m pytest tests/openapi -v     # Debian's pytest, PyYAML and jsonschema

Environment:
    CHRONOQD          the chronoqd binary (default: build/dev/src/server/chronoqd of this checkout)
    CHRONOQ_TEST_PG   a file holding a libpq conninfo of a PostgreSQL cluster whose user may
                      create databases (scripts/pg-cluster.sh writes one): the cluster endpoints
                      are then exercised on two real nodes; without it /v1/cluster is checked to be
                      absent from a single node.

The module starts its own chronoqd (with a bearer token, on a fresh data directory, on a port of its
choosing) and, through it:
  - checks every operation of the spec is routed (no 404 "no endpoint at ..." and no 405), and every
    other method on a spec path is a 405 whose Allow header lists the spec's methods;
  - exercises every operation with valid requests and typical errors, checking that each request
    the test means to be valid validates against the spec and each malformed one does not, that
    the status the server answered is one the spec lists for the operation, and that the answer's
    Content-Type, headers and body match the spec's response for that status;
  - checks at the end that every operation had at least one validated successful exchange.
Only the standard library, PyYAML and jsonschema (4.10, with RefResolver) are used.
"""

from __future__ import annotations

import collections
import http.client
import http.server
import json
import os
import re
import secrets
import selectors
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator, FormatChecker, RefResolver

ROOT = Path(__file__).resolve().parents[2]
SPEC_FILE = ROOT / "docs" / "openapi.yaml"
CHRONOQD = os.environ.get("CHRONOQD", str(ROOT / "build" / "dev" / "src" / "server" / "chronoqd"))
PG_CONNINFO_FILE = os.environ.get("CHRONOQ_TEST_PG", "")

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
STARTUP_DEADLINE_S = 30.0  # for chronoqd's "listening on" line (sanitizer builds are slow)
STOP_DEADLINE_S = 15.0  # for chronoqd to exit after SIGTERM
HTTP_TIMEOUT_S = 30.0  # any one request (lock waits add their wait_ms)
EVENT_DEADLINE_S = 20.0  # for something chronoqd does by itself (a webhook delivery, a leader)

# Operations checked by a test function of their own (which fails unless its exchange validates),
# and left out of the generic route checks: GET /v1/openapi.yaml needs a chronoqd built with the
# route table that serves it, which builds from before it lack. Once none is in use, drop it from
# here so that the generic checks cover it too.
OWN_TEST = {"getOpenApi": "test_openapi_yaml_is_served"}

# /v1/cluster exists only in cluster mode (chronoqd --cluster, which needs PostgreSQL). Without
# CHRONOQ_TEST_PG the generic route checks skip it and test_cluster_endpoints checks instead that a
# single node answers 404 "no endpoint at /v1/cluster": the operation is covered by its absence.
CLUSTER_ONLY = {"getCluster"}

# /v1/test/clock is served only by a chronoqd with --test-clock: the generic route checks send
# these operations to such a server (the `clocked` fixture), and test_test_clock checks that a
# chronoqd on real time answers 404 for them.
TEST_CLOCK_ONLY = {"getTestClock", "moveTestClock"}


# --- the spec ------------------------------------------------------------------------------------


def load_spec() -> dict:
    with open(SPEC_FILE, encoding="utf-8") as f:
        return yaml.safe_load(f)


SPEC = load_spec()
SPEC_URI = SPEC_FILE.as_uri()


@dataclass(frozen=True)
class Operation:
    op_id: str
    method: str  # "GET"
    path: str  # "/v1/tasks/{id}"
    spec: dict  # the operation object
    parameters: tuple  # path-level and operation-level parameter objects, dereferenced


def deref(node: Any) -> Any:
    """Follows a local $ref (#/components/...) to what it names, repeatedly."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node and len(node) == 1:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"only local references are used in the spec, not {ref}"
        assert ref not in seen, f"a $ref cycle through {ref}"
        seen.add(ref)
        node = SPEC
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            assert isinstance(node, dict) and part in node, f"{ref} does not resolve"
            node = node[part]
    return node


def spec_operations() -> dict[str, Operation]:
    out = {}
    for path, item in SPEC["paths"].items():
        shared = [deref(p) for p in item.get("parameters", [])]
        for method in METHODS:
            if method not in item:
                continue
            op = item[method]
            params = {(p["name"], p["in"]): p for p in shared}
            for p in op.get("parameters", []):
                p = deref(p)
                params[(p["name"], p["in"])] = p
            op_id = op["operationId"]
            assert op_id not in out, f"operationId {op_id} is used twice"
            out[op_id] = Operation(op_id, method.upper(), path, op, tuple(params.values()))
    return out


OPS = spec_operations()

# A path segment a route template matches with a {name}.
TEMPLATE_PARAM = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def template_matches(template: str, path: str) -> bool:
    t = template.strip("/").split("/")
    p = path.strip("/").split("/")
    return len(t) == len(p) and all(TEMPLATE_PARAM.match(a) or a == b for a, b in zip(t, p))


# --- schema validation ---------------------------------------------------------------------------

FORMATS = FormatChecker(formats=())
RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$"
)


@FORMATS.checks("date-time")
def _is_date_time(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    m = RFC3339.match(value)
    if not m:
        return False
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    try:
        datetime(y, mo, d, h, mi, min(s, 59))  # 60: a leap second
    except ValueError:
        return False
    return s <= 60 and (m.group(9) is None or (int(m.group(9)) <= 23 and int(m.group(10)) <= 59))


def _int_in(bits: int):
    def check(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int):
            return True
        return -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)

    return check


FORMATS.checks("int32")(_int_in(32))
FORMATS.checks("int64")(_int_in(64))


def schema_errors(schema: Any, instance: Any) -> list[str]:
    """The ways `instance` does not validate against `schema` ($refs resolved in the whole spec)."""
    resolver = RefResolver(base_uri=SPEC_URI, referrer=SPEC)
    validator = Draft202012Validator(schema, resolver=resolver, format_checker=FORMATS)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    out = []
    for e in errors:
        where = "/".join(str(p) for p in e.absolute_path) or "(top)"
        detail = e.message
        if e.context:  # oneOf/anyOf: say why each branch failed
            detail += " [" + "; ".join(c.message for c in e.context[:6]) + "]"
        out.append(f"at {where}: {detail}")
    return out


def query_value(schema: dict, text: str) -> Any:
    """A query parameter's text as the type its schema wants, when it reads as one."""
    schema = deref(schema)
    if schema.get("type") == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    return text


# --- chronoqd ------------------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    headers: dict  # lower-case names
    body: bytes

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def json(self) -> Any:
        return json.loads(self.body)

    def describe(self) -> str:
        return f"{self.status} {self.body[:600].decode('utf-8', 'replace')}"


class Chronoqd:
    """A chronoqd process started by the test, and an HTTP client for it."""

    def __init__(self, args: list[str], workdir: Path, name: str, token: str | None):
        self.name = name
        self.token = token
        self.log_path = workdir / f"{name}.stderr"
        self._log = open(self.log_path, "wb")
        self.argv = [CHRONOQD, *args, "--listen", "127.0.0.1:0"]
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL
        )
        self.host, self.port = self._await_listening()

    def _await_listening(self) -> tuple[str, int]:
        """Reads stdout until the "listening on http://HOST:PORT" line, within the deadline."""
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        seen = b""
        try:
            while True:
                m = re.search(rb"listening on http://([0-9.]+):(\d+)", seen)
                if m:
                    return m.group(1).decode(), int(m.group(2))
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stop(check=False)
                    pytest.fail(
                        f"chronoqd ({self.name}) printed no 'listening on' line within "
                        f"{STARTUP_DEADLINE_S:.0f} s; stdout so far: {seen!r}; "
                        f"stderr: {self.stderr_tail()}"
                    )
                if sel.select(timeout=min(left, 0.5)):
                    chunk = os.read(self.proc.stdout.fileno(), 4096)
                    if not chunk:
                        self.proc.wait(timeout=STOP_DEADLINE_S)
                        pytest.fail(
                            f"chronoqd ({self.name}) exited with {self.proc.returncode} before "
                            f"listening: {shlex.join(self.argv)}; stderr: {self.stderr_tail()}"
                        )
                    seen += chunk
        finally:
            sel.close()

    def stderr_tail(self, n: int = 2000) -> str:
        self._log.flush()
        try:
            return self.log_path.read_bytes()[-n:].decode("utf-8", "replace")
        except OSError:
            return "(no log)"

    def stop(self, check: bool = True) -> None:
        """SIGTERM, then SIGKILL after the deadline. With ``check``, fails unless
        chronoqd, still running, stopped with status 0 (a crash at shutdown, or a
        sanitizer's report: LeakSanitizer checks at exit under ASan)."""
        problem = ""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                code = self.proc.wait(timeout=STOP_DEADLINE_S)
                if code != 0:
                    problem = f"exited with {code} after SIGTERM"
            except subprocess.TimeoutExpired:
                # It did not stop within the deadline: kill it, and say so.
                self.proc.kill()
                self.proc.wait(timeout=STOP_DEADLINE_S)
                problem = f"did not stop within {STOP_DEADLINE_S:.0f} s of SIGTERM"
        tail = self.stderr_tail(4000) if problem else ""
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()
        if check and problem:
            pytest.fail(f"chronoqd ({self.name}) {problem}; stderr: {tail}")

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        *,
        token: bool | str = True,
        headers: dict | None = None,
        timeout: float = HTTP_TIMEOUT_S,
    ) -> Response:
        h = {"Connection": "close"}
        if body is not None:
            h["Content-Type"] = "application/json"
        if token is True and self.token:
            h["Authorization"] = f"Bearer {self.token}"
        elif isinstance(token, str):
            h["Authorization"] = f"Bearer {token}"
        h.update(headers or {})
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, target, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            conn.close()


# --- exchanges: a request and its answer, both checked against the spec --------------------------

NO_BODY = object()
# Validated exchanges by operationId: the statuses seen.
EXCHANGES: dict[str, list[int]] = collections.defaultdict(list)


class Raw(str):
    """A path parameter given already percent-encoded (e.g. a bad encoding), or a raw body."""


def check_request(op: Operation, params: dict, query: list, body: Any) -> list[str]:
    """The ways a request does not fit the spec's parameters and request body."""
    problems = []
    declared = {(p["name"], p["in"]): p for p in op.parameters}
    for name, value in params.items():
        p = declared.get((name, "path"))
        if p is None:
            problems.append(f"path parameter {name} is not in the spec")
        elif isinstance(value, Raw):
            problems.append(f"path parameter {name} is given raw ({value})")
        else:
            problems += [f"path {name}: {e}" for e in schema_errors(p["schema"], value)]
    for name, value in query:
        p = declared.get((name, "query"))
        if p is None:
            problems.append(f"query parameter {name} is not in the spec")
        else:
            typed = query_value(p["schema"], value)
            problems += [f"query {name}: {e}" for e in schema_errors(p["schema"], typed)]
    rb = deref(op.spec.get("requestBody")) if "requestBody" in op.spec else None
    if body is NO_BODY:
        if rb is not None and rb.get("required"):
            problems.append("the request body is required")
    elif rb is None:
        problems.append("the operation takes no request body")
    elif isinstance(body, Raw):
        try:
            parsed = json.loads(body)
        except ValueError:
            problems.append("the body is not JSON")
        else:
            problems += schema_errors(rb["content"]["application/json"]["schema"], parsed)
    else:
        problems += schema_errors(rb["content"]["application/json"]["schema"], body)
    return problems


def check_response(op_label: str, responses: dict, resp: Response) -> None:
    """Fails unless `resp` fits `responses` (an operation's, or some of components/responses)."""
    key = str(resp.status)
    assert key in responses, (
        f"{op_label} answered {resp.status}, which the spec does not list for it "
        f"(it lists {', '.join(responses)}): {resp.describe()}"
    )
    expected = deref(responses[key])
    for name, header in expected.get("headers", {}).items():
        header = deref(header)
        value = resp.headers.get(name.lower())
        if value is None:
            assert not header.get("required"), f"{op_label} {resp.status}: no {name} header"
            continue
        errors = schema_errors(header["schema"], value)
        assert not errors, f"{op_label} {resp.status}: header {name}: {value!r}: {errors}"
    content = expected.get("content")
    if not content:
        assert resp.body == b"", f"{op_label} {resp.status}: no body in the spec: {resp.describe()}"
        return
    assert resp.content_type in content, (
        f"{op_label} {resp.status}: Content-Type {resp.content_type!r}, the spec says one of "
        f"{list(content)}"
    )
    schema = content[resp.content_type]["schema"]
    if resp.content_type == "application/json":
        try:
            instance = resp.json()
        except ValueError as e:
            pytest.fail(f"{op_label} {resp.status}: the body is not JSON ({e}): {resp.describe()}")
    else:
        instance = resp.body.decode("utf-8")
    errors = schema_errors(schema, instance)
    assert not errors, (
        f"{op_label} {resp.status}: the body does not match the spec:\n  "
        + "\n  ".join(errors)
        + f"\nbody: {resp.describe()}"
    )


def call(
    server: Chronoqd,
    op_id: str,
    *,
    params: dict | None = None,
    query: list | dict | None = None,
    body: Any = NO_BODY,
    expect: int | None = None,
    code: str | None = None,
    field: str | None = None,
    valid: bool | None = True,
    token: bool | str = True,
    headers: dict | None = None,
    timeout: float = HTTP_TIMEOUT_S,
) -> Response:
    """Sends a request for operation `op_id` and checks it and its answer against the spec.

    `valid`: True, the request must fit the spec; False, it must not (the spec rejects what the
    server rejects); None, not checked (a 400 the schema cannot express: a cursor, a cron
    expression, a name that differs from the path's). `expect`, `code`, `field`: the status, error
    code and error field the answer must have.
    """
    op = OPS[op_id]
    params = params or {}
    pairs = list(query.items()) if isinstance(query, dict) else list(query or [])
    path = op.path
    for name, value in params.items():
        encoded = value if isinstance(value, Raw) else urllib.parse.quote(value, safe="")
        path = path.replace("{" + name + "}", encoded)
    assert "{" not in path, f"{op_id}: path parameters missing for {path}"
    target = path + ("?" + urllib.parse.urlencode(pairs) if pairs else "")

    if valid is not None:
        problems = check_request(op, params, pairs, body)
        if valid:
            assert not problems, f"{op_id}: the test's request does not fit the spec: {problems}"
        else:
            assert problems, (
                f"{op_id}: the spec accepts a request the test means as malformed: {body!r} {pairs}"
            )

    if body is NO_BODY:
        data = None
    elif isinstance(body, Raw):
        data = body.encode()
    else:
        data = json.dumps(body).encode()
    resp = server.request(op.method, target, data, token=token, headers=headers, timeout=timeout)
    label = f"{op.method} {target} ({op_id})"
    check_response(label, op.spec["responses"], resp)
    if expect is not None:
        assert resp.status == expect, f"{label}: expected {expect}, got {resp.describe()}"
    if code is not None:
        got = resp.json()["error"]["code"]
        assert got == code, f"{label}: expected code {code}: {resp.describe()}"
    if field is not None:
        assert resp.json()["error"].get("field") == field, (
            f"{label}: expected field {field}: {resp.describe()}"
        )
    EXCHANGES[op_id].append(resp.status)
    return resp


def wait_for(what: str, probe, deadline_s: float = EVENT_DEADLINE_S, every_s: float = 0.02):
    """Calls `probe` until it returns something truthy; fails naming `what` after the deadline."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every_s)  # polls for an event chronoqd causes, never for time to pass
    pytest.fail(f"gave up after {deadline_s:.0f} s waiting for {what} (last: {last!r})")


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir():
    d = Path(tempfile.mkdtemp(prefix="chronoq-openapi-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def server(workdir):
    if not os.access(CHRONOQD, os.X_OK):
        pytest.fail(f"no chronoqd at {CHRONOQD}: build it, or set CHRONOQD to one")
    token = secrets.token_hex(16)
    token_file = workdir / "token"
    token_file.write_text(token + "\n")
    s = Chronoqd(
        ["--data", str(workdir / "data"), "--token-file", str(token_file), "--threads", "2"],
        workdir,
        "chronoqd",
        token,
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def clocked(workdir, server):
    """A chronoqd on a test clock (--test-clock), with the first server's token."""
    s = Chronoqd(
        ["--data", str(workdir / "clocked"), "--token-file", str(workdir / "token"),
         "--test-clock"],
        workdir,
        "clocked",
        server.token,
    )
    yield s
    s.stop()


def enqueue(server, queue, **spec) -> dict:
    return call(server, "createTask", body={"queue": queue, **spec}, expect=201).json()


def claim(server, queue, **req) -> list[dict]:
    return call(server, "claimTasks", params={"queue": queue}, body=req, expect=200).json()["tasks"]


# --- the spec itself -----------------------------------------------------------------------------


def test_spec_is_well_formed():
    assert SPEC["openapi"] == "3.1.0"
    assert SPEC["jsonSchemaDialect"] == "https://spec.openapis.org/oas/3.1/dialect/base"

    def plain(node, where="$"):  # JSON's types only (YAML could give dates, non-string keys)
        if isinstance(node, dict):
            for k, v in node.items():
                assert isinstance(k, str), f"{where}: key {k!r} is not a string (quote it)"
                plain(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                plain(v, f"{where}[{i}]")
        else:
            assert node is None or isinstance(node, (str, int, float, bool)), (
                f"{where}: {node!r} is a {type(node).__name__} (quote it)"
            )

    plain(SPEC)

    refs = []

    def collect(node):
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
            for v in node.values():
                collect(v)
        elif isinstance(node, list):
            for v in node:
                collect(v)

    collect(SPEC)
    for ref in refs:
        deref({"$ref": ref})  # fails if it does not resolve

    for name, schema in SPEC["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)
    assert list(SPEC["components"]["schemas"]) == sorted(
        SPEC["components"]["schemas"], key=str.lower
    ), "components/schemas is kept in alphabetical order"

    camel = re.compile(r"^[a-z][a-zA-Z0-9]*$")
    for op in OPS.values():
        where = f"{op.method} {op.path}"
        assert camel.match(op.op_id), f"{where}: operationId {op.op_id} is not camelCase"
        for key in ("summary", "description", "tags", "responses"):
            assert op.spec.get(key), f"{where} has no {key}"
        for status, r in op.spec["responses"].items():
            assert re.fullmatch(r"[1-5][0-9][0-9]", status), f"{where}: response key {status!r}"
            assert deref(r).get("description"), f"{where} {status} has no description"
        templated = set(re.findall(r"\{([^}]+)\}", op.path))
        declared = {p["name"] for p in op.parameters if p["in"] == "path"}
        assert templated == declared, f"{where}: path parameters {templated} vs declared {declared}"
        for p in op.parameters:
            Draft202012Validator.check_schema(p["schema"])
        if "requestBody" in op.spec:
            Draft202012Validator.check_schema(
                deref(op.spec["requestBody"])["content"]["application/json"]["schema"]
            )
        # /healthz and the dashboard's files need no token; every other call may get 401.
        if not is_public(op):
            assert "401" in op.spec["responses"], f"{where}: every call but the public ones may get 401"
        else:
            assert op.spec.get("security") == [], f"{op.path} needs no token"
            assert "401" not in op.spec["responses"], f"{where} needs no token, so never gets 401"


def test_spec_layout_is_one_path_per_line():
    """tests/server/openapi_test.cc reads the paths line by line: a path key at indent 2, its
    operations at indent 4. Every path and operation must be found that way."""
    found = set()
    path = None
    in_paths = False
    for line in SPEC_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith((" ", "#")):
            in_paths = line.startswith("paths:")
            continue
        if not in_paths:
            continue
        m = re.match(r"^  (/\S*):\s*$", line)
        if m:
            path = m.group(1)
            continue
        m = re.match(r"^    (get|put|post|delete|patch|head|options|trace):", line)
        if m:
            found.add((m.group(1).upper(), path))
    assert found == {(op.method, op.path) for op in OPS.values()}


# --- routes --------------------------------------------------------------------------------------

PROBE = "openapi-probe"


def test_every_spec_operation_is_served(server, clocked):
    """Each operation, with a probe value in every path parameter: never a 404 "no endpoint" or a
    405. A request body is an object with a member the spec does not allow, which the server must
    refuse (400) before doing anything: naming that member, or a required one it checks first."""
    for op in OPS.values():
        if op.op_id in OWN_TEST or op.op_id in CLUSTER_ONLY:
            continue
        params = {p["name"]: PROBE for p in op.parameters if p["in"] == "path"}
        takes_body = "requestBody" in op.spec
        body = {"openapi_probe": 1} if takes_body else NO_BODY
        resp = call(clocked if op.op_id in TEST_CLOCK_ONLY else server, op.op_id, params=params, body=body, valid=False if takes_body else True)
        assert resp.status != 405, f"{op.method} {op.path} is not served: {resp.describe()}"
        if resp.status == 404:
            assert not resp.json()["error"]["message"].startswith("no endpoint at"), (
                f"{op.method} {op.path} is not served: {resp.describe()}"
            )
        if takes_body:
            assert resp.status == 400, f"{op.method} {op.path}: {resp.describe()}"
            required = deref(op.spec["requestBody"]).get("required", False)
            named = resp.json()["error"].get("field")
            assert named == "openapi_probe" or required, resp.describe()


def test_other_methods_answer_405_with_allow(server):
    """For each spec path, a method it does not list: 405 method_not_allowed, whose Allow header
    names the spec's methods at that path."""
    method_not_allowed = {"405": SPEC["components"]["responses"]["MethodNotAllowed"]}
    for path in SPEC["paths"]:
        ops = [op for op in OPS.values() if op.path == path]
        if any(op.op_id in OWN_TEST or op.op_id in CLUSTER_ONLY for op in ops):
            continue
        concrete = re.sub(r"\{[^}]+\}", PROBE, path)
        # Every spec path a concrete path fits: /v1/tasks/batch is also /v1/tasks/{id} (the task
        # whose id is "batch"), so its other methods are those of both.
        fitting = {}
        for op in OPS.values():
            if template_matches(op.path, concrete) and op.op_id not in OWN_TEST:
                fitting.setdefault(op.path, set()).add(op.method)
        every = set().union(*fitting.values())
        wrong = next(m for m in ("PUT", "PATCH", "DELETE", "POST", "GET") if m not in every)
        resp = server.request(wrong, concrete, b"{}")
        check_response(f"{wrong} {concrete}", method_not_allowed, resp)
        allow = {m.strip() for m in resp.headers["allow"].split(",")}
        # The server may list the methods of the most specific path alone, or of every fitting one.
        assert allow <= every and any(methods <= allow for methods in fitting.values()), (
            f"{wrong} {concrete}: Allow {resp.headers['allow']!r}, the spec has {fitting}"
        )


def test_unknown_endpoint_is_404(server):
    resp = server.request("GET", "/v1/nothing/here")
    not_found = {"404": SPEC["components"]["responses"]["NotFound"]}
    check_response("GET /v1/nothing/here", not_found, resp)
    assert resp.json()["error"]["message"] == "no endpoint at /v1/nothing/here"


# --- auth and transport limits -------------------------------------------------------------------


def is_public(op) -> bool:
    """/healthz and the dashboard's files need no token."""
    return op.path in ("/healthz", "/") or op.path.startswith("/ui/")


def test_every_call_but_healthz_needs_the_token(server):
    for op in OPS.values():
        params = {p["name"]: PROBE for p in op.parameters if p["in"] == "path"}
        if is_public(op):
            resp = call(server, op.op_id, params=params, token=False)
            assert resp.status != 401, f"{op.method} {op.path} needs no token: {resp.describe()}"
            continue
        # Refused before the body is read or the path routed: /v1/cluster and /v1/openapi.yaml too.
        for token in (False, "not-the-token"):
            resp = call(server, op.op_id, params=params, token=token, expect=401,
                        code="unauthorized", valid=None)
            assert resp.headers.get("www-authenticate") == "Bearer"


def test_oversized_body_and_headers(server):
    huge = {"queue": "limits", "payload": "x" * (1024 * 1024 + 10)}
    call(server, "createTask", body=huge, expect=413, code="payload_too_large")
    call(server, "getVersion", headers={"X-Padding": "a" * 17000}, expect=431,
         code="request_header_fields_too_large")
    deep = Raw('{"queue":"limits","payload":' + "[" * 70 + "]" * 70 + "}")
    call(server, "createTask", body=deep, expect=400, field="body", valid=None)
    call(server, "createTask", body=Raw("{not json"), expect=400, field="body", valid=False)
    call(server, "createTask", body=Raw("[1]"), expect=400, field="body", valid=False)


# --- tasks ---------------------------------------------------------------------------------------


def test_tasks(server):
    q = "tasks"
    t = enqueue(server, q, payload={"share": 42})
    assert t["state"] == "scheduled" and t["key"] is None and t["id"].startswith("_")
    full = enqueue(
        server,
        q,
        id="share:42",
        payload={"share": 42},
        run_at="2026-01-01T09:00:00+09:00",
        priority=-5,
        max_attempts=7,
        backoff={"base_ms": 500, "cap_ms": 60000},
        key="customer:7",
        on_conflict="reject",
    )
    assert (full["run_at"], full["key"], full["max_attempts"]) == (
        "2026-01-01T00:00:00.000Z",
        "customer:7",
        7,
    )
    enqueue(server, q, run_at=1700000000000)
    enqueue(server, q, delay_ms=0, payload=[1, "two", None])

    # A client-chosen id that names an unfinished task.
    call(server, "createTask", body={"queue": q, "id": "share:42"}, expect=409, code="conflict",
         field="id")
    same = call(server, "createTask", body={"queue": q, "id": "share:42", "on_conflict": "ignore"},
                expect=200).json()
    assert same["created_at"] == full["created_at"]
    replace = {"queue": q, "id": "share:42", "on_conflict": "replace", "delay_ms": 3600000}
    replaced = call(server, "createTask", body=replace, expect=201).json()
    assert replaced["payload"] == {}

    # Ids are percent-encoded in paths.
    odd = enqueue(server, q, id="doc:1/a b?c", delay_ms=3600000)
    got = call(server, "getTask", params={"id": odd["id"]}, expect=200).json()
    assert got["id"] == "doc:1/a b?c"
    call(server, "getTask", params={"id": "no-such-task"}, expect=404, code="not_found")
    call(server, "getTask", params={"id": Raw("%zz")}, expect=400, field="id", valid=False)

    # A webhook target is shown with every member.
    hooked = enqueue(server, "tasks-hooks", delay_ms=3600000,
                     target={"url": "http://127.0.0.1:9/expire", "headers": {"X-Why": "test"}})
    assert hooked["target"] == {"url": "http://127.0.0.1:9/expire", "method": "POST",
                                "headers": {"X-Why": "test"}, "timeout_ms": 10000}
    call(server, "cancelTask", params={"id": hooked["id"]}, expect=200)

    # Reschedule and cancel.
    moved = call(server, "rescheduleTask", params={"id": odd["id"]},
                 body={"delay_ms": 60000, "payload": {"moved": True}}, expect=200).json()
    assert moved["payload"] == {"moved": True}
    call(server, "rescheduleTask", params={"id": odd["id"]},
         body={"run_at": "2030-01-01T00:00:00Z"}, expect=200)
    call(server, "rescheduleTask", params={"id": odd["id"]},
         body={"run_at": "2030-01-01T00:00:00Z", "delay_ms": 5}, expect=400, field="delay_ms",
         valid=False)
    call(server, "rescheduleTask", params={"id": odd["id"]}, body={"payload": 1}, expect=400,
         field="run_at", valid=False)
    cancelled = call(server, "cancelTask", params={"id": odd["id"]}, expect=200).json()
    assert cancelled["state"] == "cancelled"
    call(server, "cancelTask", params={"id": odd["id"]}, body={}, expect=409,
         code="failed_precondition", field="id")
    call(server, "rescheduleTask", params={"id": odd["id"]}, body={"delay_ms": 0}, expect=409,
         code="failed_precondition")
    call(server, "cancelTask", params={"id": "no-such-task"}, expect=404)
    call(server, "rescheduleTask", params={"id": "no-such-task"}, body={"delay_ms": 0}, expect=404)

    # Malformed tasks: each refused naming the member.
    bad = [
        ({"queue": q, "colour": "red"}, "colour"),
        ({"queue": q, "priority": "high"}, "priority"),
        ({"queue": q, "run_at": "tomorrow"}, "run_at"),
        ({"queue": q, "run_at": "2026-01-01T00:00:00"}, "run_at"),
        ({"queue": q, "delay_ms": -1}, "delay_ms"),
        ({"queue": q, "id": "_mine"}, "id"),
        ({"queue": q, "id": ""}, "id"),
        ({"queue": q, "key": ""}, "key"),
        ({"queue": "no spaces"}, "queue"),
        ({"queue": q, "max_attempts": 0}, "max_attempts"),
        ({"queue": q, "max_attempts": 1001}, "max_attempts"),
        ({"queue": q, "on_conflict": "merge"}, "on_conflict"),
        ({"queue": q, "backoff": {"cap_ms": 10}}, "backoff.base_ms"),
        ({"queue": q, "target": {"url": "ftp://x"}}, "target.url"),
        ({"queue": q, "target": {"url": "http://x", "method": "HEAD"}}, "target.method"),
        ({"payload": 1}, "queue"),
    ]
    for body, field_name in bad:
        call(server, "createTask", body=body, expect=400, code="invalid_argument", field=field_name,
             valid=False)


def test_task_batches(server):
    q = "batches"
    batch = [{"queue": q, "payload": i, "delay_ms": 3600000} for i in range(3)]
    tasks = call(server, "createTaskBatch", body={"tasks": batch}, expect=201).json()["tasks"]
    assert [t["payload"] for t in tasks] == [0, 1, 2]
    call(server, "createTaskBatch",
         body={"tasks": [{"queue": q}, {"queue": q, "run_at": "soon"}]},
         expect=400, field="tasks[1].run_at", valid=False)
    call(server, "createTaskBatch", body={"tasks": [{"queue": q}, {"queue": q, "extra": 1}]},
         expect=400, field="tasks[1].extra", valid=False)
    call(server, "createTaskBatch", body={"tasks": []}, expect=400, field="tasks", valid=False)
    call(server, "createTaskBatch", body={}, expect=400, field="tasks", valid=False)


def test_task_listing_pages(server):
    q = "listing"
    for i in range(3):
        enqueue(server, q, id=f"list:{i}", key="k:1" if i else None, delay_ms=3600000 * (i + 1))
    first = call(server, "listTasks", query={"queue": q, "limit": 2}, expect=200).json()
    assert len(first["tasks"]) == 2 and isinstance(first["next_cursor"], str)
    rest = call(server, "listTasks", query={"queue": q, "limit": 2, "cursor": first["next_cursor"]},
                expect=200).json()
    assert [t["id"] for t in first["tasks"] + rest["tasks"]] == ["list:0", "list:1", "list:2"]
    assert rest["next_cursor"] is None
    keyed = call(server, "listTasks", query={"queue": q, "state": "scheduled", "key": "k:1"},
                 expect=200).json()
    assert sorted(t["id"] for t in keyed["tasks"]) == ["list:1", "list:2"]
    call(server, "listTasks", expect=200)

    call(server, "listTasks", query={"limit": 0}, expect=400, field="limit", valid=False)
    call(server, "listTasks", query={"limit": 1001}, expect=400, field="limit", valid=False)
    call(server, "listTasks", query={"limit": "ten"}, expect=400, field="limit", valid=False)
    call(server, "listTasks", query={"state": "sleeping"}, expect=400, field="state", valid=False)
    call(server, "listTasks", query={"key": ""}, expect=400, field="key", valid=False)
    call(server, "listTasks", query={"queue": "bad queue"}, expect=400, field="queue", valid=False)
    call(server, "listTasks", query={"colour": "red"}, expect=400, field="colour", valid=False)
    call(server, "listTasks", query={"cursor": "not-a-cursor"}, expect=400, field="cursor",
         valid=None)


def test_key_backlog(server):
    q = "backlog"
    call(server, "configureQueue", params={"queue": q}, body={"max_pending_per_key": 1}, expect=200)
    enqueue(server, q, key="k", delay_ms=3600000)
    call(server, "createTask", body={"queue": q, "key": "k", "delay_ms": 3600000}, expect=429,
         code="key_backlog_full", field="key")
    call(server, "createTaskBatch", body={"tasks": [{"queue": q}, {"queue": q, "key": "k"}]},
         expect=429, code="key_backlog_full", field="tasks[1].key")


# --- workers -------------------------------------------------------------------------------------


def test_claim_ack_fail_extend(server):
    q = "work"
    a = enqueue(server, q, id="w:a", payload={"n": 1})
    b = enqueue(server, q, id="w:b", payload={"n": 2}, key="k")
    c = enqueue(server, q, id="w:c", payload={"n": 3}, max_attempts=2)
    leases = claim(server, q, max=10, lease_ms=60000, wait_ms=0)
    by_id = {l["id"]: l for l in leases}
    assert set(by_id) == {a["id"], b["id"], c["id"]}
    assert by_id["w:b"]["key"] == "k" and by_id["w:a"]["attempt"] == 1
    token = by_id["w:a"]["token"]

    running = call(server, "getTask", params={"id": "w:a"}, expect=200).json()
    assert running["state"] == "running" and "lease_until" in running

    ext = call(server, "extendTask", params={"id": "w:a"},
               body={"token": token, "lease_ms": 120000}, expect=200).json()
    assert ext["lease_until"] > by_id["w:a"]["lease_until"]
    call(server, "extendTask", params={"id": "w:a"}, body={"token": token}, expect=400,
         field="lease_ms", valid=False)
    call(server, "extendTask", params={"id": "w:a"}, body={"token": token, "lease_ms": 0},
         expect=400, field="lease_ms", valid=False)

    call(server, "ackTask", params={"id": "w:a"}, body={"token": token}, expect=200)
    call(server, "ackTask", params={"id": "w:a"}, body={"token": token}, expect=409,
         code="stale_token", field="token")
    call(server, "extendTask", params={"id": "w:a"}, body={"token": token, "lease_ms": 1000},
         expect=409, code="stale_token")
    call(server, "failTask", params={"id": "w:a"}, body={"token": token}, expect=409,
         code="stale_token")
    call(server, "ackTask", params={"id": "no-such-task"}, body={"token": token}, expect=404)
    call(server, "failTask", params={"id": "no-such-task"}, body={"token": token}, expect=404)
    call(server, "extendTask", params={"id": "no-such-task"}, body={"token": token, "lease_ms": 1},
         expect=404)
    call(server, "ackTask", params={"id": "w:b"}, body={"token": 0}, expect=400, field="token",
         valid=False)
    call(server, "ackTask", params={"id": "w:b"}, body={}, expect=400, field="token", valid=False)
    call(server, "ackTask", params={"id": "w:b"}, body={"token": "17"}, expect=400, field="token",
         valid=False)
    call(server, "failTask", params={"id": "w:b"}, body={"token": token, "retry_in_ms": -1},
         expect=400, field="retry_in_ms", valid=False)

    # A failure retries: at once with retry_in_ms 0, keeping the error.
    call(server, "failTask", params={"id": "w:c"},
         body={"token": token, "error": "S3 said 503", "retry_in_ms": 0}, expect=200)
    again = call(server, "getTask", params={"id": "w:c"}, expect=200).json()
    assert (again["state"], again["last_error"]) == ("scheduled", "S3 said 503")
    assert again["attempt"] == 1

    # Acknowledgements in bulk, reported per task.
    results = call(server, "ackMany", body={"acks": [
        {"id": "w:b", "token": token},
        {"id": "w:a", "token": token},
        {"id": "no-such-task", "token": token},
    ]}, expect=200).json()["results"]
    assert [(r["id"], r["ok"], r.get("error", {}).get("code")) for r in results] == [
        ("w:b", True, None),
        ("w:a", False, "stale_token"),
        ("no-such-task", False, "not_found"),
    ]

    # A claim carrying the acknowledgement of the previous claim's task.
    (c2,) = claim(server, q, max=10)
    assert (c2["id"], c2["attempt"]) == ("w:c", 2)
    answer = call(server, "claimTasks", params={"queue": q},
                  body={"max": 5, "acks": [{"id": "w:c", "token": c2["token"]}]}, expect=200).json()
    assert answer == {"tasks": [], "acks": [{"id": "w:c", "ok": True}]}
    assert call(server, "claimTasks", params={"queue": q}, expect=200).json() == {"tasks": []}

    call(server, "claimTasks", params={"queue": q}, body={"max": 0}, expect=400, field="max",
         valid=False)
    call(server, "claimTasks", params={"queue": q}, body={"lease_ms": 604800001}, expect=400,
         field="lease_ms", valid=False)
    call(server, "claimTasks", params={"queue": q}, body={"wait_ms": 3600001}, expect=400,
         field="wait_ms", valid=False)
    call(server, "claimTasks", params={"queue": q}, body={"acks": []}, expect=400, field="acks",
         valid=False)
    call(server, "claimTasks", params={"queue": q}, body={"acks": [{"id": "w:c"}]}, expect=400,
         field="acks[0].token", valid=False)
    call(server, "claimTasks", params={"queue": "bad queue"}, body={}, expect=400, field="queue",
         valid=False)
    call(server, "ackMany", body={}, expect=400, field="acks", valid=False)
    call(server, "ackMany", body={"acks": [{"id": "w:c", "token": 1, "extra": 1}]}, expect=400,
         field="acks[0].extra", valid=False)


def test_queue_keys(server):
    q = "keyed-backlog"
    for key in ("a", "b", "b"):
        enqueue(server, q, key=key, delay_ms=60000)
    keys = call(server, "getQueueKeys", params={"queue": q}, query={"limit": "1"},
                expect=200).json()
    assert keys == {"keys": [{"key": "b", "backlog": 2}]}
    assert call(server, "getQueue", params={"queue": q}, expect=200).json()["due"] == 0


def test_retry_dead_task(server):
    q = "dead"
    enqueue(server, q, id="d:1", max_attempts=1)
    (lease,) = claim(server, q)
    call(server, "failTask", params={"id": "d:1"}, body={"token": lease["token"], "error": "gone"},
         expect=200)
    dead = call(server, "getTask", params={"id": "d:1"}, expect=200).json()
    assert (dead["state"], dead["last_error"]) == ("dead", "gone")
    listed = call(server, "listTasks", query={"queue": q, "state": "dead"}, expect=200).json()
    assert [t["id"] for t in listed["tasks"]] == ["d:1"]
    retried = call(server, "retryTask", params={"id": "d:1"}, expect=200).json()
    assert (retried["state"], retried["attempt"]) == ("scheduled", 0)
    call(server, "retryTask", params={"id": "d:1"}, body={}, expect=409, code="failed_precondition")
    call(server, "retryTask", params={"id": "no-such-task"}, expect=404)

    # A dead task purged: gone, its id free again.
    enqueue(server, "dead-purged", id="d:2", max_attempts=1)
    (lease2,) = claim(server, "dead-purged")
    call(server, "failTask", params={"id": "d:2"}, body={"token": lease2["token"], "error": "x"},
         expect=200)
    found = call(server, "listTasks", query={"id_prefix": "d:", "state": "dead"}, expect=200).json()
    assert [t["id"] for t in found["tasks"]] == ["d:2"]
    purged = call(server, "purgeTask", params={"id": "d:2"}, expect=200).json()
    assert (purged["id"], purged["state"]) == ("d:2", "dead")
    call(server, "getTask", params={"id": "d:2"}, expect=404)
    call(server, "purgeTask", params={"id": "d:1"}, expect=409, code="failed_precondition",
         field="id")

    # on_conflict replace of a running task.
    (running,) = claim(server, q)
    call(server, "createTask", body={"queue": q, "id": "d:1", "on_conflict": "replace"}, expect=409,
         code="failed_precondition", field="id")
    call(server, "cancelTask", params={"id": "d:1"}, expect=409, code="failed_precondition")
    call(server, "ackTask", params={"id": "d:1"}, body={"token": running["token"]}, expect=200)


def test_bulk_actions(server):
    q = "bulk"
    for i in range(3):
        enqueue(server, q, id=f"b:{i}", delay_ms=3_600_000)
    req = {"filter": {"queue": q, "state": "scheduled"}, "action": "reschedule",
           "shift_ms": 60_000}
    dry = call(server, "startBulk", body={**req, "dry_run": True}, expect=200).json()
    assert (dry["id"], dry["state"], dry["matched"], dry["applied"]) == (None, "done", 3, 3)
    job = call(server, "startBulk", body=req, expect=202).json()
    assert job["state"] in ("running", "done")

    def ended():
        j = call(server, "getBulkJob", params={"id": job["id"]}, expect=200).json()
        return j if j["state"] != "running" else None

    done = wait_for("the bulk job to end", ended)
    assert (done["state"], done["applied"], done["cursor"]) == ("done", 3, "b:2")
    listed = call(server, "listBulkJobs", expect=200).json()
    assert job["id"] in [j["id"] for j in listed["jobs"]]
    again = call(server, "cancelBulkJob", params={"id": job["id"]}, expect=200).json()
    assert again["state"] == "done"
    call(server, "getBulkJob", params={"id": "bulk-0-0"}, expect=404, code="not_found")
    # Refused, naming the field: no condition; both instant and shift; an unknown filter member.
    call(server, "startBulk", body={"filter": {}, "action": "delete"}, expect=400,
         code="invalid_argument", field="filter")
    call(server, "startBulk", body={**req, "run_at": "2030-01-01T00:00:00Z"}, expect=400,
         code="invalid_argument", field="shift_ms")
    call(server, "startBulk", body={"filter": {"owner": "me"}, "action": "cancel"}, valid=False,
         expect=400, code="invalid_argument", field="filter.owner")


class _Receiver(http.server.BaseHTTPRequestHandler):
    """A webhook receiver: records each delivery and answers 204."""

    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length", "0"))
        self.server.deliveries.append((self.path, dict(self.headers), self.rfile.read(length)))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.server.delivered.set()

    def log_message(self, *args):
        pass


def test_webhook_task_shows_its_delivery(server):
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    receiver.deliveries = []
    receiver.delivered = threading.Event()
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{receiver.server_address[1]}/expire?share=42"
        target = {"url": url, "method": "POST", "headers": {"X-Test": "1"}, "timeout_ms": 5000}
        t = enqueue(server, "hooks", payload={"share": 42}, target=target)
        assert receiver.delivered.wait(EVENT_DEADLINE_S), (
            f"chronoqd delivered nothing to {url} within {EVENT_DEADLINE_S:.0f} s"
        )

        def succeeded():
            got = call(server, "getTask", params={"id": t["id"]}, expect=200).json()
            return got if got["state"] == "succeeded" else None

        done = wait_for(f"task {t['id']} to succeed after its delivery", succeeded)
        assert done["last_response"] == "HTTP 204"
        path, headers, body = receiver.deliveries[0]
        assert path == "/expire?share=42" and headers.get("X-Test") == "1"
        assert json.loads(body) == {"share": 42}
    finally:
        receiver.shutdown()
        receiver.server_close()


def test_acks_carry_failures(server):
    """POST /v1/acks, and a claim's `acks`, take failures beside successes:
    {id, token, error, retry_in_ms?}. Fails until chronoqd is built with that change."""
    q = "outcomes"
    for name in ("ok", "retry", "later", "last"):
        enqueue(server, q, id=f"o:{name}", max_attempts=1 if name == "last" else 5)
    leases = {l["id"]: l for l in claim(server, q, max=10)}
    token = leases["o:ok"]["token"]
    results = call(server, "ackMany", body={"acks": [
        {"id": "o:ok", "token": token},
        {"id": "o:retry", "token": token, "error": "S3 said 503", "retry_in_ms": 0},
        {"id": "o:later", "token": token, "error": "rate limited", "retry_in_ms": 3600000},
        {"id": "o:last", "token": token, "error": "gave up"},
        {"id": "o:retry", "token": token, "error": "twice"},
    ]}, expect=200).json()["results"]
    assert [(r["id"], r["ok"], r.get("error", {}).get("code")) for r in results] == [
        ("o:ok", True, None),
        ("o:retry", True, None),
        ("o:later", True, None),
        ("o:last", True, None),
        ("o:retry", False, "stale_token"),  # settled by an earlier entry of the same call
    ]
    state = {i: call(server, "getTask", params={"id": i}, expect=200).json()
             for i in ("o:ok", "o:retry", "o:later", "o:last")}
    assert state["o:ok"]["state"] == "succeeded"
    retry = state["o:retry"]
    assert (retry["state"], retry["last_error"]) == ("scheduled", "S3 said 503")
    assert state["o:later"]["run_at"] > state["o:retry"]["run_at"]
    assert (state["o:last"]["state"], state["o:last"]["last_error"]) == ("dead", "gave up")

    # Riding on a claim: o:retry is due again at once.
    (again,) = claim(server, q, max=10)
    assert again["id"] == "o:retry"
    answer = call(server, "claimTasks", params={"queue": q}, body={
        "max": 10, "acks": [{"id": "o:retry", "token": again["token"], "error": "still 503",
                              "retry_in_ms": 0}]}, expect=200).json()
    assert answer["acks"] == [{"id": "o:retry", "ok": True}]
    # Failed first, then (usually in the same commit) claimed again, being due at once.
    tasks = answer["tasks"] or claim(server, q, max=10)
    assert [t["id"] for t in tasks] == ["o:retry"]
    fresh = tasks[0]
    assert fresh["attempt"] == 3

    # Malformed failures refuse the whole call, naming the entry's member.
    call(server, "ackMany", body={"acks": [{"id": "o:retry", "token": fresh["token"],
                                            "retry_in_ms": 5}]},
         expect=400, field="acks[0].retry_in_ms", valid=False)
    call(server, "ackMany",
         body={"acks": [{"id": "o:retry", "token": fresh["token"], "error": 503}]},
         expect=400, field="acks[0].error", valid=False)
    call(server, "ackMany", body={"acks": [{"id": "o:retry", "token": fresh["token"], "error": "x",
                                            "retry_in_ms": -1}]},
         expect=400, field="acks[0].retry_in_ms", valid=False)
    call(server, "claimTasks", params={"queue": q},
         body={"acks": [{"id": "o:retry", "token": fresh["token"], "retry_in_ms": 5}]},
         expect=400, field="acks[0].retry_in_ms", valid=False)
    still = call(server, "getTask", params={"id": "o:retry"}, expect=200).json()
    assert still["state"] == "running", "a refused call changed nothing"
    call(server, "ackMany", body={"acks": [{"id": "o:retry", "token": fresh["token"]}]}, expect=200)


# --- queues --------------------------------------------------------------------------------------


def test_queues(server):
    q = "settings"
    enqueue(server, q, delay_ms=3600000)
    listed = call(server, "listQueues", expect=200).json()["queues"]
    assert q in [x["name"] for x in listed]
    got = call(server, "getQueue", params={"queue": q}, expect=200).json()
    assert got["counts"]["scheduled"] == 1 and got["concurrency"] is None
    call(server, "getQueue", params={"queue": "no-such-queue"}, expect=404, code="not_found")
    call(server, "getQueue", params={"queue": "bad queue"}, expect=400, field="queue", valid=False)

    settings = {
        "concurrency": 4,
        "max_in_flight_per_key": 2,
        "max_pending_per_key": 100,
        "max_attempts": 5,
        "backoff": {"base_ms": 1000, "cap_ms": 60000},
        "retention_ms": 3600000,
        "rate_limit": {"count": 100, "period_ms": 1000},
    }
    configured = call(server, "configureQueue", params={"queue": q}, body=settings,
                      expect=200).json()
    for name, value in settings.items():
        assert configured[name] == value, name
    assert configured["max_in_flight"] == 4
    reset = call(server, "configureQueue", params={"queue": q},
                 body={"rate_limit": None, "backoff": None, "max_in_flight": 8}, expect=200).json()
    assert (reset["rate_limit"], reset["backoff"], reset["concurrency"]) == (None, None, 8)
    call(server, "configureQueue", params={"queue": q}, body={"backoff": {"base_ms": 2000}},
         expect=200)

    call(server, "configureQueue", params={"queue": q}, body={"concurrency": 0}, expect=400,
         field="concurrency", valid=False)
    call(server, "configureQueue", params={"queue": q}, body={"retention": 5}, expect=400,
         field="retention", valid=False)
    call(server, "configureQueue", params={"queue": q}, body={"rate_limit": {"count": 1}},
         expect=400, field="rate_limit.period_ms", valid=False)
    call(server, "configureQueue", params={"queue": q},
         body={"concurrency": 2, "max_in_flight": 3}, expect=400, field="max_in_flight", valid=None)
    call(server, "configureQueue", params={"queue": q}, body=Raw(""), expect=400, field="body",
         valid=False)

    paused = call(server, "pauseQueue", params={"queue": q}, expect=200).json()
    assert paused["paused"] is True
    call(server, "pauseQueue", params={"queue": q}, body={"really": True}, expect=400,
         field="really", valid=False)
    resumed = call(server, "resumeQueue", params={"queue": q}, body={}, expect=200).json()
    assert resumed["paused"] is False


# --- schedules -----------------------------------------------------------------------------------


def test_schedules(server):
    q = "maintenance"
    cron = call(server, "createSchedule", body={
        "name": "purge", "queue": q, "cron": "0 0 3 * * *", "tz": "Asia/Seoul",
        "payload": {"days": 30}, "misfire": "run_all", "max_catchup": 5, "overlap": "queue_one",
        "dst_gap": "skip", "dst_repeat": "twice", "priority": 1, "max_attempts": 3,
    }, expect=201).json()
    assert (cron["tz"], cron["next_task_id"].startswith("purge@")) == ("Asia/Seoul", True)
    call(server, "createSchedule", body={
        "name": "refresh", "queue": q, "every_ms": 3600000, "start": "2026-01-01T00:00:00Z",
    }, expect=201)
    # A target (in a queue of its own: chronoqd delivers that queue's tasks itself).
    hooked = call(server, "createSchedule", body={
        "name": "notify", "queue": "schedule-hooks", "cron": "@daily",
        "target": {"url": "http://127.0.0.1:9/notify", "method": "PUT", "timeout_ms": 2000},
    }, expect=201).json()
    assert hooked["target"] == {"url": "http://127.0.0.1:9/notify", "method": "PUT",
                                "headers": {}, "timeout_ms": 2000}
    fixed = call(server, "createSchedule", body={"name": "drain", "queue": q,
                                                 "fixed_delay_ms": 3600000}, expect=201).json()
    assert fixed["start"] is None

    call(server, "createSchedule", body={"name": "purge", "queue": q, "every_ms": 1000}, expect=409,
         code="conflict")
    bad = [
        ({"name": "x", "queue": q, "cron": "* * * * *", "every_ms": 1000}, "cron", False),
        ({"name": "x", "queue": q}, "cron", False),
        ({"name": "x", "queue": q, "every_ms": 0}, "every_ms", False),
        ({"name": "x", "queue": q, "every_ms": 1000, "tz": "UTC"}, "tz", False),
        ({"name": "x", "queue": q, "every_ms": 1000, "payload": {"scheduled_for": 1}}, "payload",
         False),
        ({"name": "x", "queue": q, "every_ms": 1000, "payload": [1]}, "payload", False),
        ({"name": "_x", "queue": q, "every_ms": 1000}, "name", False),
        ({"name": "x", "queue": q, "every_ms": 1000, "misfire": "sometimes"}, "misfire", False),
        ({"name": "x", "queue": q, "every_ms": 1000, "colour": "red"}, "colour", False),
        ({"queue": q, "every_ms": 1000}, "name", False),
        ({"name": "x", "queue": q, "cron": "not a cron"}, "cron", None),
        ({"name": "x", "queue": q, "cron": "* * * * *", "tz": "Mars/Olympus"}, "tz", None),
    ]
    for body, field_name, valid in bad:
        call(server, "createSchedule", body=body, expect=400, code="invalid_argument",
             field=field_name, valid=valid)

    call(server, "getSchedule", params={"name": "purge"}, expect=200)
    call(server, "getSchedule", params={"name": "no-such"}, expect=404)
    page = call(server, "listSchedules", query={"queue": q, "limit": 2}, expect=200).json()
    assert [s["name"] for s in page["schedules"]] == ["drain", "purge"]
    rest = call(server, "listSchedules", query={"queue": q, "cursor": page["next_cursor"]},
                expect=200).json()
    assert ([s["name"] for s in rest["schedules"]], rest["next_cursor"]) == (["refresh"], None)
    call(server, "listSchedules", expect=200)
    call(server, "listSchedules", query={"limit": 0}, expect=400, field="limit", valid=False)
    call(server, "listSchedules", query={"state": "paused"}, expect=400, field="state", valid=False)

    nxt = call(server, "getNextOccurrences", params={"name": "purge"}, query={"count": 3},
               expect=200).json()["next"]
    assert len(nxt) == 3 and nxt == sorted(nxt)
    assert len(call(server, "getNextOccurrences", params={"name": "purge"}, expect=200)
               .json()["next"]) == 10
    assert len(call(server, "getNextOccurrences", params={"name": "drain"}, query={"count": 5},
                    expect=200).json()["next"]) == 1
    call(server, "getNextOccurrences", params={"name": "purge"}, query={"count": 0}, expect=400,
         field="count", valid=False)
    call(server, "getNextOccurrences", params={"name": "purge"}, query={"count": 1001}, expect=400,
         field="count", valid=False)
    call(server, "getNextOccurrences", params={"name": "no-such"}, expect=404)

    replaced = call(server, "putSchedule", params={"name": "refresh"},
                    body={"queue": q, "every_ms": 7200000}, expect=200).json()
    assert replaced["every_ms"] == 7200000
    call(server, "putSchedule", params={"name": "made-by-put"},
         body={"name": "made-by-put", "queue": q, "cron": "@daily"}, expect=200)
    call(server, "putSchedule", params={"name": "refresh"},
         body={"name": "other", "queue": q, "every_ms": 1000}, expect=400, field="name", valid=None)
    call(server, "putSchedule", params={"name": "refresh"}, body={"every_ms": 1000}, expect=400,
         field="queue", valid=False)

    paused = call(server, "pauseSchedule", params={"name": "purge"}, expect=200).json()
    assert (paused["paused"], paused["next_task_id"]) == (True, None)
    resumed = call(server, "resumeSchedule", params={"name": "purge"}, body={}, expect=200).json()
    assert resumed["paused"] is False and resumed["next_task_id"]
    call(server, "pauseSchedule", params={"name": "no-such"}, expect=404)
    call(server, "resumeSchedule", params={"name": "no-such"}, expect=404)

    call(server, "deleteSchedule", params={"name": "made-by-put"}, expect=204)
    call(server, "deleteSchedule", params={"name": "made-by-put"}, expect=404)
    call(server, "deleteSchedule", params={"name": "drain"}, body={"why": 1}, expect=400,
         field="why", valid=False)


def test_schedule_last_run(server):
    q = "hourly"
    s = call(server, "createSchedule", body={"name": "hourly", "queue": q, "every_ms": 3600000,
                                             "payload": {"x": 1}}, expect=201).json()
    (lease,) = claim(server, q)  # the first occurrence is due at once
    assert lease["id"] == s["next_task_id"]
    assert lease["payload"] == {"x": 1, "scheduled_for": s["next_run"]}
    call(server, "ackTask", params={"id": lease["id"]}, body={"token": lease["token"]}, expect=200)
    after = call(server, "getSchedule", params={"name": "hourly"}, expect=200).json()
    assert after["runs"] == 1
    assert (after["last_run"]["task_id"], after["last_run"]["state"]) == (lease["id"], "succeeded")


# --- locks ---------------------------------------------------------------------------------------


def test_locks(server):
    key = "invoice:42/a"
    free = call(server, "getLock", params={"key": key}, expect=200).json()
    assert free == {"key": key, "held": False, "owner": None, "token": None, "expires_at": None,
                    "waiters": 0}
    grant = call(server, "acquireLock", params={"key": key},
                 body={"wait_ms": 0, "lease_ms": 30000, "owner": "worker-3"}, expect=200).json()
    assert grant["key"] == key
    held = call(server, "getLock", params={"key": key}, expect=200).json()
    assert (held["held"], held["owner"], held["token"]) == (True, "worker-3", grant["token"])
    assert held["expires_at"] == grant["expires_at"]
    listed = call(server, "listLocks", expect=200).json()
    assert held in listed["locks"]
    call(server, "listLocks", query={"limit": "0"}, expect=400, field="limit", valid=False)
    call(server, "acquireLock", params={"key": key}, body={"wait_ms": 0, "lease_ms": 1000},
         expect=409, code="lock_wait_timeout", field="wait_ms")
    extended = call(server, "extendLock", params={"key": key},
                    body={"token": grant["token"], "lease_ms": 60000}, expect=200).json()
    assert extended["token"] == grant["token"]
    call(server, "extendLock", params={"key": key}, body={"token": grant["token"] + 1000,
                                                          "lease_ms": 1000},
         expect=409, code="stale_token", field="token")

    # A waiter: it gets the lock once the holder releases it.
    waited = {}

    def wait_for_lock():
        try:
            waited["resp"] = call(server, "acquireLock", params={"key": key},
                                  body={"wait_ms": 20000, "lease_ms": 30000},
                                  timeout=HTTP_TIMEOUT_S + 20)
        except BaseException as e:  # re-raised below, on the test's thread
            waited["error"] = e

    waiter = threading.Thread(target=wait_for_lock)
    waiter.start()
    try:
        wait_for("the second acquisition to wait for the lock",
                 lambda: call(server, "getLock", params={"key": key}).json()["waiters"] == 1)
        call(server, "releaseLock", params={"key": key}, body={"token": grant["token"]}, expect=200)
    finally:
        waiter.join(HTTP_TIMEOUT_S + 30)
    assert not waiter.is_alive(), "the waiting acquisition never answered"
    if "error" in waited:
        raise waited["error"]
    second = waited["resp"].json()
    assert waited["resp"].status == 200 and second["token"] > grant["token"]
    call(server, "releaseLock", params={"key": key}, body={"token": grant["token"]}, expect=409,
         code="stale_token", field="token")
    call(server, "releaseLock", params={"key": key}, body={"token": second["token"]}, expect=200)

    call(server, "acquireLock", params={"key": key}, body={"wait_ms": 0}, expect=400,
         field="lease_ms", valid=False)
    call(server, "acquireLock", params={"key": key}, body={"wait_ms": 3600001, "lease_ms": 1},
         expect=400, field="wait_ms", valid=False)
    call(server, "acquireLock", params={"key": key},
         body={"wait_ms": 0, "lease_ms": 1, "owner": "x" * 201}, expect=400, field="owner",
         valid=False)
    call(server, "releaseLock", params={"key": key}, body={}, expect=400, field="token",
         valid=False)
    call(server, "extendLock", params={"key": key}, body={"token": 1}, expect=400, field="lease_ms",
         valid=False)
    call(server, "getLock", params={"key": Raw("%zz")}, expect=400, field="key", valid=False)


# --- operations ----------------------------------------------------------------------------------


def test_health_version_metrics(server):
    assert call(server, "getHealth", expect=200).json() == {"status": "ok", "store": "up"}
    assert call(server, "getVersion", expect=200).json()["version"]
    text = call(server, "getMetrics", expect=200).body.decode()
    families = OPS["getMetrics"].spec["x-metric-families"]
    for name, kind in families.items():
        assert f"# TYPE {name} {kind}\n" in text, f"/metrics has no {kind} {name}"
    exposed = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    assert exposed <= set(families), f"/metrics families not in the spec: {exposed - set(families)}"


def test_stats_history(server):
    history = call(server, "getStatsHistory", expect=200).json()
    assert history["interval_s"] == 10 and isinstance(history["samples"], list)


def test_cron_preview(server):
    runs = call(server, "getCronNext", query={"cron": "0 0 3 * * *", "tz": "Asia/Seoul"},
                expect=200).json()["next"]
    assert len(runs) == 5 and all(r.endswith("T18:00:00.000Z") for r in runs)
    call(server, "getCronNext", query={"cron": "0 0 33 * * *"}, expect=400, field="cron")


def test_dashboard(server):
    """/ redirects to /ui/, whose files come with their types and a Content-Security-Policy, and
    need no token."""
    root = call(server, "getRoot", token=False, expect=302)
    assert root.headers["location"] == "/ui/"
    page = call(server, "getDashboard", token=False, expect=200)
    assert b"<title>chronoq</title>" in page.body
    assert "script-src 'self'" in page.headers["content-security-policy"]
    for name, kind in (("index.html", "text/html"), ("app.js", "text/javascript"),
                       ("style.css", "text/css")):
        resp = call(server, "getDashboardFile", params={"file": name}, token=False, expect=200)
        assert resp.content_type.startswith(kind + ";"), f"{name}: {resp.describe()}"
    call(server, "getDashboardFile", params={"file": "nothing.js"}, token=False, expect=404,
         code="not_found")


def test_openapi_yaml_is_served(server):
    """GET /v1/openapi.yaml serves docs/openapi.yaml as built in. Fails until chronoqd is built
    with the route table that serves it (and after any later edit of the spec, until rebuilt)."""
    resp = call(server, "getOpenApi")
    assert resp.status == 200, f"GET /v1/openapi.yaml: {resp.describe()}"
    assert resp.body == SPEC_FILE.read_bytes(), (
        "chronoqd serves a different docs/openapi.yaml than this checkout's: rebuild chronoqd"
    )


# --- the test clock ------------------------------------------------------------------------------


def test_test_clock(server, clocked):
    """Time moves only forward and only when told; a lease lapses when it passes; a chronoqd on
    real time has no test clock."""
    start = call(clocked, "getTestClock", expect=200).json()
    enqueue(clocked, "clocked", id="tc:1", backoff={"base_ms": 1000, "cap_ms": 1000})
    [lease] = claim(clocked, "clocked", lease_ms=10000)
    waits = call(clocked, "getTestClock", expect=200).json()["waits"]
    assert lease["lease_until"] in waits, (lease, waits)
    moved = call(clocked, "moveTestClock", body={"advance_ms": 10000}, expect=200).json()
    assert moved["now"] == lease["lease_until"] > start["now"]
    assert call(clocked, "getTask", params={"id": "tc:1"}, expect=200).json()["state"] != "running"
    call(clocked, "moveTestClock", body={"now": moved["now"]}, expect=200)  # standing still is fine
    call(clocked, "moveTestClock", body={"now": start["now"]}, expect=400, field="now")
    call(clocked, "moveTestClock", body={"advance_ms": -1}, expect=400, field="advance_ms",
         valid=False)
    call(clocked, "moveTestClock", body={}, expect=400, field="advance_ms")
    assert call(clocked, "getTestClock", expect=200).json()["now"] == moved["now"]
    for op_id, body in (("getTestClock", NO_BODY), ("moveTestClock", {"advance_ms": 1})):
        resp = call(server, op_id, body=body, expect=404, code="not_found")
        assert "--test-clock" in resp.json()["error"]["message"], resp.describe()


# --- cluster mode --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(workdir, server):
    """Two chronoqd --cluster nodes on a fresh PostgreSQL database, the first one leading; None
    without CHRONOQ_TEST_PG."""
    if not PG_CONNINFO_FILE:
        yield None
        return
    conninfo = Path(PG_CONNINFO_FILE).read_text().strip()
    assert conninfo, f"{PG_CONNINFO_FILE} (CHRONOQ_TEST_PG) is empty"
    psql = shutil.which("psql")
    if psql is None:
        pytest.fail("CHRONOQ_TEST_PG is set but psql (to create the test's database) is not found")
    db = f"chronoq_openapi_{os.getpid()}"

    def admin(sql):
        subprocess.run([psql, conninfo, "-v", "ON_ERROR_STOP=1", "-qc", sql], check=True,
                       timeout=60, capture_output=True)

    admin(f"CREATE DATABASE {db} TEMPLATE template0 ENCODING 'UTF8'")
    nodes = []
    try:
        token_file = workdir / "token"
        for node_id in ("a", "b"):
            nodes.append(Chronoqd(
                ["--cluster", "--node-id", node_id, "--store", f"{conninfo} dbname={db}",
                 "--token-file", str(token_file), "--heartbeat-ms", "100", "--lease-ms", "1000"],
                workdir, f"node-{node_id}", server.token))
            if node_id == "a":
                wait_for("node a to lead", lambda: nodes[0].request("GET", "/healthz").json()
                         .get("role") == "leader")
        wait_for("node b to stand by behind a",
                 lambda: nodes[1].request("GET", "/healthz").json().get("leader"))
        yield nodes
    finally:
        problems = []
        for n in reversed(nodes):
            try:
                n.stop()
            except pytest.fail.Exception as e:
                problems.append(str(e))
        admin(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        if problems:
            pytest.fail("; ".join(problems))


def test_cluster_endpoints(server, cluster):
    if cluster is None:
        # Not a cluster: a single node has no /v1/cluster. The operation is covered by this
        # absence (set CHRONOQ_TEST_PG to exercise it on real nodes).
        resp = call(server, "getCluster", expect=404, code="not_found")
        assert resp.json()["error"]["message"] == "no endpoint at /v1/cluster"
        return
    leader, standby = cluster
    for node, role in ((leader, "leader"), (standby, "standby")):
        view = call(node, "getCluster", expect=200).json()
        assert (view["node"], view["role"], view["leader"]["node_id"]) == (
            "a" if node is leader else "b", role, "a")
        health = call(node, "getHealth", token=False, expect=200).json()
        assert health["role"] == role
    metrics = OPS["getMetrics"].spec
    cluster_families = metrics["x-cluster-metric-families"]
    lead_text = call(leader, "getMetrics", expect=200).body.decode()
    for name, kind in {**metrics["x-metric-families"], **cluster_families}.items():
        assert f"# TYPE {name} {kind}\n" in lead_text, f"the leader's /metrics has no {name}"
    standby_text = call(standby, "getMetrics", expect=200).body.decode()
    assert set(re.findall(r"^# TYPE (\S+) ", standby_text, re.M)) == set(cluster_families)
    # A call through the standby is forwarded to the leader.
    t = call(standby, "createTask", body={"queue": "clustered", "id": "c:1"}, expect=201).json()
    assert call(leader, "getTask", params={"id": "c:1"}, expect=200).json() == t


def test_cluster_other_methods_answer_405(server, cluster):
    if cluster is None:
        # Covered by absence, as in test_cluster_endpoints: a single node routes no /v1/cluster.
        resp = server.request("POST", "/v1/cluster", b"{}")
        assert resp.status == 404, resp.describe()
        return
    method_not_allowed = {"405": SPEC["components"]["responses"]["MethodNotAllowed"]}
    for node in cluster:
        resp = node.request("POST", "/v1/cluster", b"{}")
        check_response("POST /v1/cluster", method_not_allowed, resp)
        assert resp.headers["allow"] == "GET"


# --- coverage (keep last: it reads what the tests above did) -------------------------------------


def test_every_operation_has_a_validated_success():
    missing = []
    for op in OPS.values():
        if op.op_id in OWN_TEST:
            continue  # its own test (OWN_TEST) fails unless it validated an exchange
        statuses = EXCHANGES.get(op.op_id, [])
        if op.op_id in CLUSTER_ONLY and not PG_CONNINFO_FILE:
            if 404 not in statuses:
                missing.append(f"{op.op_id} (its absence from a single node was not checked)")
            continue
        if not any(200 <= s < 400 for s in statuses):  # a success, or GET /'s redirect
            missing.append(f"{op.op_id} ({op.method} {op.path}; statuses seen: {statuses})")
    assert not missing, (
        "operations without a validated successful exchange (run the whole module; add an "
        "exchange for each new operation):\n  " + "\n  ".join(missing)
    )
