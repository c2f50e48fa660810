"""MCP endpoints driven by the official Python SDK (PyPI `mcp`) over Streamable HTTP
and the legacy HTTP+SSE transport.

The same behaviour as end2end/tests/mcp.test.mjs (the TypeScript SDK), from the
other official client. scripts/e2e.sh starts a fresh release server and exports
TOOLSHED_URL and TOOLSHED_TOKEN; run by hand with
`"$TOOLS/venv/bin/python" -m pytest -q end2end/python`.

Each client test runs twice: `auto` is what the SDK does by default (it probes
`server/discover` and uses the 2026-07-28 protocol if the server offers it, else
falls back to the initialize handshake); `legacy` forces the initialize handshake
that the 2025-era clients in the field use.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from typing import Any, Literal

import httpx2
import mcp_types
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

BASE = os.environ.get("TOOLSHED_URL", "").rstrip("/")
TOKEN = os.environ.get("TOOLSHED_TOKEN", "")
# Another replica on the same database, when there is one (scripts/e2e-replicas.sh).
REPLICA = os.environ.get("TOOLSHED_REPLICA_URL", BASE).rstrip("/")
HANDSHAKE_VERSION = "2025-06-18"

pytestmark = pytest.mark.skipif(
    not (BASE and TOKEN), reason="needs a running server: TOOLSHED_URL and TOOLSHED_TOKEN (scripts/e2e.sh sets them)"
)
protocol_modes = pytest.mark.parametrize("mode", ["auto", "legacy"])


def auth(token: str | None = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@asynccontextmanager
async def connect(
    path: str,
    *,
    base: str = BASE,
    token: str | None = TOKEN,
    mode: str = "auto",
    responses: list[httpx2.Response] | None = None,
    **options,
) -> AsyncIterator[Client]:
    """A connected SDK client for `path` (`options` go to `Client`, e.g. an
    elicitation callback); every HTTP response it gets is appended to `responses`."""

    async def remember(response: httpx2.Response) -> None:
        if responses is not None:
            responses.append(response)

    async with httpx2.AsyncClient(
        headers=auth(token), timeout=httpx2.Timeout(10.0), event_hooks={"response": [remember]}
    ) as http:
        transport = streamable_http_client(f"{base}{path}", http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=10, **options) as client:
            yield client


class CreateTaskResult(mcp_types.Result):
    """A call answered with a task (the tasks extension, `resultType: "task"`)."""

    result_type: Literal["task"]
    task_id: str
    status: str
    poll_interval_ms: int | None = None


class GetTaskParams(mcp_types.RequestParams):
    task_id: str


class GetTaskRequest(mcp_types.Request[GetTaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class GetTaskResult(mcp_types.Result):
    task_id: str
    status: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Tasks(ClientExtension):
    """The tasks extension as an application adds it to SDK 2.3, which ships
    none: a call answered with a task is polled with `tasks/get` until it ends,
    and the caller gets its result as from any call."""

    identifier = "io.modelcontextprotocol/tasks"

    def __init__(self) -> None:
        self.created: list[str] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve)]

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> mcp_types.CallToolResult:
        self.created.append(created.task_id)
        while True:
            got = await ctx.session.send_request(GetTaskRequest(params=GetTaskParams(task_id=created.task_id)), GetTaskResult)
            if got.status in ("completed", "failed", "cancelled"):
                break
            await asyncio.sleep((created.poll_interval_ms or 500) / 1000)
        assert got.status == "completed", got
        return mcp_types.CallToolResult.model_validate(got.result)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


def text_of(result) -> str:
    assert result.content, result
    assert result.content[0].type == "text", result.content[0]
    return result.content[0].text


@protocol_modes
def test_lists_and_calls_the_published_echo_tool(mode: str) -> None:
    async def scenario() -> None:
        async with connect("/mcp/tools/demo/echo", mode=mode) as client:
            assert client.server_info is not None
            assert client.server_info.name == "demo/echo"
            assert client.server_info.version == "v1"
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["echo"]
            assert tools[0].title == "Echo"
            assert tools[0].input_schema["required"] == ["text"]
            # What Toolshed vouches for: hints from the permissions label, and the label in _meta.
            hints = tools[0].annotations
            assert (hints.read_only_hint, hints.destructive_hint, hints.open_world_hint) == (True, False, False)
            assert tools[0].meta["toolshed/permissions"] == {"hosts": [], "secrets": [], "writes": False}
            result = await client.call_tool("echo", {"text": "hello from Python"})
            assert not result.is_error
            assert text_of(result) == "hello from Python"

    run(scenario())


def test_a_2026_client_listening_hears_that_the_tool_list_changed() -> None:
    """`subscriptions/listen` (2026-07-28): the SDK's listen() is acknowledged and
    wakes when the listing is republished (pushed through the publish API)."""
    publish_token = os.environ.get("TOOLSHED_PUBLISH_TOKEN", "")
    assert publish_token, "scripts/e2e.sh makes a token with the publish scope"
    name = f"listened_{os.getpid()}"

    def push(text: str) -> str:
        tool = {"name": name, "title": "Listened", "description": "Says what it is told.", "visibility": "everyone",
                "code": f"return {json.dumps(text)};", "arguments": []}
        res = httpx2.post(f"{BASE}/api/v1/tools", json=tool, headers=auth(publish_token), timeout=30)
        assert res.status_code == 200, res.text
        return res.json()["tool"]

    async def scenario() -> None:
        slug = push("first")
        async with connect(f"/mcp/tools/{slug}") as client:
            assert client.protocol_version == "2026-07-28"
            async with client.listen(tools_list_changed=True, prompts_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed
                assert not subscription.honored.prompts_list_changed, "no prompts change here"
                await asyncio.to_thread(push, "second")
                event = await anext(aiter(subscription))
                assert type(event).__name__ == "ToolsListChanged", event
            assert text_of(await client.call_tool(name, {})) == "second"

    run(scenario())


@protocol_modes
def test_a_tool_that_asks_twice_completes_with_the_persons_answers(mode: str) -> None:
    """`$input` in a tool: a 2026-07-28 client gets input-required results and
    calls again (the SDK does the rounds); a 2025 session is asked on its own
    stream. Either way the person's two answers reach the tool."""
    asked: list[str] = []

    async def answer(context, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        asked.append(params.message)
        field = next(iter(params.requested_schema["properties"]))
        return mcp_types.ElicitResult(action="accept", content={field: {"name": "Ada", "color": "green"}[field]})

    async def scenario() -> None:
        async with connect("/mcp/bundles/demo/conformance", mode=mode, elicitation_callback=answer) as client:
            result = await client.call_tool("test_input_required_result_multi_round", {})
            assert not result.is_error, result
            assert text_of(result) == "Ada likes green"

    run(scenario())
    assert asked == ["Step 1: What is your name?", "Step 2: What is your favorite color?"]


@protocol_modes
def test_a_bundle_serves_its_member_tools_at_one_endpoint(mode: str) -> None:
    async def scenario() -> None:
        async with connect("/mcp/bundles/demo/text_kit", mode=mode) as client:
            assert client.server_info is not None
            assert client.server_info.name == "demo/text_kit"
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["echo", "table", "word_stats"]
            assert text_of(await client.call_tool("echo", {"text": "through the bundle"})) == "through the bundle"
            stats = await client.call_tool("word_stats", {"text": "a b a"})
            assert stats.structured_content is not None and stats.structured_content["words"] == 3

    run(scenario())


@protocol_modes
def test_json_results_come_back_as_structured_content(mode: str) -> None:
    async def scenario() -> None:
        async with connect("/mcp/tools/demo/word_stats", mode=mode) as client:
            result = await client.call_tool("word_stats", {"text": "a b a"})
            assert not result.is_error
            expected = {"words": 3, "characters": 5, "top": [{"word": "a", "count": 2}, {"word": "b", "count": 1}]}
            assert result.structured_content == expected
            assert json.loads(text_of(result)) == expected

    run(scenario())


@protocol_modes
def test_a_list_result_comes_back_as_text_without_structured_content(mode: str) -> None:
    """Structured content is an object; the SDK refuses a result whose
    structuredContent is an array, so a tool returning a list sends it as text."""
    publish_token = os.environ.get("TOOLSHED_PUBLISH_TOKEN", "")
    assert publish_token, "scripts/e2e.sh makes a token with the publish scope"
    name = f"listing_{mode}_{os.getpid()}"
    tool = {"name": name, "visibility": "everyone", "code": "return [1, 2, 3];", "arguments": []}
    res = httpx2.post(f"{BASE}/api/v1/tools", json=tool, headers=auth(publish_token), timeout=30)
    assert res.status_code == 200, res.text

    async def scenario() -> None:
        async with connect(f"/mcp/tools/{res.json()['tool']}", mode=mode) as client:
            result = await client.call_tool(name, {})
            assert not result.is_error, result
            assert result.structured_content is None
            assert json.loads(text_of(result)) == [1, 2, 3]

    run(scenario())


@protocol_modes
def test_bad_arguments_are_a_tool_error_the_model_can_read(mode: str) -> None:
    async def scenario() -> None:
        async with connect("/mcp/tools/demo/echo", mode=mode) as client:
            result = await client.call_tool("echo", {"text": 42})
            assert result.is_error
            assert "Invalid arguments: `text`" in text_of(result)
            missing = await client.call_tool("echo", {})
            assert missing.is_error
            assert "Invalid arguments" in text_of(missing)

    run(scenario())


@protocol_modes
def test_an_unknown_tool_is_a_protocol_error(mode: str) -> None:
    async def scenario() -> None:
        async with connect("/mcp/tools/demo/echo", mode=mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("nope", {})
            assert caught.value.code == -32602
            assert "Unknown tool: nope" in str(caught.value)
            # The connection is still good after the error.
            assert text_of(await client.call_tool("echo", {"text": "still here"})) == "still here"

    run(scenario())


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, as anyio task groups raise them."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


@pytest.mark.parametrize(
    ("token", "reason"),
    [(None, "Missing API token"), ("tsk_not-a-real-token", "Invalid, expired or revoked API token")],
    ids=["no token", "wrong token"],
)
def test_missing_or_wrong_token_is_refused(token: str | None, reason: str) -> None:
    async def scenario() -> None:
        responses: list[httpx2.Response] = []
        # The SDK refuses to connect (an MCPError, inside anyio's exception groups)...
        with pytest.raises(Exception) as caught:
            async with connect("/mcp/tools/demo/echo", token=token, responses=responses):
                pass
        assert any(isinstance(e, MCPError) for e in _leaves(caught.value)), caught.value
        # ...because every HTTP answer it got was 401.
        statuses = [r.status_code for r in responses]
        assert statuses and set(statuses) == {401}, statuses

        # The same refusal as plain HTTP: status, reason, and a Bearer challenge.
        async with httpx2.AsyncClient(timeout=10.0) as http:
            res = await http.post(
                f"{BASE}/mcp/tools/demo/echo",
                headers={**auth(token), "Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
        assert res.status_code == 401
        assert reason in res.text
        assert "Bearer" in res.headers["www-authenticate"]

    run(scenario())


def test_an_unknown_listing_is_not_found() -> None:
    async def scenario() -> None:
        responses: list[httpx2.Response] = []
        with pytest.raises(Exception) as caught:
            async with connect("/mcp/tools/demo/no_such_tool", responses=responses):
                pass
        assert any(isinstance(e, MCPError) for e in _leaves(caught.value)), caught.value
        assert responses and {r.status_code for r in responses} == {404}
        async with httpx2.AsyncClient(timeout=10.0) as http:
            res = await http.post(
                f"{BASE}/mcp/tools/demo/no_such_tool",
                headers={**auth(), "Accept": "application/json, text/event-stream"},
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            )
        assert res.status_code == 404
        assert "No such listing" in res.text

    run(scenario())


def test_closing_the_session_ends_it() -> None:
    """Stateful servers give a session id on initialize: closing the SDK client sends
    DELETE, and the id is unknown (404) afterwards. A stateless server gives none and
    answers DELETE with 405 Method Not Allowed (Streamable HTTP, "Session Management")."""

    async def scenario() -> None:
        url = f"{BASE}/mcp/tools/demo/echo"
        responses: list[httpx2.Response] = []
        async with connect("/mcp/tools/demo/echo", mode="legacy", responses=responses) as client:
            assert text_of(await client.call_tool("echo", {"text": "before"})) == "before"
        session_ids = {r.headers["mcp-session-id"] for r in responses if "mcp-session-id" in r.headers}
        deletes = [r for r in responses if r.request.method == "DELETE"]
        headers = {
            **auth(),
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": HANDSHAKE_VERSION,
        }
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "after"}}}
        async with httpx2.AsyncClient(timeout=10.0) as http:
            if session_ids:
                assert len(session_ids) == 1, session_ids
                (session_id,) = session_ids
                # The SDK ended the session when the client closed (the spec names no
                # success status: rmcp answers 202, the TypeScript SDK 200).
                assert len(deletes) == 1 and deletes[0].is_success, [(r.request.method, r.status_code) for r in responses]
                res = await http.post(url, headers={**headers, "Mcp-Session-Id": session_id}, json=call)
                assert res.status_code == 404, (res.status_code, res.text)
                stream = await http.get(url, headers={**headers, "Mcp-Session-Id": session_id})
                assert stream.status_code == 404, (stream.status_code, stream.text)
            else:
                # Stateless: nothing to end, so the SDK sent no DELETE; the server refuses one.
                assert deletes == []
                res = await http.delete(url, headers=headers)
                assert res.status_code == 405, (res.status_code, res.text)
                assert "POST" in res.headers.get("allow", "")

    run(scenario())


def test_legacy_sse_clients_list_and_call_tools() -> None:
    """The SDK's client for the HTTP+SSE transport (protocol 2024-11-05 era)."""

    async def scenario() -> None:
        transport = sse_client(f"{BASE}/mcp/tools/demo/echo/sse", headers=auth())
        async with Client(transport, mode="legacy", read_timeout_seconds=10) as client:
            assert client.server_info is not None
            assert client.server_info.name == "demo/echo"
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools] == ["echo"]
            result = await client.call_tool("echo", {"text": "over the legacy transport"})
            assert not result.is_error
            assert text_of(result) == "over the legacy transport"

    run(scenario())


