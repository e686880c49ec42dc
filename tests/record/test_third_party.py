"""Real agents from PyPI, recorded by the proxy: the OpenAI Agents SDK (an agent used as a tool,
a handoff), a LangGraph ReAct agent over ``langchain_openai`` and a tool loop over the
``anthropic`` SDK, each run against the simulator through ``agentload record``.

Each trace must pass ``agentload trace validate``, hold one ``llm_call`` per model request the
agent's own HTTP client sent, the tool calls the agent ran, the agent tree the agent had, and
replay against the simulator. The simulator's plain policy calls one offered tool when the last
message is the user's and answers in text after a tool result, so each run below ends after a
known number of requests (the seed fixes which tool it picks, not how many calls there are)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from agents import (
    Agent,
    HandoffCallItem,
    HandoffOutputItem,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    RunResult,
    RunResultStreaming,
    ToolCallItem,
    ToolCallOutputItem,
    function_tool,
    set_tracing_disabled,
)
from agents.tool_context import ToolContext
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from openai import AsyncOpenAI

sys.path.insert(0, str(Path(__file__).parent))  # agents_helpers

from agents_helpers import (
    ToolRun,
    Wire,
    check_bodies,
    check_replays,
    check_tool_calls,
    check_usage,
    children,
    load_checked,
    roots,
    tool_call_for,
)
from scripted_upstream import Asked, Call, ScriptedUpstream, Turn

MODEL = "agentload-sim"

set_tracing_disabled(True)  # the Agents SDK would otherwise post traces to OpenAI

# The proxy tells a delegation by the task text: the sub-agent's prompt carries the tool call's
# longest string argument, when it has 12 characters or more. The simulator fills the sub-agent
# tool's ``input`` with a word of the user's question, so every word here is that long.
QUESTION = "Wordcounting: internationalization, responsibilities, characteristically?"


# -- the OpenAI Agents SDK -------------------------------------------------------------------


def _counting_tool(runs: list[ToolRun]) -> Any:
    @function_tool
    def word_count(ctx: ToolContext[Any], text: str) -> int:
        """Count the words in a text."""
        n = len(text.split())
        runs.append(ToolRun(ctx.tool_call_id, "word_count", str(n)))
        return n

    return word_count


def _tool_runs(result: RunResult | RunResultStreaming) -> list[ToolRun]:
    """The tool calls (handoffs included) the run's own agents made, each with the output text
    the SDK sent back for it."""
    names = {
        item.raw_item.call_id: item.raw_item.name
        for item in result.new_items
        if isinstance(item, ToolCallItem | HandoffCallItem) and hasattr(item.raw_item, "call_id")
    }
    return [
        ToolRun(item.raw_item["call_id"], names[item.raw_item["call_id"]], item.raw_item["output"])
        for item in result.new_items
        if isinstance(item, ToolCallOutputItem | HandoffOutputItem)
        and isinstance(item.raw_item, dict)
    ]


def _model(api: str, client: AsyncOpenAI) -> Model:
    """The SDK's model over Chat Completions or over the Responses API."""
    if api == "chat":
        return OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    return OpenAIResponsesModel(model=MODEL, openai_client=client)


_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


def _last_text(api: str, body: dict[str, Any]) -> Any:
    """The content of a request's last message (chat) or input item (Responses)."""
    return body["messages" if api == "chat" else "input"][-1]["content"]


def _instructions(api: str, body: dict[str, Any]) -> Any:
    """A request's system message (chat) or ``instructions`` (Responses)."""
    return body["messages"][0]["content"] if api == "chat" else body["instructions"]


