-- MCP tool calls are spend logs too (issue 18): `call_type` names what a row records
-- (LiteLLM's `call_mcp_tool` for a tool call; NULL for a model request, as every older row),
-- and `error` why a call failed or was refused. A tool call's model_group is the tool's name
-- as clients see it (`<server>-<tool>`), its deployment_id the server, its provider `mcp`.
ALTER TABLE spend_logs ADD COLUMN call_type TEXT;
ALTER TABLE spend_logs ADD COLUMN error TEXT;