def _browser(base: str = BASE) -> httpx2.AsyncClient:
    """An HTTP client that posts the pages' forms as a browser on `base` does."""
    return httpx2.AsyncClient(base_url=base, headers={"Origin": base, "Accept": "application/json"}, timeout=10.0)


@asynccontextmanager
async def _as_admin() -> AsyncIterator[httpx2.AsyncClient]:
    """The administrator signed in with the sign-in form."""
    password = os.environ.get("TOOLSHED_ADMIN_PASSWORD", "")
    assert password, "scripts/e2e.sh exports TOOLSHED_ADMIN_PASSWORD"
    async with _browser() as http:
        login = await http.post("/api/login", data={"username": "admin", "password": password})
        assert login.status_code in (200, 302, 303), login.text
        yield http


async def _set_code_mode(mode: str) -> None:
    """Sets the demo bundle's code mode as the administrator, as the editor's form does."""
    async with _as_admin() as http:
        detail = await http.post("/api/bundles/detail", data={"department": "demo", "name": "text_kit"})
        assert detail.status_code == 200, detail.text
        bundle = detail.json()["listing"]["id"]
        changed = await http.post("/api/bundles/code_mode", data={"bundle": str(bundle), "mode": mode})
        assert changed.status_code == 200, changed.text
        assert changed.json()["code_mode"] == mode


