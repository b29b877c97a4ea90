"""A stdio tool server written with the official MCP SDK (MCPServer, FastMCP's successor),
started and supervised by sluice in test_mcp.py."""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdk-tools")


@server.tool()
def multiply(a: int, b: int) -> int:
    """a × b"""
    return a * b


@server.tool()
def shout(text: str) -> str:
    """upper-case text"""
    return text.upper()


@server.tool()
def secret_tool() -> str:
    """a tool keys are not given"""
    return "classified"


@server.tool()
async def count(n: int, ctx: Context) -> str:
    """count to n, reporting each step as progress and logging the end"""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
    await ctx.info(f"counted to {n}")
    return f"counted {n}"


@server.prompt()
def review(code: str) -> str:
    """ask for a review"""
    return f"Please review: {code}"


@server.resource("notes://today")
def today() -> str:
    """today's note"""
    return "ship the MCP gateway"


if __name__ == "__main__":
    server.run("stdio")
