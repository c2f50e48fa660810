"""OAuth for MCP clients with the official Python SDK (PyPI `mcp`): given only
the endpoint's URL, the SDK discovers Toolshed's authorization server from the
401, registers, and sends the person to the consent page, which a real browser
answers (Chromium, driven by end2end/fixtures/consent.mjs); then it calls a tool
with its token and refreshes it when asked to.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

BASE = os.environ.get("TOOLSHED_URL", "").rstrip("/")
ADMIN_PASSWORD = os.environ.get("TOOLSHED_ADMIN_PASSWORD", "")
REDIRECT = "http://127.0.0.1:33419/callback"
END2END = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    not (BASE and ADMIN_PASSWORD), reason="needs a running server: TOOLSHED_URL and TOOLSHED_ADMIN_PASSWORD (scripts/e2e.sh sets them)"
)


class MemoryStorage:
    """What a client keeps between runs (its registration and tokens), in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def oauth(endpoint: str, storage: MemoryStorage, browser_answers: list[str]) -> OAuthClientProvider:
    """The SDK's OAuth provider; "opening a browser" runs the consent fixture in Chromium."""

    async def open_browser(authorization_url: str) -> None:
        node = await asyncio.create_subprocess_exec(
            "node", "fixtures/consent.mjs", authorization_url, REDIRECT, cwd=END2END, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await node.communicate()
        assert node.returncode == 0, "the consent page was answered in the browser"
        browser_answers.append(out.decode().strip().splitlines()[-1])

    async def callback() -> AuthorizationCodeResult:
        query = parse_qs(urlparse(browser_answers[-1]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query["iss"][0])

    metadata = OAuthClientMetadata(
        client_name="Python agent",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(
        server_url=endpoint, client_metadata=metadata, storage=storage, redirect_handler=open_browser, callback_handler=callback
    )


def test_the_python_sdk_signs_in_with_oauth_and_calls_a_tool() -> None:
    endpoint = f"{BASE}/mcp/tools/demo/word_stats"
    storage = MemoryStorage()
    answers: list[str] = []

    async def scenario() -> None:
        auth = oauth(endpoint, storage, answers)
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(60.0)) as http:
            async with Client(streamable_http_client(endpoint, http_client=http), read_timeout_seconds=60) as client:
                result = await client.call_tool("word_stats", {"text": "a b a"})
                assert not result.is_error
                assert result.structured_content is not None and result.structured_content["words"] == 3
        assert len(answers) == 1 and "code=" in answers[0]
        assert storage.tokens is not None and storage.tokens.access_token.startswith("tsa_")
        assert storage.client is not None and storage.client.client_id.startswith("tsc_")

        # An hour later the access token has expired: the SDK refreshes it, without the browser.
        first_refresh = storage.tokens.refresh_token
        auth.context.token_expiry_time = time.time() - 1
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(60.0)) as http:
            async with Client(streamable_http_client(endpoint, http_client=http), read_timeout_seconds=60) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["word_stats"]
        assert len(answers) == 1, "no second visit to the consent page"
        assert storage.tokens.refresh_token != first_refresh, "the refresh token turned over"

    asyncio.run(asyncio.wait_for(scenario(), timeout=120))