async def _run(agent: Agent[Any], question: str, stream: bool) -> RunResult | RunResultStreaming:
    if not stream:
        return await Runner.run(agent, question, max_turns=4)
    result = Runner.run_streamed(agent, question, max_turns=4)
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not-streamed"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_openai_agents_agent_as_tool(
    simulator: Any, record_proxy: Any, tmp_path: Path, api: str, stream: bool
) -> None:
    """An orchestrator whose one tool is a sub-agent (``as_tool``) with a function tool: the
    trace has the orchestrator and, under its tool call, the sub-agent as a child agent."""
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    wire, runs = Wire(), list[ToolRun]()
    async with httpx.AsyncClient(event_hooks=wire.ahooks()) as http:
        client = AsyncOpenAI(
            base_url=f"{proxy.url}/v1", api_key="sk-test", http_client=http, max_retries=0
        )
        model = _model(api, client)
        counter = Agent(
            name="counter",
            instructions="You count the words of the text you are given with your tool.",
            tools=[_counting_tool(runs)],
            model=model,
        )
        orchestrator = Agent(
            name="orchestrator",
            instructions="You delegate every counting question to the counter.",
            tools=[counter.as_tool(tool_name="ask_counter", tool_description="Ask the counter.")],
            model=model,
        )
        result = await _run(orchestrator, QUESTION, stream)

    # what the agent did, from its own side: 2 orchestrator turns around 2 sub-agent turns
    asked = _tool_runs(result)
    assert [r.name for r in asked] == ["ask_counter"] and [r.name for r in runs] == ["word_count"]
    sent = wire.calls(_PATHS[api])
    assert len(sent) == len(wire.sent) == 4 and len(result.raw_responses) == 2
    assert [bool(s.body.get("stream")) for s in sent] == [stream, False, False, stream]
    task = _last_text(api, sent[1].body)  # the sub-agent's prompt
    assert len(task) >= 12 and task in QUESTION.lower(), task

    path = proxy.stop()
    trace = load_checked(path, n_calls=len(sent))
    check_bodies(trace, sent, api)
    [root] = roots(trace)
    [child] = children(trace, root)
    check_usage(
        trace,
        root.id,
        [(r.usage.input_tokens, r.usage.output_tokens) for r in result.raw_responses],
    )
    assert len(trace.calls_of(child.id)) == 2
    assert child.parent_tool_call_id == asked[0].call_id
    assert (root.role, child.role) == ("agent", "ask_counter")  # a child's role: its tool's name
    assert child.session_id == root.session_id
    check_tool_calls(trace, [*asked, *runs])
    assert tool_call_for(trace, asked[0].call_id).agent_id == root.id
    assert tool_call_for(trace, asked[0].call_id).child_agent_id == child.id
    assert tool_call_for(trace, runs[0].call_id).agent_id == child.id
    # the orchestrator's answer waits on the sub-agent, the sub-agent's on its tool
    assert trace.calls_of(root.id)[1].depends_on == [child.id]
    assert trace.calls_of(child.id)[1].depends_on == [tool_call_for(trace, runs[0].call_id).id]
    check_replays(path, trace, simulator.base_url, MODEL, tmp_path / "replay")


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_openai_agents_handoff(
    simulator: Any, record_proxy: Any, tmp_path: Path, api: str
) -> None:
    """A front agent hands off to a closer, which answers: the SDK sends the closer's request
    with the same history under the closer's own instructions."""
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    wire = Wire()
    async with httpx.AsyncClient(event_hooks=wire.ahooks()) as http:
        client = AsyncOpenAI(
            base_url=f"{proxy.url}/v1", api_key="sk-test", http_client=http, max_retries=0
        )
        model = _model(api, client)
        closer = Agent(name="closer", instructions="You write the final answer.", model=model)
        front = Agent(
            name="front",
            instructions="You hand every request to the closer.",
            handoffs=[closer],
            model=model,
        )
        result = await Runner.run(front, "Say hello to the team.", max_turns=4)

    assert result.last_agent is closer
    handed = _tool_runs(result)
    assert [r.name for r in handed] == ["transfer_to_closer"]
    sent = wire.calls(_PATHS[api])
    assert len(sent) == len(wire.sent) == len(result.raw_responses) == 2
    assert _instructions(api, sent[0].body) != _instructions(api, sent[1].body)

    path = proxy.stop()
    trace = load_checked(path, n_calls=len(sent))
    check_bodies(trace, sent, api)
    # a handoff: the closer's history carries the front's transfer call, so the closer is a
    # new agent under that call, in the same session (docs/record.md, rule 3)
    [front_rec] = roots(trace)
    [closer_rec] = children(trace, front_rec)
    assert closer_rec.parent_tool_call_id == handed[0].call_id
    assert closer_rec.role == "transfer_to_closer"
    assert tool_call_for(trace, handed[0].call_id).child_agent_id == closer_rec.id
    assert closer_rec.session_id == front_rec.session_id
    for agent, response in zip((front_rec, closer_rec), result.raw_responses, strict=True):
        check_usage(trace, agent.id, [(response.usage.input_tokens, response.usage.output_tokens)])
    check_tool_calls(trace, handed)
    check_replays(path, trace, simulator.base_url, MODEL, tmp_path / "replay")