@protocol_modes
def test_code_mode_runs_model_code_that_calls_two_tools(mode: str) -> None:
    async def scenario() -> None:
        await _set_code_mode("instead")
        try:
            async with connect("/mcp/bundles/demo/text_kit", mode=mode) as client:
                tools = (await client.list_tools()).tools
                assert [t.name for t in tools] == ["run_code"]
                assert "await tools.name(input)" in (tools[0].description or "")
                code = (
                    "const text = await tools.echo({ text: 'one two two' });\n"
                    "const stats = await tools.word_stats({ text, top: 1 });\n"
                    "console.log(text);\n"
                    "console.log(stats.top[0].word, stats.words);"
                )
                result = await client.call_tool("run_code", {"code": code})
                assert not result.is_error, result
                assert text_of(result) == "one two two\ntwo 3"
                forever = await client.call_tool("run_code", {"code": "for (;;) {}"})
                assert forever.is_error
                assert text_of(forever).startswith("Timed out after ")
        finally:
            await _set_code_mode("off")

    run(scenario())


@protocol_modes
def test_the_personal_endpoint_finds_describes_calls_and_runs_code_over_any_tool(mode: str) -> None:
    async def scenario() -> None:
        async with connect("/mcp/me", mode=mode) as client:
            assert client.server_info is not None
            assert client.server_info.name == "toolshed-admin"
            names = [t.name for t in (await client.list_tools()).tools]
            assert names[:4] == ["search_tools", "describe_tool", "call_tool", "run_code"]
            found = await client.call_tool("search_tools", {"query": "convert a length from feet to metres"})
            assert found.structured_content is not None
            assert found.structured_content["tools"][0]["name"] == "demo/convert_units"
            described = await client.call_tool("describe_tool", {"name": "demo/convert_units"})
            assert described.structured_content is not None
            assert described.structured_content["inputSchema"]["required"] == ["value", "from", "to"]
            args = {"value": 1, "from": "km", "to": "m"}
            converted = await client.call_tool("call_tool", {"name": "demo/convert_units", "arguments": args})
            assert text_of(converted) == "1 km = 1000 m"
            code = "return await tools['demo/convert_units']({value: 3, from: 'ft', to: 'in'});"
            assert text_of(await client.call_tool("run_code", {"code": code})) == "3 ft = 36 in"
            hidden = await client.call_tool("call_tool", {"name": "nobody/nothing"})
            assert hidden.is_error and "There is no tool named" in text_of(hidden)

    run(scenario())


