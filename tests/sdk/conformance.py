"""Judges of what crosses sluice's edges, each built from a vendor's own machine-readable types.

Requests sluice sends upstream (as `sluice mock --record` kept them, `GET /mock/requests`):

- OpenAI chat completions, embeddings and responses (and Azure OpenAI's deployment paths):
  the `openai` SDK's request TypedDicts, validated by pydantic with unknown keys refused at
  every level.
- Anthropic Messages (`/v1/messages`; Vertex AI `:rawPredict`/`:streamRawPredict`; Bedrock
  `InvokeModel` with an Anthropic body): the `anthropic` SDK's `MessageCreateParams`
  TypedDicts, with the platform envelope as the SDK's own `AnthropicVertex` and
  `AnthropicBedrock` clients build it (no `model`; `anthropic_version`; Bedrock: no `stream`,
  `anthropic_beta` allowed).
- Gemini and Vertex AI Gemini `generateContent`/`streamGenerateContent`: `google-genai`'s
  pydantic types (which refuse unknown keys themselves) for each member of the body.
- Bedrock Converse/ConverseStream: botocore's `bedrock-runtime` service model, checked by
  botocore's own `ParamValidator` (plus the model's enum lists, which that validator skips).

Answers (sluice's to its clients, and the mock's to sluice): the SDKs' response models
(`ChatCompletion`, `ChatCompletionChunk`, `anthropic.types.Message`, the raw stream events,
`google.genai.types.GenerateContentResponse`, botocore's output shapes).

Every judge raises `Refusal` (an AssertionError) whose message lists each refusal as
`<what>: <location>: <message>`, stable enough to quote in an xfail reason.
"""

from __future__ import annotations

import base64
import binascii
import collections.abc
import functools
import io
import json
import os
import types
import typing
import urllib.parse
import warnings
from typing import Annotated, Any, Literal, Optional, Union

import pydantic
from pydantic import TypeAdapter, ValidationError
from typing_extensions import NotRequired, Required, TypedDict, is_typeddict



class Refusal(AssertionError):
    """A vendor's type refused a request or an answer."""

    def __init__(self, what: str, problems: list[str]):
        self.what = what
        self.problems = problems
        super().__init__("\n".join(f"{what}: {p}" for p in problems))


# ---------------------------------------------------------------------------------------------
# TypedDicts that refuse unknown keys
# ---------------------------------------------------------------------------------------------

def strict_typeddict(tp: Any) -> Any:
    """`tp` rebuilt so that pydantic judges a request as the vendor's API would.

    The SDKs' request TypedDicts are for type checkers, and pydantic reads them loosely in
    ways that would hide real faults:

    - it ignores keys a TypedDict does not declare unless the class carries
      `__pydantic_config__` with `extra='forbid'` (the SDKs' classes carry none);
    - it validates `Iterable[...]` fields lazily (a generator validated as it is consumed),
      and in `Union[str, Iterable[X]]` a lazy iterable matches first, so a string content
      would be judged as a list of parts;
    - a union of request params may also take the SDK's response models (pydantic models
      with extra='allow'), which would accept any key.

    So every TypedDict reachable from `tp` is copied (the SDK's own classes are left
    untouched) with `extra='forbid'`, its `Iterable`/`Sequence` fields as `list` and response
    models left out of unions that have params, through unions, `Annotated`,
    `Required`/`NotRequired` and dicts. Which keys are required follows pydantic's own rule: a `Required[...]`/`NotRequired[...]` annotation, else the class's
    `__required_keys__`.
    """
    return _rebuild(tp, {})


_SEQUENCES = {list, collections.abc.Iterable, collections.abc.Sequence, collections.abc.MutableSequence}


