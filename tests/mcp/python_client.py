"""A thin MCP client on the official Python SDK, for the black-box test
tests/blackbox/mcp_python.rs (issue 18).

usage: python_client.py REQUEST_JSON

REQUEST_JSON is {"command": PATH, "args": [...], "calls": [[TOOL, {ARGS}], ...],
"timeout": SECONDS}. The client starts the server as COMMAND ARGS with this
process's environment, initializes, lists the tools, makes the calls in order
and prints ONE JSON document on stdout: the initialize result, the tool
names, and each call's result, all in their wire form (camelCase). It asserts
nothing: the Rust test does. The whole session is bounded by "timeout", so a
stuck server fails the test instead of hanging it.
"""

import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def wire(model):
    """A result as it crossed the wire: camelCase keys, no absent fields."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def session(request):
    server = StdioServerParameters(
        command=request["command"],
        args=request.get("args", []),
        env=dict(os.environ),
    )
    seen = {}
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as client:
            seen["initialize"] = wire(await client.initialize())
            tools = await client.list_tools()
            seen["tools"] = [tool.name for tool in tools.tools]
            seen["calls"] = []
            for name, arguments in request.get("calls", []):
                result = await client.call_tool(name, arguments)
                seen["calls"].append({"tool": name, "result": wire(result)})
    return seen


async def main():
    request = json.loads(sys.argv[1])
    with anyio.fail_after(request.get("timeout", 60)):
        seen = await session(request)
    json.dump(seen, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    anyio.run(main)