def test_a_task_outlives_the_clients_request_timeout() -> None:
    """A long call of a tool that may run as a task: the client declares the
    tasks extension, is answered with a task at once, and polls it to its
    result, though the call takes longer than the client waits for any answer."""

    async def go() -> None:
        tasks = Tasks()
        async with httpx2.AsyncClient(headers=auth(), timeout=httpx2.Timeout(10.0)) as http:
            for extensions in ([tasks], []):
                transport = streamable_http_client(f"{BASE}/mcp/bundles/demo/conformance", http_client=http)
                async with Client(transport, read_timeout_seconds=2, extensions=extensions) as client:
                    assert client.protocol_version == "2026-07-28"
                    call = client.call_tool("slow_compute", {"seconds": 4, "label": "the report"})
                    if not extensions:
                        # Without the extension the call runs in the request, and the client gives up on it.
                        with pytest.raises(MCPError, match="[Tt]imed out|[Tt]imeout"):
                            await call
                        continue
                    started = asyncio.get_running_loop().time()
                    assert text_of(await call) == "Computed the report in 4 s."
                    assert asyncio.get_running_loop().time() - started >= 4
                    assert len(tasks.created) == 1

    run(go())


async def _department_requiring_approval(department: str) -> httpx2.AsyncClient:
    """`department`, whose maintainer has published `restart` (a tool that
    writes: not held to reading) and requires approval for such calls; the
    maintainer's signed-in browser session, for deciding as the inbox's form does."""
    async with _as_admin() as admin:
        await admin.post("/api/admin/departments/create", data={"name": department, "title": department})
        invite = await admin.post("/api/people/invite", data={"department": department, "role": "maintainer", "days": "7"})
        assert invite.status_code == 200, invite.text
        token = invite.json()["url"].split("invite=")[1]
    # The maintainer's browser reaches another replica than the caller's client, where there is one.
    maintainer = _browser(REPLICA)
    secret = "a-long-enough-password"
    joined = await maintainer.post(
        "/api/register",
        data={"username": f"{department}-lead", "display_name": "Lead", "password": secret, "password_confirm": secret, "invite": token},
    )
    assert joined.status_code in (200, 302, 303), joined.text
    created = await maintainer.post(
        "/api/tools/create",
        data={"name": "restart", "title": "Restart", "description": "Restarts a service.", "tags": "", "visibility": "everyone"},
    )
    assert created.status_code in (200, 302, 303), created.text
    tool = (await maintainer.post("/api/tools/detail", data={"department": department, "name": "restart"})).json()["id"]
    args = [{"name": "service", "type": {"kind": "string"}, "description": "Which service", "required": True}]
    saved = await maintainer.post(
        "/api/tools/save_version",
        json={"tool": tool, "code": "return `Restarted ${$service}.`;", "args": args, "changelog": "v1"},
    )
    assert saved.status_code == 200, saved.text
    published = await maintainer.post("/api/tools/publish", data={"tool": str(tool), "version": str(saved.json())})
    assert published.status_code == 200, published.text
    required = await maintainer.post(
        "/api/approvals/settings/set", data={"department": department, "required": "writes", "approvers": ""}
    )
    assert required.status_code == 200, required.text
    return maintainer