# -- LangGraph -------------------------------------------------------------------------------


@tool
def read_note(name: str) -> str:
    """Read the note with this name."""
    return f"note {name}: buy milk, call the plumber"


@tool
def count_chars(text: str) -> int:
    """Count the characters of a text."""
    return len(text)


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_langgraph_react_agent_streamed(simulator: Any, record_proxy: Any, tmp_path: Path) -> None:
    """LangGraph's prebuilt ReAct agent over ``ChatOpenAI(streaming=True)`` with two tools, asked
    twice in one conversation: one agent, four streamed calls, two tool calls.

    (``create_react_agent`` warns that it moved to ``langchain.agents.create_agent``; the
    ``langchain`` package is not a dependency, and the graph is the same.)"""
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    wire = Wire()
    with httpx.Client(event_hooks=wire.hooks()) as http:
        llm = ChatOpenAI(
            model=MODEL,
            base_url=f"{proxy.url}/v1",
            api_key="sk-test",
            streaming=True,
            max_retries=0,
            http_client=http,
        )
        graph = create_react_agent(llm, [read_note, count_chars])
        state = graph.invoke({"messages": [("user", "What does the note 'shopping' say?")]})
        state = graph.invoke(
            {"messages": [*state["messages"], ("user", "And how long is the word 'plumber'?")]}
        )

    runs = [
        ToolRun(m.tool_call_id, str(m.name), str(m.content))
        for m in state["messages"]
        if isinstance(m, ToolMessage)
    ]
    assert len(runs) == 2 and {r.name for r in runs} <= {"read_note", "count_chars"}
    sent = wire.calls("/v1/chat/completions")
    assert len(sent) == len(wire.sent) == 4 and all(s.body.get("stream") is True for s in sent)

    path = proxy.stop()
    trace = load_checked(path, n_calls=len(sent))
    check_bodies(trace, sent, "chat")
    [root] = roots(trace)
    assert children(trace, root) == [] and len(trace.calls_of(root.id)) == 4
    assert all(c.request.stream for c in trace.calls.values())
    check_tool_calls(trace, runs)
    check_replays(path, trace, simulator.base_url, MODEL, tmp_path / "replay")


# -- the anthropic SDK -----------------------------------------------------------------------

_NOTES_TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_note",
        "description": "Read the note with this name.",
        "input_schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
    {
        "name": "count_chars",
        "description": "Count the characters of a text.",
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
]


def _run_note_tool(name: str, args: dict[str, Any]) -> str:
    if name == "read_note":
        return f"note {args.get('name')}: buy milk, call the plumber"
    return str(len(str(args.get("text", ""))))