def _is_local_file(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return origin in (typing.IO, typing.BinaryIO, os.PathLike) or (
        isinstance(origin, type) and issubclass(origin, (io.IOBase, os.PathLike))
    )


def _is_response_model(tp: Any) -> bool:
    """A pydantic model, or a union of them (`ContentBlock` is an annotated union)."""
    if typing.get_origin(tp) is Annotated:
        return _is_response_model(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (Union, types.UnionType):
        return all(_is_response_model(a) for a in typing.get_args(tp))
    return isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def _rebuild(tp: Any, memo: dict) -> Any:
    if isinstance(tp, type) and is_typeddict(tp):
        if tp in memo:
            if memo[tp] is None:
                raise TypeError(f"{tp.__qualname__} refers to itself: not supported")
            return memo[tp]
        memo[tp] = None
        fields = {}
        for name, hint in typing.get_type_hints(tp, include_extras=True).items():
            origin = typing.get_origin(hint)
            if origin in (Required, NotRequired):
                required, hint = origin is Required, typing.get_args(hint)[0]
            else:
                required = name in tp.__required_keys__
            inner = _rebuild(hint, memo)
            fields[name] = Required[inner] if required else NotRequired[inner]
        copy = TypedDict(tp.__name__, fields, total=False)  # type: ignore[operator]
        copy.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")  # type: ignore[attr-defined]
        memo[tp] = copy
        return copy
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is None or not args or origin is Literal:
        return tp
    if origin is Annotated:
        return Annotated[(_rebuild(args[0], memo), *tp.__metadata__)]  # type: ignore[misc]
    if origin is Union or origin is types.UnionType:
        # File inputs the SDK encodes before sending (base64 fields' `IO[bytes]`, paths) are
        # never on the wire: only their JSON form is.
        wire = [a for a in args if not _is_local_file(a)]
        # The anthropic SDK lets a client pass response models back (`ContentBlock` beside
        # `ContentBlockParam`): on the wire they are JSON like the params, and as pydantic
        # models with extra='allow' they would take any keys, so the params judge them.
        params = [a for a in wire if not _is_response_model(a)]
        wire = params or wire
        return Union[tuple(_rebuild(a, memo) for a in wire)]  # type: ignore[return-value]
    if origin in _SEQUENCES:
        return list[_rebuild(args[0], memo)]  # type: ignore[misc]
    if origin in (dict, collections.abc.Mapping):
        return dict[args[0], _rebuild(args[1], memo)]  # type: ignore[misc]
    return tp


# Where a union member failed only because it is the wrong member (its discriminating
# literal, or its whole type, did not match), its errors are noise beside the member that
# did match.
_WRONG_MEMBER = {
    "literal_error", "string_type", "list_type", "dict_type", "int_type", "float_type",
    "bool_type", "iterable_type", "typed_dict_type", "model_type", "model_attributes_type",
    "none_required", "is_instance_of", "enum", "bytes_type", "union_tag_invalid",
}
_DISCRIMINATORS = {"type", "role"}


def _is_member_tag(part: Any) -> bool:
    return isinstance(part, str) and (
        part[:1].isupper() or "[" in part or part in {"str", "int", "float", "bool", "none"}
    )


def _summarise(errors: list[dict], prefix: tuple = ()) -> list[str]:
    """pydantic's errors, without those of union members that were never meant (`type`/`role`
    naming another member, or a member of another JSON type), member tags left out of paths."""
    wrong = set()
    for e in errors:
        loc = tuple(e["loc"])
        if not loc or e["type"] not in _WRONG_MEMBER:
            continue
        if _is_member_tag(loc[-1]):
            wrong.add(loc)  # a member of another JSON type
        elif len(loc) >= 2 and loc[-1] in _DISCRIMINATORS and _is_member_tag(loc[-2]):
            wrong.add(loc[:-1])  # the discriminating literal named another member

    def meant(loc: tuple) -> bool:
        return not any(loc[: len(w)] == w for w in wrong)

    kept = [e for e in errors if meant(tuple(e["loc"]))] or errors
    out = []
    for e in kept:
        path = ".".join(str(p) for p in prefix + tuple(e["loc"]) if not _is_member_tag(p))
        got = e.get("input")
        shown = json.dumps(got)[:80] if isinstance(got, (str, int, float, bool, type(None))) else type(got).__name__
        line = f"{path or '<body>'}: {e['msg']} (got {shown})"
        if line not in out:
            out.append(line)
    return out


def _validate(adapter: TypeAdapter, body: Any, what: str) -> Any:
    """Validate JSON `body` strictly (as JSON: no strings taken for numbers)."""
    try:
        return adapter.validate_json(json.dumps(body), strict=True)
    except ValidationError as e:
        raise Refusal(what, _summarise(e.errors())) from None


@functools.cache
def _adapter(tp: Any) -> TypeAdapter:
    return TypeAdapter(strict_typeddict(tp))


# ---------------------------------------------------------------------------------------------
# OpenAI (and Azure OpenAI) requests
# ---------------------------------------------------------------------------------------------


def openai_chat_request(body: dict, what: str = "openai chat request") -> None:
    from openai.types.chat import completion_create_params as p

    tp = p.CompletionCreateParamsStreaming if body.get("stream") else p.CompletionCreateParamsNonStreaming
    _validate(_adapter(tp), body, what)


def openai_embeddings_request(body: dict, what: str = "openai embeddings request") -> None:
    from openai.types.embedding_create_params import EmbeddingCreateParams

    _validate(_adapter(EmbeddingCreateParams), body, what)


def openai_responses_request(body: dict, what: str = "openai responses request") -> None:
    from openai.types.responses import response_create_params as p

    tp = p.ResponseCreateParamsStreaming if body.get("stream") else p.ResponseCreateParamsNonStreaming
    _validate(_adapter(tp), body, what)


_AZURE_OPS = {
    "chat/completions": openai_chat_request,
    "embeddings": openai_embeddings_request,
    "responses": openai_responses_request,
}


def azure_request(path: str, query: Optional[str], body: dict) -> str:
    """Azure OpenAI's deployment paths take OpenAI's bodies, with `model` optional (the
    deployment in the path names it) and `api-version` required in the query. Returns the
    operation: `chat/completions`, `embeddings` or `responses`."""
    what = "azure openai request"
    problems = []
    if "api-version" not in urllib.parse.parse_qs(query or ""):
        problems.append("query: api-version is required")
    if path == "/openai/responses":
        # The Responses API is no deployment path: the body's `model` names the deployment.
        if problems:
            raise Refusal(what, problems)
        openai_responses_request(body, what)
        return "responses"
    _, _, rest = path.partition("/openai/deployments/")
    deployment, _, op = rest.partition("/")
    judge = _AZURE_OPS.get(op)
    if not deployment or judge is None:
        problems.append(f"path: {path} is no Azure OpenAI deployment operation")
    if problems:
        raise Refusal(what, problems)
    judge({"model": deployment, **body}, what)  # type: ignore[misc]
    return op


# ---------------------------------------------------------------------------------------------
# Anthropic Messages requests, direct and on the platforms
# ---------------------------------------------------------------------------------------------


def anthropic_messages_request(body: dict, what: str = "anthropic messages request") -> None:
    from anthropic.types import message_create_params as p

    tp = p.MessageCreateParamsStreaming if body.get("stream") else p.MessageCreateParamsNonStreaming
    _validate(_adapter(tp), body, what)


# The `anthropic_version` each platform requires in the body, as Anthropic's own platform
# clients send it (their shared constant follows the direct API's header version, so the
# platform values are the documented ones: Vertex AI "vertex-2023-10-16", Bedrock
# "bedrock-2023-05-31").
VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


def vertex_anthropic_request(body: dict, streaming_path: bool) -> None:
    """`AnthropicVertex` moves `model` into the URL and keeps `stream` in the body
    (`:streamRawPredict` when it is true); the body carries `anthropic_version`."""
    what = "vertex anthropic request"
    body = dict(body)
    problems = _envelope(body, VERTEX_ANTHROPIC_VERSION)
    if bool(body.get("stream")) != streaming_path:
        problems.append(
            f"stream: {body.get('stream')!r} on the {'stream' if streaming_path else ''}rawPredict path"
        )
    if problems:
        raise Refusal(what, problems)
    anthropic_messages_request({"model": "claude-on-vertex", **body}, what)


def bedrock_anthropic_request(body: dict) -> None:
    """`AnthropicBedrock` moves `model` into the URL and takes `stream` out of the body (the
    path says `invoke` or `invoke-with-response-stream`); betas ride in `anthropic_beta`."""
    what = "bedrock anthropic request"
    body = dict(body)
    problems = _envelope(body, BEDROCK_ANTHROPIC_VERSION)
    if "stream" in body:
        problems.append("stream: not part of an InvokeModel body (the path streams)")
    betas = body.pop("anthropic_beta", [])
    if not (isinstance(betas, list) and all(isinstance(b, str) for b in betas)):
        problems.append(f"anthropic_beta: a list of strings is required (got {betas!r})")
    if problems:
        raise Refusal(what, problems)
    anthropic_messages_request({"model": "claude-on-bedrock", **body}, what)


def _envelope(body: dict, version: str) -> list[str]:
    problems = []
    got = body.pop("anthropic_version", None)
    if got != version:
        problems.append(f"anthropic_version: {version!r} is required (got {got!r})")
    if "model" in body:
        problems.append("model: not part of the body (the URL names the model)")
    return problems


# ---------------------------------------------------------------------------------------------
# Gemini and Vertex AI Gemini requests
# ---------------------------------------------------------------------------------------------


@functools.cache
def _gemini_request_models() -> dict[bool, type]:
    """The `generateContent` body: each member typed by google-genai (camelCase on the wire,
    as the types' alias generator says; unknown keys refused at every level). Vertex AI's
    body adds `labels`."""
    from google.genai import _common
    from google.genai import types as g

    class GenerateContentRequest(_common.BaseModel):
        contents: list[g.Content]
        system_instruction: Optional[g.Content] = None
        tools: Optional[list[g.Tool]] = None
        tool_config: Optional[g.ToolConfig] = None
        safety_settings: Optional[list[g.SafetySetting]] = None
        generation_config: Optional[g.GenerationConfig] = None
        cached_content: Optional[str] = None

    class VertexGenerateContentRequest(GenerateContentRequest):
        labels: Optional[dict[str, str]] = None

    return {False: GenerateContentRequest, True: VertexGenerateContentRequest}


def gemini_request(body: dict, vertex: bool) -> None:
    what = "vertex gemini request" if vertex else "gemini request"
    # As JSON, so that base64 fields (inlineData.data, thoughtSignature) must decode.
    _google_check(_gemini_request_models()[vertex], json.dumps(body), what)


def _google_check(model: type, text: str, what: str) -> Any:
    """google-genai's enums take any value, with only a warning (`X is not a valid Mode`), so
    that an SDK keeps working when the API adds one; a judge must refuse it."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            out = model.model_validate_json(text, strict=True)
        except ValidationError as e:
            raise Refusal(what, _summarise(e.errors())) from None
    unknown = [str(w.message) for w in seen if " is not a valid " in str(w.message)]
    if unknown:
        raise Refusal(what, [f"enum: {u}" for u in dict.fromkeys(unknown)])
    return out


# ---------------------------------------------------------------------------------------------
# Bedrock Converse requests (botocore's service model)
# ---------------------------------------------------------------------------------------------


@functools.cache
def _bedrock_model():
    import botocore.session

    return botocore.session.get_session().get_service_model("bedrock-runtime")


def _from_wire(value: Any, shape, loc: str, problems: list[str], drop_unknown: bool = False) -> Any:
    """A restJson1 wire value as botocore's serializer would take it: blobs as bytes (decoded
    from the wire's base64), wire names mapped to member names. With `drop_unknown` (for
    answers) members the model does not declare are left out, as botocore's parser does."""
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        by_wire = {m.serialization.get("name", k): k for k, m in shape.members.items()}
        out = {}
        for key, v in value.items():
            name = by_wire.get(key, key)
            member = shape.members.get(name)
            if member is not None:
                out[name] = _from_wire(v, member, f"{loc}.{key}", problems, drop_unknown)
            elif not drop_unknown:
                out[name] = v
        return out
    if kind == "list" and isinstance(value, list):
        return [_from_wire(v, shape.member, f"{loc}.{i}", problems, drop_unknown) for i, v in enumerate(value)]
    if kind == "map" and isinstance(value, dict):
        return {k: _from_wire(v, shape.value, f"{loc}.{k}", problems, drop_unknown) for k, v in value.items()}
    if kind == "blob" and isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            problems.append(f"{loc}: not base64 (got {value[:40]!r})")
            return value
    return value


def _enums(value: Any, shape, loc: str, problems: list[str]) -> None:
    """The service model's enum lists, which botocore's ParamValidator does not check."""
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        for k, v in value.items():
            if k in shape.members:
                _enums(v, shape.members[k], f"{loc}.{k}", problems)
    elif kind == "list" and isinstance(value, list):
        for i, v in enumerate(value):
            _enums(v, shape.member, f"{loc}.{i}", problems)
    elif kind == "map" and isinstance(value, dict):
        for k, v in value.items():
            _enums(v, shape.value, f"{loc}.{k}", problems)
    elif kind == "string" and getattr(shape, "enum", None) and isinstance(value, str):
        if value not in shape.enum:
            problems.append(f"{loc}: {value!r} is not one of {shape.enum}")


def bedrock_shape_check(params: dict, shape, what: str, answer: bool = False) -> None:
    """botocore's ParamValidator (types, required members, unknown members, unions with exactly
    one member set, minimums) and the enum lists, on wire JSON `params`. For an `answer`,
    unknown members are let pass, as botocore's parser lets them (Bedrock pads stream events
    with a `p` member that no shape declares)."""
    from botocore.validate import ParamValidator

    problems: list[str] = []
    converted = _from_wire(params, shape, shape.name, problems, drop_unknown=answer)
    report = ParamValidator().validate(converted, shape)
    if report.has_errors():
        problems += [line.strip() for line in report.generate_report().splitlines() if line.strip()]
    _enums(params, shape, shape.name, problems)
    if problems:
        raise Refusal(what, problems)


def bedrock_converse_request(path: str, body: dict) -> None:
    """`/model/{modelId}/converse` or `/converse-stream`: the wire body plus the path's modelId,
    judged against the operation's input shape."""
    parts = path.split("/")
    if len(parts) != 4 or parts[1] != "model" or parts[3] not in ("converse", "converse-stream"):
        raise Refusal("bedrock converse request", [f"path: {path} is no Converse operation"])
    op = _bedrock_model().operation_model("Converse" if parts[3] == "converse" else "ConverseStream")
    what = f"bedrock {op.name} request"
    if "modelId" in body:
        raise Refusal(what, ["modelId: a URI member, not part of the body"])
    params = {"modelId": urllib.parse.unquote(parts[2]), **body}
    bedrock_shape_check(params, op.input_shape, what)


# ---------------------------------------------------------------------------------------------
# Dispatch by the recorded path
# ---------------------------------------------------------------------------------------------


def judge_upstream(record: dict) -> str:
    """Judge one recorded upstream request by the validator its path calls for; return that
    validator's name. Raises Refusal when the vendor's types refuse it (or its path is
    unknown, or its body is not JSON)."""
    path, query = record["path"], record.get("query")
    body = record.get("body")
    if record["method"] != "POST":
        raise Refusal("upstream request", [f"{record['method']} {path}: not an inference call"])
    if not isinstance(body, dict):
        raise Refusal("upstream request", [f"{path}: the body is no JSON object ({record.get('body_bytes')} bytes)"])
    bare = path.removeprefix("/v1")
    if path.startswith("/openai/deployments/") or path == "/openai/responses":
        op = azure_request(path, query, body)
        return "azure" if op == "chat/completions" else f"azure_{op}"
    if bare == "/chat/completions":
        openai_chat_request(body)
        return "openai_chat"
    if bare == "/embeddings":
        openai_embeddings_request(body)
        return "openai_embeddings"
    if bare == "/responses":
        openai_responses_request(body)
        return "openai_responses"
    if bare == "/messages":
        anthropic_messages_request(body)
        return "anthropic_messages"
    if "/publishers/anthropic/models/" in path:
        op = path.rsplit(":", 1)[-1]
        if op not in ("rawPredict", "streamRawPredict"):
            raise Refusal("vertex anthropic request", [f"path: {path}"])
        vertex_anthropic_request(body, op == "streamRawPredict")
        return "vertex_anthropic"
    if path.endswith((":generateContent", ":streamGenerateContent")):
        vertex = path.startswith("/v1/projects/")
        gemini_request(body, vertex)
        return "vertex_gemini" if vertex else "gemini"
    if path.startswith("/model/") and path.endswith(("/converse", "/converse-stream")):
        bedrock_converse_request(path, body)
        return "bedrock_converse"
    if path.startswith("/model/") and path.endswith(("/invoke", "/invoke-with-response-stream")):
        bedrock_anthropic_request(body)
        return "bedrock_anthropic_invoke"
    raise Refusal("upstream request", [f"path: no validator for {path}"])


# ---------------------------------------------------------------------------------------------
# Answers
# ---------------------------------------------------------------------------------------------


def _model_check(model: type, text: str, what: str) -> Any:
    try:
        return model.model_validate_json(text, strict=True)
    except ValidationError as e:
        raise Refusal(what, _summarise(e.errors())) from None


@functools.cache
def _answer_adapter(tp: Any) -> TypeAdapter:
    return TypeAdapter(tp)


def _adapter_check(tp: Any, text: str, what: str) -> Any:
    try:
        return _answer_adapter(tp).validate_json(text, strict=True)
    except ValidationError as e:
        raise Refusal(what, _summarise(e.errors())) from None


def sse_events(text: str) -> list[tuple[Optional[str], str]]:
    """An SSE body's events as (event name, data), comments and `[DONE]` dropped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data and "\n".join(data).strip() != "[DONE]":
            events.append((name, "\n".join(data)))
    return events


def openai_chat_answer(text: str, what: str = "openai ChatCompletion") -> Any:
    from openai.types.chat import ChatCompletion

    return _model_check(ChatCompletion, text, what)


def openai_chat_stream(text: str, what: str = "openai ChatCompletionChunk") -> list:
    from openai.types.chat import ChatCompletionChunk

    chunks = [_model_check(ChatCompletionChunk, data, f"{what} #{i}") for i, (_, data) in enumerate(sse_events(text))]
    if not chunks:
        raise Refusal(what, ["the stream had no chunk"])
    if not any(c.choices and c.choices[0].finish_reason for c in chunks):
        raise Refusal(what, ["no chunk carried a finish_reason"])
    return chunks


def openai_embeddings_answer(text: str) -> Any:
    from openai.types import CreateEmbeddingResponse

    return _model_check(CreateEmbeddingResponse, text, "openai CreateEmbeddingResponse")


def openai_responses_answer(text: str) -> Any:
    from openai.types.responses import Response

    return _model_check(Response, text, "openai Response")


def openai_responses_stream(text: str, what: str = "openai ResponseStreamEvent") -> Any:
    """Each event by `ResponseStreamEvent` (discriminated by `type`, which the SSE event name
    must repeat); returns the `response.completed` event's Response."""
    from openai.types.responses import ResponseStreamEvent

    completed = []
    for i, (name, data) in enumerate(sse_events(text)):
        kind = json.loads(data).get("type")
        if name is not None and name != kind:
            raise Refusal(what, [f"#{i}: event name {name!r} but data type {kind!r}"])
        event = _adapter_check(ResponseStreamEvent, data, f"{what} #{i} ({kind})")
        if kind == "response.completed":
            completed.append(event.response)
    if len(completed) != 1:
        raise Refusal(what, [f"{len(completed)} response.completed events"])
    return completed[0]


def anthropic_message_answer(text: str, what: str = "anthropic Message") -> Any:
    from anthropic.types import Message

    return _model_check(Message, text, what)


def anthropic_stream(text: str, what: str = "anthropic RawMessageStreamEvent") -> list:
    """Each event's data by `RawMessageStreamEvent` (a `ping` and an `error` are their own
    shapes), each SSE event name equal to its data's `type`, and the stream framed by
    message_start ... message_stop."""
    from anthropic.types import RawMessageStreamEvent

    events = []
    for i, (name, data) in enumerate(sse_events(text)):
        kind = json.loads(data).get("type")
        if name != kind:
            raise Refusal(what, [f"#{i}: event name {name!r} but data type {kind!r}"])
        if kind == "ping":
            continue
        events.append(_adapter_check(RawMessageStreamEvent, data, f"{what} #{i} ({kind})"))
    kinds = [e.type for e in events]
    if not kinds or kinds[0] != "message_start" or kinds[-1] != "message_stop":
        raise Refusal(what, [f"the stream is not framed by message_start ... message_stop: {kinds}"])
    return events


def gemini_answer(text: str, what: str = "gemini GenerateContentResponse") -> Any:
    from google.genai import types as g

    return _google_check(g.GenerateContentResponse, text, what)


def gemini_stream(text: str) -> list:
    return [gemini_answer(data, f"gemini GenerateContentResponse #{i}") for i, (_, data) in enumerate(sse_events(text))]


def gemini_array_stream(text: str) -> list:
    """`:streamGenerateContent` without `alt=sse`: one JSON array, each element judged as a
    GenerateContentResponse."""
    elements = json.loads(text)
    if not isinstance(elements, list) or not elements:
        raise Refusal("gemini stream array", [f"not a non-empty JSON array: {text[:200]!r}"])
    return [gemini_answer(json.dumps(e), f"gemini GenerateContentResponse [{i}]") for i, e in enumerate(elements)]


def bedrock_converse_answer(text: str) -> None:
    shape = _bedrock_model().operation_model("Converse").output_shape
    bedrock_shape_check(json.loads(text), shape, "bedrock ConverseResponse", answer=True)


def bedrock_converse_stream(raw: bytes) -> list[str]:
    """ConverseStream's binary event stream: each frame CRC-checked by botocore's decoder, each
    event's payload judged by the stream member its `:event-type` names."""
    from botocore.eventstream import EventStreamBuffer

    stream_shape = _bedrock_model().operation_model("ConverseStream").output_shape.members["stream"]
    buf = EventStreamBuffer()
    buf.add_data(raw)
    kinds = []
    for i, message in enumerate(buf):
        headers = message.headers
        if headers.get(":message-type") != "event":
            raise Refusal("bedrock ConverseStream", [f"#{i}: {headers.get(':message-type')}: {message.payload[:200]!r}"])
        kind = headers.get(":event-type")
        member = stream_shape.members.get(kind)
        if member is None:
            raise Refusal("bedrock ConverseStream", [f"#{i}: unknown event type {kind!r}"])
        bedrock_shape_check(json.loads(message.payload), member, f"bedrock ConverseStream #{i} ({kind})", answer=True)
        kinds.append(kind)
    if not kinds or kinds[0] != "messageStart":
        raise Refusal("bedrock ConverseStream", [f"events: {kinds}"])
    return kinds


def bedrock_invoke_stream(raw: bytes, what: str = "bedrock InvokeModelWithResponseStream") -> list:
    """InvokeModelWithResponseStream on Claude: `chunk` events (botocore's
    ResponseStream.chunk: a PayloadPart whose `bytes` are base64 on the wire), each carrying
    one Anthropic stream event, judged by `RawMessageStreamEvent`."""
    from anthropic.types import RawMessageStreamEvent
    from botocore.eventstream import EventStreamBuffer

    stream_shape = _bedrock_model().operation_model("InvokeModelWithResponseStream").output_shape.members["body"]
    buf = EventStreamBuffer()
    buf.add_data(raw)
    events = []
    for i, message in enumerate(buf):
        kind = message.headers.get(":event-type")
        if message.headers.get(":message-type") != "event" or kind not in stream_shape.members:
            raise Refusal(what, [f"#{i}: {message.headers.get(':message-type')} {kind}: {message.payload[:200]!r}"])
        payload = json.loads(message.payload)
        bedrock_shape_check(payload, stream_shape.members[kind], f"{what} #{i} ({kind})", answer=True)
        inner = base64.b64decode(payload["bytes"], validate=True).decode()
        kind = json.loads(inner).get("type")
        if kind == "ping":  # the Messages API's keep-alive, no RawMessageStreamEvent
            continue
        events.append(_adapter_check(RawMessageStreamEvent, inner, f"{what} #{i} ({kind})"))
    kinds = [e.type for e in events]
    if not kinds or kinds[0] != "message_start" or kinds[-1] != "message_stop":
        raise Refusal(what, [f"the stream is not framed by message_start ... message_stop: {kinds}"])
    return events


# The mock's answer to each upstream path, judged by the upstream vendor's response types.
def judge_mock_answer(validator: str, streamed: bool, status: int, content: bytes) -> None:
    what = f"mock answer ({validator})"
    if status != 200:
        raise Refusal(what, [f"status {status}: {content[:300]!r}"])
    text = content.decode("utf-8", "replace")
    if validator in ("openai_chat", "azure"):
        openai_chat_stream(text) if streamed else openai_chat_answer(text)
    elif validator in ("anthropic_messages", "vertex_anthropic"):
        anthropic_stream(text) if streamed else anthropic_message_answer(text)
    elif validator in ("gemini", "vertex_gemini"):
        gemini_stream(text) if streamed else gemini_answer(text)
    elif validator == "bedrock_converse":
        bedrock_converse_stream(content) if streamed else bedrock_converse_answer(text)
    elif validator == "bedrock_anthropic_invoke":
        bedrock_invoke_stream(content) if streamed else anthropic_message_answer(text)
    elif validator in ("openai_embeddings", "azure_embeddings"):
        openai_embeddings_answer(text)
    elif validator in ("openai_responses", "azure_responses"):
        openai_responses_stream(text) if streamed else openai_responses_answer(text)
    else:
        raise Refusal(what, [f"no answer judge for {validator}"])


__all__ = [
    "Refusal",
    "strict_typeddict",
    "judge_upstream",
    "judge_mock_answer",
    "openai_chat_request",
    "openai_embeddings_request",
    "openai_responses_request",
    "azure_request",
    "anthropic_messages_request",
    "vertex_anthropic_request",
    "bedrock_anthropic_request",
    "gemini_request",
    "bedrock_converse_request",
    "openai_chat_answer",
    "openai_chat_stream",
    "openai_responses_answer",
    "openai_responses_stream",
    "anthropic_message_answer",
    "anthropic_stream",
    "gemini_answer",
    "bedrock_converse_answer",
    "bedrock_converse_stream",
    "bedrock_invoke_stream",
    "sse_events",
]
