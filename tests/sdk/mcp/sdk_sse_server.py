"""The SDK tool server of sdk_server.py, served over the older HTTP+SSE transport
(`GET /sse`, messages POSTed to `/messages/`) on 127.0.0.1 and the port given, for
test_mcp_sse.py: sluice reaches it with `transport: sse`."""

import sys

from sdk_server import server

if __name__ == "__main__":
    server.run("sse", host="127.0.0.1", port=int(sys.argv[1]))