@protocol_modes
def test_a_call_that_needs_approval_runs_once_a_maintainer_approves_it_in_the_browser(mode: str) -> None:
    """A call of a tool that writes, in a department that requires approval:
    the person's client is asked to wait (an input-required result in
    2026-07-28, an elicitation on the session in 2025); meanwhile a maintainer
    approves the request with the inbox's form, the person accepts, and the
    call runs with the arguments it was made with."""
    asked: list[str] = []

    async def scenario() -> None:
        maintainer = await _department_requiring_approval(f"ops-{mode}")

        async def wait_for_approval(context, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
            asked.append(params.message)
            request = params.message.split("Request ")[1].split()[0]
            if len(asked) == 1:
                # Accepted before anyone decided: asked again.
                return mcp_types.ElicitResult(action="accept", content={})
            inbox = (await maintainer.post("/api/approvals", data={})).json()["inbox"]
            waiting = next(a for a in inbox if a["id"] == request)
            assert json.loads(waiting["arguments"]) == {"service": "billing"}
            decided = await maintainer.post("/api/approvals/decide", data={"id": request, "decision": "approve", "note": ""})
            assert decided.status_code == 200, decided.text
            return mcp_types.ElicitResult(action="accept", content={})

        try:
            async with connect(f"/mcp/tools/ops-{mode}/restart", mode=mode, elicitation_callback=wait_for_approval) as client:
                result = await client.call_tool("restart", {"service": "billing"})
                assert not result.is_error, result
                assert text_of(result) == "Restarted billing."
        finally:
            await maintainer.aclose()

    run(scenario())
    assert len(asked) == 2 and all("needs approval" in m for m in asked), asked


def test_a_task_held_for_approval_completes_once_a_maintainer_approves_it_in_the_browser() -> None:
    """The same held call from a client that takes tasks: it is answered with
    a task at once, which waits (saying for what) while the maintainer
    decides in the browser, then runs and completes."""

    async def scenario() -> None:
        maintainer = await _department_requiring_approval("ops-tasks")
        waited: list[str] = []

        async def approve_when_asked() -> None:
            while True:
                inbox = (await maintainer.post("/api/approvals", data={})).json()["inbox"]
                waiting = [a for a in inbox if a["status"] == "pending"]
                if waiting:
                    waited.append(waiting[0]["arguments"])
                    decided = await maintainer.post(
                        "/api/approvals/decide", data={"id": waiting[0]["id"], "decision": "approve", "note": ""}
                    )
                    assert decided.status_code == 200, decided.text
                    return
                await asyncio.sleep(0.1)

        tasks = Tasks()
        try:
            async with httpx2.AsyncClient(headers=auth(), timeout=httpx2.Timeout(10.0)) as http:
                transport = streamable_http_client(f"{BASE}/mcp/tools/ops-tasks/restart", http_client=http)
                async with Client(transport, read_timeout_seconds=10, extensions=[tasks]) as client:
                    approver = asyncio.create_task(approve_when_asked())
                    result = await client.call_tool("restart", {"service": "search"})
                    await approver
                    assert text_of(result) == "Restarted search."
        finally:
            await maintainer.aclose()
        assert len(tasks.created) == 1
        assert [json.loads(w) for w in waited] == [{"service": "search"}]

    run(scenario())


ISSUER = os.environ.get("TOOLSHED_TEST_ISSUER", "").rstrip("/")


async def _connect_in_browser(browser: httpx2.AsyncClient, link: str, login: str) -> None:
    """Follows a connect link as a signed-in browser: the provider's sign-in
    and consent forms (any login name is accepted), then back to the Account page."""
    page = await browser.get(link, follow_redirects=True)
    for _ in range(3):
        if not str(page.url).startswith(ISSUER):
            break
        form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page.text))
        if 'name="login"' in page.text:
            form |= {"login": login, "password": "any password"}
        page = await browser.post(str(page.url), data=form, follow_redirects=True)
    assert "/account?connected=" in str(page.url), (page.url, page.status_code, page.text[:600])