def test_anthropic_streamed_tool_loop(simulator: Any, record_proxy: Any, tmp_path: Path) -> None:
    """``client.messages.stream`` in a hand-written tool loop over two questions: four streamed
    Messages calls, two tool_use blocks answered with tool_result blocks, one agent."""
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    wire, runs = Wire(), list[ToolRun]()
    messages: list[dict[str, Any]] = []
    usage: list[tuple[int, int]] = []  # per request, as the SDK read it from the stream
    stops: list[str | None] = []
    with httpx2.Client(event_hooks=wire.hooks()) as http:
        client = anthropic.Anthropic(
            base_url=proxy.url, api_key="sk-ant-test", http_client=http, max_retries=0
        )
        for question in ("What does the note 'shopping' say?", "How long is 'plumber'?"):
            messages.append({"role": "user", "content": question})
            for _ in range(4):
                with client.messages.stream(
                    model=MODEL,
                    max_tokens=4096,
                    system="You answer questions about notes with your tools.",
                    tools=_NOTES_TOOLS,
                    messages=messages,
                ) as stream:
                    final = stream.get_final_message()
                u = final.usage
                cached = (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
                usage.append((u.input_tokens + cached, u.output_tokens))
                messages.append({"role": "assistant", "content": final.content})
                stops.append(final.stop_reason)
                if final.stop_reason != "tool_use":
                    break
                results = []
                for block in final.content:
                    if block.type == "tool_use":
                        out = _run_note_tool(block.name, dict(block.input))
                        runs.append(ToolRun(block.id, block.name, out))
                        results.append(
                            {"type": "tool_result", "tool_use_id": block.id, "content": out}
                        )
                messages.append({"role": "user", "content": results})

    assert stops == ["tool_use", "end_turn"] * 2 and len(runs) == 2
    sent = wire.calls("/v1/messages")
    assert len(sent) == len(wire.sent) == 4 and all(s.body.get("stream") is True for s in sent)

    path = proxy.stop()
    trace = load_checked(path, n_calls=len(sent))
    check_bodies(trace, sent, "messages")
    [root] = roots(trace)
    assert children(trace, root) == []
    check_usage(trace, root.id, usage)
    check_tool_calls(trace, runs)
    check_replays(path, trace, simulator.base_url, MODEL, tmp_path / "replay")


# -- the plain OpenAI client's tool loop ---------------------------------------------------------


def _coding_tool(name: str, description: str, arg: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}
    return {"type": "function",
            "function": {"name": name, "description": description, "parameters": schema}}  # fmt: skip


_CODING_TOOLS = [
    _coding_tool("list_directory", "List the files of a directory.", "path"),
    _coding_tool("read_file", "Read a file.", "path"),
    _coding_tool("run_shell_command", "Run a shell command.", "command"),
]


def _stream_turn(client: Any, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """One streamed call: the text and the tool calls, put together from the deltas."""
    text, calls = "", dict[int, dict[str, str]]()
    for chunk in client.chat.completions.create(
        model=MODEL, messages=messages, tools=_CODING_TOOLS, stream=True
    ):
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        text += delta.content or ""
        for tc in delta.tool_calls or []:
            got = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            got["id"] += tc.id or ""
            got["name"] += (tc.function.name or "") if tc.function else ""
            got["arguments"] += (tc.function.arguments or "") if tc.function else ""
    return text, list(calls.values())


def test_openai_streamed_tool_loop_with_the_turn_carried_changed(
    simulator: Any, record_proxy: Any, tmp_path: Path
) -> None:
    """The tool loop of the OpenAI docs: stream a tool call, append the assistant turn as
    ``content: None`` with the tool calls (the text the model streamed before its calls is
    dropped), the tools' results, call again. One agent, not a child agent named after a
    tool at each call (issue 48: the turn came back changed)."""
    import openai

    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent working in /repo."},
        {"role": "user", "content": "calc.py: add(2, 3) prints -1; fix it."},
    ]
    runs: list[ToolRun] = []
    dropped = 0
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="sk-test", max_retries=0)
    n = 0
    for n in range(1, 20):  # noqa: B007
        text, calls = _stream_turn(client, messages)
        if not calls:
            break
        dropped += bool(text.strip())
        turn = [{"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": turn})
        for c in calls:
            out = "def add(a, b):\n    return a - b\n" if c["name"] == "read_file" else "calc.py"
            runs.append(ToolRun(c["id"], c["name"], out))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
    assert runs and dropped, (
        len(runs),
        dropped,
    )  # the text before a call was dropped at least once
    path = proxy.stop()
    trace = load_checked(path, n_calls=n)
    [root] = roots(trace)
    assert children(trace, root) == []
    assert sorted(c.seq for c in trace.calls.values()) == list(range(n))
    check_tool_calls(trace, runs)