@pytest.mark.skipif(not ISSUER, reason="needs the tests' OpenID provider (scripts/e2e.sh and scripts/e2e-replicas.sh start it)")
def test_connected_accounts_each_caller_gets_their_own_data_on_any_replica() -> None:
    """A tool that acts as its caller at the tests' OpenID provider (its
    userinfo endpoint answers each person with their own claims): someone
    who never connected gets the link; after connecting in the browser the
    retry works, through either replica; two people each get their own; a
    disconnect stops the next call; a client that opens URLs is sent to
    connect within the call, in either protocol, and the call completes."""
    suffix = os.urandom(3).hex()
    app, name = f"people_{suffix}", f"who_am_i_{suffix}"
    host = ISSUER.split("://")[1]

    async def scenario() -> None:
        async with _as_admin() as admin:
            registered = await admin.post(
                "/api/apps/register",
                data={"name": app, "department": "", "issuer": ISSUER, "authorize_url": "", "token_url": "", "revoke_url": "",
                      "client_id": "people-app", "client_secret": os.environ["TOOLSHED_TEST_APP_SECRET"],
                      "scopes": "openid profile", "hosts": host},
            )
            assert registered.status_code == 200, registered.text
            me = (await admin.post("/api/me", data={})).json()
            created = await admin.post(
                "/api/tools/create", data={"name": name, "title": "Who am I", "description": "Who you are.", "tags": "", "visibility": "everyone"}
            )
            assert created.status_code in (200, 302, 303), created.text
            tool = (await admin.post("/api/tools/detail", data={"department": me["department"], "name": name})).json()["id"]
            settings = {"tool": str(tool), "title": "Who am I", "description": "Who you are.", "tags": "", "visibility": "everyone",
                        "timeout_ms": "5000", "memory_mib": "32", "fetch_allow": host, "read_only_hint": "true"}
            assert (await admin.post("/api/tools/settings", data=settings)).status_code == 200
            assert (await admin.post("/api/tools/accounts", data={"id": str(tool), "accounts": app})).json() == [app]
            code = f"const r = await $fetch('{ISSUER}/me', {{account: '{app}'}});\nreturn (await r.json()).sub;"
            saved = await admin.post("/api/tools/save_version", json={"tool": tool, "code": code, "args": [], "changelog": "v1"})
            assert saved.status_code == 200, saved.text
            assert (await admin.post("/api/tools/publish", data={"tool": str(tool), "version": str(saved.json())})).status_code == 200
            # A second person, with their own token.
            invite = await admin.post("/api/people/invite", data={"department": me["department"], "role": "member", "days": "7"})
            invitation = invite.json()["url"].split("invite=")[1]
        path = f"/mcp/tools/{me['department']}/{name}"
        people = {}
        for login in ("ada", "bob"):
            browser = _browser()
            secret = "a-long-enough-password"
            if login == "ada":
                signed_in = await browser.post("/api/login", data={"username": "admin", "password": os.environ["TOOLSHED_ADMIN_PASSWORD"]})
                token = TOKEN
            else:
                signed_in = await browser.post(
                    "/api/register",
                    data={"username": f"bob-{suffix}", "display_name": "Bob", "password": secret, "password_confirm": secret, "invite": invitation},
                )
                token = (await browser.post("/api/tokens/create", data={"name": "accounts", "expires_in_days": "1", "scope": ""})).json()
            assert signed_in.status_code in (200, 302, 303), signed_in.text
            people[login] = (browser, token)
        try:
            for login, (browser, token) in people.items():
                async with connect(path, token=token) as client:
                    first = await client.call_tool(name, {})
                    assert first.is_error, first
                    link = text_of(first).split("Open ")[1].split(" to connect")[0]
                    assert link == f"{BASE}/connect/{app}"
                await _connect_in_browser(browser, link, login)
                # The retry works, on either replica: the account lives in the database.
                for base in (BASE, REPLICA):
                    async with connect(path, base=base, token=token) as client:
                        assert text_of(await client.call_tool(name, {})) == login
            # Bob disconnects: his next call asks him to connect again; Ada's still works.
            bob_browser, bob_token = people["bob"]
            assert (await bob_browser.post("/api/apps/disconnect", data={"app": app})).status_code == 200
            async with connect(path, base=REPLICA, token=bob_token) as client:
                assert "to connect it" in text_of(await client.call_tool(name, {}))
            async with connect(path, token=TOKEN) as client:
                assert text_of(await client.call_tool(name, {})) == "ada"

            # A client that opens URLs: the call sends Bob to connect (URL-mode elicitation,
            # as a 2026 input-required result or on a 2025 session's stream), then completes.
            for mode in ("auto", "legacy"):
                opened: list[str] = []

                async def open_url(context, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
                    assert isinstance(params, mcp_types.ElicitRequestURLParams), params
                    opened.append(params.url)
                    await _connect_in_browser(bob_browser, params.url, "bob")
                    return mcp_types.ElicitResult(action="accept")

                # On the replica whose address the provider sends people back to (replicas
                # behind one address share it; here each has its own).
                async with connect(path, token=bob_token, mode=mode, elicitation_callback=open_url) as client:
                    result = await client.call_tool(name, {})
                    assert not result.is_error and text_of(result) == "bob", (mode, result)
                assert opened == [f"{BASE}/connect/{app}"], (mode, opened)
                assert (await bob_browser.post("/api/apps/disconnect", data={"app": app})).status_code == 200
        finally:
            for browser, _ in people.values():
                await browser.aclose()

    run(scenario())