# -- several runs of one Agents SDK app at once ------------------------------------------------
WORD = "internationalization"


def _parallel_script(asked: Asked) -> Turn:
    """An orchestrator that, by its question, counts a word itself (``word_count``) or asks
    its counter sub-agent (``ask_counter``), the word being the same in every run; the counter
    counts with ``word_count``; each answers in text after its tool's result."""
    messages = asked.body.get("messages") or []
    system = str(messages[0].get("content")) if messages else ""
    if messages and messages[-1].get("role") == "tool":
        return Turn("1 word.")
    if "delegate" in system:
        if "[self]" in str(messages[-1].get("content")):
            return Turn("", (Call("word_count", {"text": WORD}),))
        return Turn("", (Call("ask_counter", {"input": WORD}),))
    return Turn("", (Call("word_count", {"text": WORD}),))


async def test_openai_agents_runs_at_once_keep_their_sub_agents(
    record_proxy: Any, tmp_path: Path
) -> None:
    """Four runs of one Agents SDK app at once in one process: two orchestrators count the word
    themselves (a plain ``word_count`` that takes a moment, as a real tool does), two ask their
    counter sub-agent, whose task is that same word. Each counter is the child of its own run's
    ``ask_counter`` call, in its run's session; no ``word_count`` gets a child."""
    upstream = ScriptedUpstream(_parallel_script).start()
    try:
        proxy = record_proxy(upstream=upstream.url)
        runs: list[ToolRun] = []

        @function_tool
        async def word_count(ctx: ToolContext[Any], text: str) -> int:
            """Count the words in a text."""
            await asyncio.sleep(0.3)
            runs.append(ToolRun(ctx.tool_call_id, "word_count", "1"))
            return len(text.split())

        async with httpx.AsyncClient() as http:
            client = AsyncOpenAI(
                base_url=proxy.base_url, api_key="sk-test", http_client=http, max_retries=0
            )
            model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
            counter = Agent(
                name="counter", instructions="You count words.", tools=[word_count], model=model
            )
            orchestrator = Agent(
                name="orchestrator",
                instructions="You delegate counting questions to the counter, or count.",
                tools=[
                    counter.as_tool(tool_name="ask_counter", tool_description="Ask."),
                    word_count,
                ],
                model=model,
            )
            questions = [f"Run {i}: how many words? {'[self]' if i % 2 else ''}" for i in range(4)]
            results = await asyncio.gather(*(Runner.run(orchestrator, q) for q in questions))
    finally:
        upstream.stop()
    asks = {
        item.raw_item.call_id: i
        for i, r in enumerate(results)
        for item in r.new_items
        if isinstance(item, ToolCallItem) and item.raw_item.name == "ask_counter"
    }
    assert len(asks) == 2 and len(runs) == 4
    trace = load_checked(proxy.stop(), n_calls=len(upstream.asked))
    assert len(trace.sessions) == 4, list(trace.sessions)
    for ask_id in asks:
        ask = tool_call_for(trace, ask_id)
        child = trace.agents[str(ask.child_agent_id)]
        assert child.parent_tool_call_id == ask_id
        assert child.session_id == ask.session_id
        assert len(trace.calls_of(child.id)) == 2
    for rec in trace.tool_calls.values():
        if rec.name == "word_count":
            assert rec.child_agent_id is None, rec
            owner = trace.agents[rec.agent_id]
            assert owner.session_id == rec.session_id
