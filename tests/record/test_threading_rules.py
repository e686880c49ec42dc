"""The proxy's threading rules (``agentload.record.threads``, docs/record.md "How agents and
sessions are rebuilt") on the request shapes real agents send: Claude Code filling in a tool's
defaults, Codex's ``spawn_agent`` answered before its sub-agent's first request, an agent that
drops a malformed reply and asks again (mini-swe-agent), and parallel runs of one Agents SDK app
whose plain tool calls name the same text as another run's delegation. The last two also go
through the real proxy (``agentload record`` in front of the simulator)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx

from agentload.hashing import content_id
from agentload.record.ledger import Placement
from agentload.record.matching import delegation_like
from agentload.record.native import identity
from agentload.record.threads import Threads

sys.path.insert(0, str(Path(__file__).parent))  # agents_helpers

from agents_helpers import children, load_checked, roots

SYSTEM = {"role": "system", "content": "You are a coding agent. Fix the failing test."}
TASK = {"role": "user", "content": "tests/test_parser.py::test_quotes fails; fix it."}


def _route(threads: Threads, messages: list[dict[str, Any]], now: int, **kw: Any) -> Placement:
    return threads.route(messages, [content_id(m) for m in messages], now, **kw)


def _call(call_id: str, name: str, args: dict[str, Any] | str) -> dict[str, Any]:
    text = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def _reply(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


# -- rule 2: a continuation, tolerant of what a client fills in ---------------------------------


EDIT = {"file_path": "/repo/parser.py", "old_string": "a = 1", "new_string": "a = 2"}


def test_a_client_that_fills_in_a_tools_defaults_continues_the_agent() -> None:
    """Claude Code carries the model's ``Edit`` on with ``"replace_all": false`` added (and its
    own ids): still the same agent's next call, depending on the edit."""
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    threads.answered(first, _reply(_call("toolu_1", "Edit", EDIT)), 2)
    carried = _reply(_call("toolu_1", "Edit", {**EDIT, "replace_all": False}))
    nxt = _route(threads, [SYSTEM, TASK, carried, _result("toolu_1", "edited")], 3)
    assert nxt.agent is first.agent and nxt.seq == 1
    assert nxt.new_agent is None and nxt.new_session is None
    assert nxt.depends_on == ["toolu_1"]
    [closed] = nxt.closed
    assert closed.call.name == "Edit" and closed.call.llm_call_id == first.call_id


def test_arguments_carried_with_other_whitespace_or_nested_defaults_continue() -> None:
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    args = {"command": "pytest -x ", "env": {"CI": "1"}, "paths": ["a.py"]}
    threads.answered(first, _reply(_call("c1", "Bash", args)), 2)
    filled = {"command": "pytest -x", "env": {"CI": "1", "TERM": "dumb"}, "paths": ["a.py"]}
    nxt = _route(threads, [SYSTEM, TASK, _reply(_call("c1", "Bash", filled)), _result("c1", "")], 3)
    assert nxt.agent is first.agent and nxt.seq == 1


def test_a_changed_argument_or_a_missing_one_is_not_the_same_reply() -> None:
    """Under an id of the agent's own, the arguments decide: a changed or missing one is
    another turn. The model's own id carried back decides by itself (below)."""
    for carried_args in ({**EDIT, "new_string": "a = 3"}, {"file_path": "/repo/parser.py"}):
        threads = Threads()
        first = _route(threads, [SYSTEM, TASK], 1)
        threads.answered(first, _reply(_call("toolu_1", "Edit", EDIT)), 2)
        carried = _reply(_call("agent_7", "Edit", carried_args))
        nxt = _route(threads, [SYSTEM, TASK, carried, _result("agent_7", "edited")], 3)
        assert nxt.agent is not first.agent


def _streamed_turn() -> dict[str, Any]:
    return _reply(_call("call_1", "read_file", {"path": "/repo/parser.py"}), content="Reading.")


def test_a_turn_carried_back_changed_still_continues_its_agent() -> None:
    """The plain OpenAI-client tool loop appends the assistant turn with ``content: None``
    (the text the model streamed before its call dropped); other clients send the text as
    parts, reworded, re-serialize the arguments, or strip reasoning: still the next call."""
    args = '{"path": "/repo/parser.py"}'
    call = _call("call_1", "read_file", args)
    changed = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Reading."}],
            "tool_calls": [call],
        },
        {"role": "assistant", "content": "I will read it now.", "tool_calls": [call]},
        _reply(_call("call_1", "read_file", {"path": "/repo/parser.py", "limit": None})),
        _reply(_call("call_1", "read_file", {"path": "/elsewhere.py"})),  # its own id: the same
    ]
    for carried in changed:
        threads = Threads()
        first = _route(threads, [SYSTEM, TASK], 1)
        threads.answered(first, _streamed_turn(), 2)
        nxt = _route(threads, [SYSTEM, TASK, carried, _result("call_1", "text")], 3)
        assert (nxt.agent, nxt.seq, nxt.new_agent) == (first.agent, 1, None), carried
        assert nxt.depends_on == ["call_1"]
    # a text-only turn: dropped, cut, or without its reasoning
    said = "<think>the parser drops quotes</think>The parser drops the closing quote on line 12."
    for text in (
        "",
        "The parser drops the closing quote",
        "The parser drops the closing quote on line 12.",
    ):
        threads = Threads()
        first = _route(threads, [SYSTEM, TASK], 1)
        threads.answered(first, {"role": "assistant", "content": said}, 2)
        more = {"role": "user", "content": "Now fix it."}
        nxt = _route(threads, [SYSTEM, TASK, {"role": "assistant", "content": text}, more], 3)
        assert nxt.agent is first.agent and nxt.seq == 1, text


def test_of_two_agents_with_one_prompt_the_exact_turn_wins_over_a_changed_one() -> None:
    threads = Threads()
    a = _route(threads, [SYSTEM, TASK], 1)
    threads.answered(a, {"role": "assistant", "content": "The parser drops the closing quote."}, 2)
    b = _route(threads, [SYSTEM, TASK], 3)
    threads.answered(b, {"role": "assistant", "content": "The parser drops the closing"}, 4)
    carried = {"role": "assistant", "content": "The parser drops the closing quote."}
    nxt = _route(threads, [SYSTEM, TASK, carried, {"role": "user", "content": "go on"}], 5)
    assert nxt.agent is a.agent
    other = {"role": "assistant", "content": "Something else entirely, at length here."}
    new = _route(threads, [SYSTEM, TASK, other, {"role": "user", "content": "go on"}], 6)
    assert new.agent not in (a.agent, b.agent)


def test_an_exact_repeat_of_an_answered_prompt_is_a_new_session() -> None:
    """Two sessions that start alike stay apart: the second's first request is not the first
    session's retry (it extends nothing) nor its continuation."""
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    threads.answered(first, _reply(_call("c1", "Bash", {"command": "pytest"})), 2)
    twin = _route(threads, [SYSTEM, TASK], 3)
    assert twin.new_session is not None and twin.agent is not first.agent
    threads.answered(twin, _reply(_call("c2", "Bash", {"command": "ls"})), 4)
    # each goes on with its own reply
    mine = _route(threads, [SYSTEM, TASK, _reply(_call("c1", "Bash", {"command": "pytest"}))], 5)
    theirs = _route(threads, [SYSTEM, TASK, _reply(_call("c2", "Bash", {"command": "ls"}))], 6)
    assert (mine.agent, theirs.agent) == (first.agent, twin.agent)


# -- rule 4: a dropped reply and a retry ---------------------------------------------------------


def _format_error(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"Format error {n}: reply with exactly one bash block."}


def test_an_agent_that_drops_its_reply_and_asks_again_stays_one_agent() -> None:
    """mini-swe-agent keeps its prompt, drops a malformed reply and appends a format error:
    six calls of one agent are one session, seq 0 to 5."""
    threads = Threads()
    messages = [SYSTEM, TASK]
    placed = []
    for n in range(6):
        p = _route(threads, messages, 10 * n)
        threads.answered(p, {"role": "assistant", "content": f"malformed {n}"}, 10 * n + 5)
        placed.append(p)
        if n == 2:  # this reply it keeps, and goes on
            messages = [*messages, {"role": "assistant", "content": "malformed 2"}]
            messages.append({"role": "user", "content": "Observation: ok"})
        else:
            messages = [*messages, _format_error(n)]
    assert [p.seq for p in placed] == list(range(6))
    assert {p.agent.record.id for p in placed} == {"p0.a0"}
    assert len(threads.sessions) == 1


def test_a_retry_of_an_agent_still_in_flight_is_another_agent() -> None:
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    other = _route(threads, [SYSTEM, TASK, _format_error(0)], 2)  # first not answered yet
    assert other.agent is not first.agent


def test_a_retry_is_not_taken_for_a_sub_agent_of_a_plain_tool_call_it_carries() -> None:
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    threads.answered(first, _reply(_call("c1", "bash", {"command": "pytest -x tests"})), 2)
    prompt = [SYSTEM, TASK, _reply(_call("c1", "bash", {"command": "pytest -x tests"}))]
    prompt.append(_result("c1", "1 failed"))
    second = _route(threads, prompt, 3)
    threads.answered(second, {"role": "assistant", "content": "no block"}, 4)
    retry = _route(threads, [*prompt, _format_error(1)], 5)
    assert retry.agent is first.agent and retry.seq == 2 and retry.new_agent is None


# -- rule 3: a sub-agent by the spawning call's id, also once answered ---------------------------


SPAWN = {"message": "Find why test_quotes fails in parser.py and report the line."}


def _codex_parent(threads: Threads) -> tuple[Placement, Placement, list[dict[str, Any]]]:
    """A Codex parent whose ``spawn_agent`` is answered at once: its next request carries the
    spawn's output before the sub-agent's first request arrives."""
    first = _route(threads, [SYSTEM, TASK], 1)
    threads.answered(first, _reply(_call("call_spawn", "spawn_agent", SPAWN)), 2)
    history = [SYSTEM, TASK, _reply(_call("call_spawn", "spawn_agent", SPAWN))]
    history.append(_result("call_spawn", '{"agent_id":"019a-child"}'))
    nxt = _route(threads, history, 3)
    return first, nxt, history


def test_a_forked_sub_agent_of_an_answered_spawn_is_its_child() -> None:
    threads = Threads()
    first, nxt, history = _codex_parent(threads)
    assert nxt.agent is first.agent and nxt.depends_on == ["call_spawn"]  # as before
    [spawn] = nxt.closed
    assert spawn.call.children == []
    threads.answered(nxt, _reply(_call("call_wait", "wait", {"ids": ["019a-child"]})), 4)
    # the child: the parent's history (the spawn and its output), then its own task
    child = _route(threads, [*history, {"role": "user", "content": SPAWN["message"]}], 5)
    rec = child.agent.record
    assert child.new_session is None and child.agent is not first.agent
    assert (rec.parent_agent_id, rec.parent_tool_call_id) == (first.agent.record.id, "call_spawn")
    assert rec.role == "spawn_agent" and child.seq == 0
    # the spawn's tool_call record is written again, now naming its sub-agent
    assert [c.call.id for c in child.closed] == ["call_spawn"]
    assert child.closed[0].call.children == [rec.id]
    # the parent goes on as its own agent
    wait = _reply(_call("call_wait", "wait", {"ids": ["019a-child"]}))
    after = _route(threads, [*history, wait, _result("call_wait", "done")], 6)
    assert after.agent is first.agent and after.seq == 2


def test_a_forked_sub_agent_while_its_parent_is_in_flight_or_without_the_output() -> None:
    threads = Threads()
    _first, _nxt, history = _codex_parent(threads)  # the parent's next call not answered yet
    task = {"role": "user", "content": SPAWN["message"]}
    child = _route(threads, [*history, task], 5)
    assert child.agent.record.parent_tool_call_id == "call_spawn"
    threads2 = Threads()
    first2, _nxt2, history2 = _codex_parent(threads2)
    child2 = _route(threads2, [*history2[:3], task], 5)  # the fork without the spawn's output
    assert child2.agent.record.parent_tool_call_id == "call_spawn"
    assert child2.agent.record.parent_agent_id == first2.agent.record.id


def test_an_answered_plain_call_carried_in_a_new_thread_makes_no_child() -> None:
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    threads.answered(first, _reply(_call("c1", "read_file", {"path": "parser.py"})), 2)
    history = [SYSTEM, TASK, _reply(_call("c1", "read_file", {"path": "parser.py"}))]
    _route(threads, [*history, _result("c1", "x = 1")], 3)
    other = [{"role": "system", "content": "You summarise."}, *history[1:]]
    summary = _route(threads, [*other, _result("c1", "x = 1")], 4)
    assert summary.agent.record.parent_tool_call_id is None


# -- rule 5: a sub-agent by its task text, only of a delegation-like call -----------------------


WORD = "internationalization"


def test_a_sub_agent_is_not_attached_to_another_sessions_plain_call_with_the_same_text() -> None:
    """Two Agents SDK runs in one process: run B delegates ``WORD`` to its counter (an agent
    used as a tool: its prompt is the call's ``input``), then run A calls its plain
    ``word_count`` on the same word. B's counter is B's sub-agent, not A's."""
    threads = Threads()
    orch = {"role": "system", "content": "You delegate every counting question to the counter."}
    b = _route(threads, [orch, {"role": "user", "content": WORD}], 1)
    threads.answered(b, _reply(_call("call_b", "ask_counter", {"input": WORD})), 2)
    plain = {"role": "system", "content": "You count words with your tool."}
    a = _route(threads, [plain, {"role": "user", "content": WORD}], 3)
    threads.answered(a, _reply(_call("call_a", "word_count", {"text": WORD})), 4)
    counter = {"role": "system", "content": "You count the words of the text you are given."}
    sub = _route(threads, [counter, {"role": "user", "content": WORD}], 5)
    assert sub.agent.record.parent_tool_call_id == "call_b"
    assert sub.agent.record.session_id == b.agent.record.session_id
    # with only the plain call outstanding, the same thread is a session of its own
    threads2 = Threads()
    a2 = _route(threads2, [plain, {"role": "user", "content": WORD}], 1)
    threads2.answered(a2, _reply(_call("call_a", "word_count", {"text": WORD})), 2)
    alone = _route(threads2, [counter, {"role": "user", "content": WORD}], 3)
    assert alone.new_session is not None and alone.agent.record.parent_agent_id is None


def test_a_tool_that_got_a_sub_agent_by_id_may_get_one_by_text() -> None:
    """``consult`` looks like no delegation, but once one of its calls got a sub-agent by id
    (a handoff), a later ``consult`` is a parent by its text too."""
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    question = "Which of the parser's quoting rules changed in 3.12?"
    threads.answered(first, _reply(_call("k1", "consult", {"question": question})), 2)
    handed = [{"role": "system", "content": "You are the expert."}, TASK]
    handed.append(_reply(_call("k1", "consult", {"question": question})))
    expert = _route(threads, handed, 3)
    assert expert.agent.record.parent_tool_call_id == "k1"
    threads.answered(expert, {"role": "assistant", "content": "3.12 changed nothing."}, 4)
    history = [SYSTEM, TASK, _reply(_call("k1", "consult", {"question": question}))]
    history.append(_result("k1", "3.12 changed nothing."))
    nxt = _route(threads, history, 5)
    again = "Which of the tokenizer's rules changed in 3.13?"
    threads.answered(nxt, _reply(_call("k2", "consult", {"question": again})), 6)
    expert_prompt = [
        {"role": "system", "content": "You are the expert."},
        {"role": "user", "content": again},
    ]
    expert2 = _route(threads, expert_prompt, 7)
    assert expert2.agent.record.parent_tool_call_id == "k2"


def test_what_looks_like_a_delegation() -> None:
    yes = [
        ("Task", {"description": "d", "prompt": "p", "subagent_type": "general-purpose"}),
        ("Agent", {}),
        ("spawn_agent", {"message": "m"}),
        ("delegate", {"kind": "test_runner", "task": "t"}),
        ("delegate_work", {}),
        ("transfer_to_closer", {}),
        ("run_subagent", {}),
        ("ask_counter", {"input": "text"}),
    ]
    no = [
        ("Bash", {"command": "ls", "description": "list"}),
        ("word_count", {"text": "t"}),
        ("read_file", {"path": "a.py"}),
        ("Edit", {"file_path": "a", "old_string": "b", "new_string": "c"}),
        ("tasks_list", {}),
    ]
    for name, args in yes:
        assert delegation_like(name, json.dumps(args)), name
    for name, args in no:
        assert not delegation_like(name, json.dumps(args)), name


# -- rule 1: the agents' own session headers -----------------------------------------------------


def test_an_agents_own_session_header_names_the_session() -> None:
    cfg, agent_cfg = "x-agentload-session", "x-agentload-agent"
    claude = {"x-claude-code-session-id": "5f0c-uuid"}

    def who(headers: dict[str, str], session_header: str | None = cfg) -> tuple[object, ...]:
        i = identity(headers, session_header, agent_cfg)
        return i.session, i.agent, i.names

    assert who(claude) == ("5f0c-uuid", None, ())
    assert who({**claude, cfg: "mine"}) == ("mine", None, ())  # the configured one wins
    assert who({**claude, cfg: "mine", agent_cfg: "a1"}) == ("mine", "a1", ())
    assert who(claude, None) == (None, None, ())  # --session-header '' turns headers off
    assert who({"thread-id": "t"}) == (None, None, ())  # an agent only within a session
    # Codex: the root thread's id is the session's; a sub-agent's thread and its path name it.
    root = {"session-id": "019a-codex-root", "thread-id": "019a-codex-root"}
    assert who(root) == ("019a-codex-root", "019a-codex-root", ())
    meta = json.dumps({"thread_source": "subagent", "agent_name": "/root/read_a"})
    sub = {**root, "thread-id": "019a-codex-kid1", "x-codex-turn-metadata": meta}
    assert who(sub) == ("019a-codex-root", "019a-codex-kid1", ("019a-codex-kid1", "/root/read_a"))
    bad = {**sub, "x-codex-turn-metadata": "{not json"}
    assert who(bad) == ("019a-codex-root", "019a-codex-kid1", ("019a-codex-kid1",))


def test_within_a_header_session_a_task_is_a_sub_agent_and_a_side_request_a_root() -> None:
    """Claude Code sends its session id on its sub-agents' requests too: the ``Task``
    sub-agent is the main agent's child in that session; an unrelated side request of the
    same session is another root agent of it, not a new session."""
    threads = Threads()
    hint = {"session_hint": "5f0c-uuid"}
    main = _route(threads, [SYSTEM, TASK], 1, **hint)
    prompt = "Search the repository for every caller of parse_quotes and list them."
    task = {"description": "find callers", "prompt": prompt, "subagent_type": "Explore"}
    threads.answered(main, _reply(_call("toolu_t", "Task", task)), 2)
    sub_system = {"role": "system", "content": "You are a search agent."}
    sub = _route(threads, [sub_system, {"role": "user", "content": prompt}], 3, **hint)
    assert sub.new_session is None and sub.agent.record.session_id == "h-5f0c-uuid"
    assert sub.agent.record.parent_tool_call_id == "toolu_t" and sub.agent.record.role == "Explore"
    side = _route(threads, [{"role": "user", "content": "Title for: fix quotes"}], 4, **hint)
    assert side.new_session is None and side.agent.record.parent_agent_id is None
    assert side.agent.record.session_id == "h-5f0c-uuid"


# -- through the real proxy ----------------------------------------------------------------------

MODEL = "agentload-sim"


def _tool(name: str, arg: str) -> dict[str, Any]:
    params = {"type": "object", "properties": {arg: {"type": "string"}}, "required": [arg]}
    return {"type": "function", "function": {"name": name, "parameters": params}}


def _post(http: httpx.Client, url: str, messages: list[dict[str, Any]], **kw: Any) -> Any:
    r = http.post(f"{url}/chat/completions", json={"model": MODEL, "messages": messages, **kw})
    r.raise_for_status()
    return r.json()["choices"][0]["message"]


def test_through_the_proxy_retries_after_dropped_replies_are_one_agent(
    simulator: Any, record_proxy: Any
) -> None:
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    messages = [SYSTEM, TASK]
    with httpx.Client(timeout=60) as http:
        for n in range(6):
            reply = _post(http, proxy.base_url, messages)
            if n == 2:
                messages = [*messages, {"role": "assistant", "content": reply["content"]}]
                messages.append({"role": "user", "content": "Observation: ok"})
            else:
                messages = [*messages, _format_error(n)]
    trace = load_checked(proxy.stop(), n_calls=6)
    [root] = roots(trace)
    assert len(trace.sessions) == 1 and len(trace.agents) == 1
    assert [c.seq for c in trace.calls_of(root.id)] == list(range(6))


def test_through_the_proxy_parallel_runs_do_not_share_sub_agents(
    simulator: Any, record_proxy: Any
) -> None:
    """Two runs of one Agents SDK app (an orchestrator whose tool ``ask_counter`` is a counter
    agent with a plain ``word_count``), interleaved as parallel runs interleave: run X's
    counter starts while run Y's counter's ``word_count`` names the same word. Each counter is
    its own run's sub-agent; the ``word_count`` gets none."""
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    url = proxy.base_url
    orch = {"role": "system", "content": "You delegate every counting question to the counter."}
    counter = {"role": "system", "content": "You count the words of the text you are given."}
    ask, count = [_tool("ask_counter", "input")], [_tool("word_count", "text")]
    # the two runs' questions differ only in punctuation (the simulator's ids follow the
    # prompt, a real server's never repeat), so every call's argument is the same word
    questions = {"X": WORD, "Y": WORD + "!"}
    runs: dict[str, dict[str, Any]] = {}
    with httpx.Client(timeout=60) as http:
        for run in ("X", "Y"):
            prompt = [orch, {"role": "user", "content": questions[run]}]
            reply = _post(http, url, prompt, tools=ask)
            [call] = reply["tool_calls"]
            runs[run] = {"prompt": prompt, "reply": reply, "ask": call}
        for run in ("Y", "X"):  # Y's counter first: its word_count is outstanding when X's starts
            task = json.loads(runs[run]["ask"]["function"]["arguments"])["input"]
            sub = [counter, {"role": "user", "content": task + ("" if run == "X" else ".")}]
            reply = _post(http, url, sub, tools=count)
            [call] = reply["tool_calls"]
            runs[run].update(sub=sub, sub_reply=reply, count=call)
            assert json.loads(call["function"]["arguments"])["text"] == task == WORD
        for run in ("X", "Y"):
            r = runs[run]
            sub = [*r["sub"], r["sub_reply"], _result(r["count"]["id"], "1")]
            done = _post(http, url, sub, tools=count)
            _post(http, url, [*r["prompt"], r["reply"], _result(r["ask"]["id"], done["content"])])
    trace = load_checked(proxy.stop(), n_calls=8)
    assert len(trace.sessions) == 2
    for run in ("X", "Y"):
        ask_id, count_id = runs[run]["ask"]["id"], runs[run]["count"]["id"]
        root = trace.agents[trace.tool_calls[ask_id].agent_id]
        [child] = children(trace, root)
        assert child.parent_tool_call_id == ask_id and child.session_id == root.session_id
        assert trace.tool_calls[ask_id].child_agent_id == child.id
        assert trace.tool_calls[count_id].agent_id == child.id
        assert trace.tool_calls[count_id].child_agent_id is None
        assert len(trace.calls_of(child.id)) == 2 and len(trace.calls_of(root.id)) == 2
        assert trace.calls_of(root.id)[1].depends_on == [child.id]


def test_a_fork_that_carries_several_spawns_is_the_child_of_the_one_its_task_names() -> None:
    """Codex's multi_agent_v2 forks a sub-agent with both of the parent's ``spawn_agent`` calls
    in its history, then its own task: it is the child of the spawn whose message it got; the
    fresh sub-agent of the other spawn, which carries no id, is that spawn's child by text."""
    threads = Threads()
    first = _route(threads, [SYSTEM, TASK], 1)
    task_a, task_b = "SUBTASK: run cat a.txt and report", "SUBTASK: run cat b.txt and report"
    spawns = [
        _call("s_a", "spawn_agent", {"task_name": "read_a", "message": task_a}),
        _call("s_b", "spawn_agent", {"task_name": "read_b", "message": task_b}),
    ]
    threads.answered(first, _reply(*spawns), 2)
    history = [SYSTEM, TASK, _reply(*spawns), _result("s_a", "ok"), _result("s_b", "ok")]
    threads.answered(_route(threads, history, 3), _reply(_call("w", "wait_agent", {})), 4)
    fork = [SYSTEM, TASK, _reply(spawns[0]), _result("s_a", "aborted"), _reply(spawns[1])]
    fork += [_result("s_b", "aborted"), {"role": "user", "content": f"NEW_TASK: {task_a}"}]
    child_a = _route(threads, fork, 5)
    assert child_a.agent.record.parent_tool_call_id == "s_a"
    # the fresh one opens like the root: without a session header, another session of it
    fresh = [SYSTEM, {"role": "user", "content": f"NEW_TASK: {task_b}"}]
    assert _route(threads, fresh, 6).new_session is not None
    # within the session Codex's header names, it is the other spawn's child
    threads2 = Threads()
    hint = {"session_hint": "019a-codex"}
    first2 = _route(threads2, [SYSTEM, TASK], 1, **hint)
    threads2.answered(first2, _reply(*spawns), 2)
    threads2.answered(_route(threads2, history, 3, **hint), _reply(_call("w", "wait", {})), 4)
    assert _route(threads2, fork, 5, **hint).agent.record.parent_tool_call_id == "s_a"
    fresh_b = _route(threads2, fresh, 6, **hint)
    assert fresh_b.agent.record.parent_tool_call_id == "s_b"
    assert [c.call.id for c in fresh_b.closed] == ["s_b"]  # its record names the child now
    assert fresh_b.closed[0].call.children == [fresh_b.agent.record.id]


# -- rule 3 by name: a sub-agent that carries nothing of its spawn call -------------------------


def _codex_session(threads: Threads, sid: str, spawn_result: str) -> Placement:
    """A Codex root thread (session ``sid``) whose spawn_agent was answered with
    ``spawn_result``; its next request (which closes the spawn) is placed."""
    first = _route(threads, [SYSTEM, TASK], 1, session_hint=sid, agent_hint=sid)
    call = _call(f"call_{sid}", "spawn_agent", {"task_name": "read_a", "message": "[encrypted]"})
    threads.answered(first, _reply(call), 2)
    history = [SYSTEM, TASK, _reply(call), _result(f"call_{sid}", spawn_result)]
    return _route(threads, history, 3, session_hint=sid, agent_hint=sid)


def _fresh_child(threads: Threads, sid: str, thread: str, now: int) -> Placement:
    """A sub-agent started without the parent's history: its own instructions and a task whose
    text is encrypted; only its headers name it."""
    task = {"role": "user", "content": "Message Type: NEW_TASK\nPayload:\n[encrypted_content]"}
    names = (thread, "/root/read_a")
    return _route(threads, [SYSTEM, task], now, session_hint=sid, agent_hint=thread, names=names)


def test_a_sub_agent_the_spawn_result_names_is_its_child() -> None:
    threads = Threads()
    parent = _codex_session(threads, "s1", '{"task_name":"/root/read_a"}')
    child = _fresh_child(threads, "s1", "s1-thread-kid", 4)
    rec = child.agent.record
    assert (rec.parent_agent_id, rec.parent_tool_call_id) == (parent.agent.record.id, "call_s1")
    assert rec.session_id == parent.agent.record.session_id and rec.role == "spawn_agent"
    assert [c.call.id for c in child.closed] == ["call_s1"]  # its record names the child now


def test_a_sub_agent_that_starts_before_its_spawn_is_answered_is_linked_when_it_is() -> None:
    threads = Threads()
    sid = "s2"
    first = _route(threads, [SYSTEM, TASK], 1, session_hint=sid, agent_hint=sid)
    call = _call("call_s2", "spawn_agent", {"message": "[encrypted]"})
    threads.answered(first, _reply(call), 2)
    child = _fresh_child(threads, sid, "s2-thread-kid", 3)  # before the parent's next request
    assert child.agent.record.parent_agent_id is None
    threads.answered(child, _reply(content="working"), 4)
    history = [SYSTEM, TASK, _reply(call), _result("call_s2", '{"agent_id":"s2-thread-kid"}')]
    nxt = _route(threads, history, 5, session_hint=sid, agent_hint=sid)
    assert nxt.linked_agents == [child.agent.record]
    rec = child.agent.record
    assert (rec.parent_agent_id, rec.parent_tool_call_id) == (first.agent.record.id, "call_s2")
    assert rec.end_ns is None  # a sub-agent linked late goes on
    assert nxt.closed[0].call.children == [rec.id]


def test_a_name_never_links_across_sessions_or_to_a_plain_call() -> None:
    threads = Threads()
    _codex_session(threads, "s3", '{"task_name":"/root/read_a"}')
    other = _fresh_child(threads, "s4", "s4-thread-kid", 4)  # another session, the same path
    assert other.agent.record.parent_agent_id is None
    threads2 = Threads()
    first = _route(threads2, [SYSTEM, TASK], 1, session_hint="s5", agent_hint="s5")
    call = _call("call_s5", "read_file", {"path": "/root/read_a"})
    threads2.answered(first, _reply(call), 2)
    history = [SYSTEM, TASK, _reply(call), _result("call_s5", '["/root/read_a"]')]
    _route(threads2, history, 3, session_hint="s5", agent_hint="s5")
    plain = _fresh_child(threads2, "s5", "s5-thread-kid", 4)
    assert plain.agent.record.parent_agent_id is None


def test_a_fork_of_several_running_spawns_waits_for_the_result_that_names_it() -> None:
    """Codex forks a sub-agent while its spawns still run: its history carries both spawn
    calls with the output "aborted", and its task is encrypted. No guess is made; the parent's
    request with the real results links each sub-agent to the spawn that names it, and the
    fork's "aborted" never closes the parent's calls."""
    threads, sid = Threads(), "s6"
    first = _route(threads, [SYSTEM, TASK], 1, session_hint=sid, agent_hint=sid)
    calls = [_call(f"call_{x}", "spawn_agent", {"task_name": f"read_{x}"}) for x in "ab"]
    threads.answered(first, _reply(*calls), 2)
    fork = [SYSTEM, TASK, _reply(calls[0]), _result("call_a", "aborted")]
    fork += [_reply(calls[1]), _result("call_b", "aborted"), {"role": "user", "content": "[x]"}]
    a = _route(threads, fork, 3, session_hint=sid, agent_hint="s6-thread-a",
               names=("s6-thread-a", "/root/read_a"))  # fmt: skip
    assert a.agent.record.parent_agent_id is None and a.closed == []
    assert set(threads.outstanding) == {"call_a", "call_b"}  # still the parent's to close
    b = _fresh_child(threads, sid, "s6-thread-b", 4)
    b.agent.names = ("s6-thread-b", "/root/read_b")
    results = [_result("call_a", '{"task_name":"/root/read_a"}')]
    results.append(_result("call_b", '{"task_name":"/root/read_b"}'))
    nxt = _route(
        threads, [SYSTEM, TASK, _reply(*calls), *results], 5, session_hint=sid, agent_hint=sid
    )
    assert nxt.agent is first.agent
    assert {r.id: r.parent_tool_call_id for r in nxt.linked_agents} == {
        a.agent.record.id: "call_a",
        b.agent.record.id: "call_b",
    }
    assert [c.result for c in nxt.closed] == [
        '{"task_name":"/root/read_a"}',
        '{"task_name":"/root/read_b"}',
    ]


# -- rule 6: an agent that rebuilds what comes before its last reply (aider) ---------------------

AIDER_SYSTEM = {
    "role": "system",
    "content": "Act as an expert software developer. Use *SEARCH/REPLACE block*s.",
}
REPO_MAP = {
    "role": "user",
    "content": "Here are summaries of some files present in my git repository.\n\ncalendar.py:\n│def leapdays(y1, y2):",
}
MAP_OK = {
    "role": "assistant",
    "content": "Ok, I won't try and edit those files without asking first.",
}
REMINDER = "\n\n# *SEARCH/REPLACE block* Rules:\n..."
ISSUE = "calendar.leapdays(1997, 2020) returns 3 instead of 5."
ASK = "The change belongs in `calendar.py`. Please add it to the chat so I can edit it:\n\ncalendar.py\n"


def _aider_calls() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """aider's first two requests: the second re-sends the files in the chat where the first
    said there were none, and moves the reminder from the task to its newest message."""
    first = [AIDER_SYSTEM, REPO_MAP, MAP_OK,
             {"role": "user", "content": "I am not sharing any files that you can edit yet."},
             {"role": "assistant", "content": "Ok, based on your requests I will suggest which files need to be edited."},
             {"role": "user", "content": ISSUE + REMINDER}]  # fmt: skip
    second = [AIDER_SYSTEM, REPO_MAP, MAP_OK,
              {"role": "user", "content": "I have *added these files to the chat*\n\ncalendar.py\n```\ndef leapdays(y1, y2): ...\n```\n"},
              {"role": "assistant", "content": "Ok, any changes I propose will be to those files."},
              {"role": "user", "content": ISSUE},
              {"role": "assistant", "content": ASK + "\n"},
              {"role": "user", "content": "I added these files to the chat: calendar.py" + REMINDER}]  # fmt: skip
    return first, second


def test_an_agent_that_rebuilds_its_history_around_its_last_reply_continues() -> None:
    threads = Threads()
    first, second = _aider_calls()
    p1 = _route(threads, first, 1)
    threads.answered(p1, {"role": "assistant", "content": ASK}, 2)
    p2 = _route(threads, second, 3)
    assert p2.agent is p1.agent and p2.seq == 1
    assert p2.new_agent is None and p2.new_session is None


def test_a_rebuilt_history_is_matched_only_on_a_telling_reply_of_an_agent_that_waits() -> None:
    first, second = _aider_calls()
    # a reply too short to tell agents apart
    threads = Threads()
    p1 = _route(threads, first, 1)
    threads.answered(p1, {"role": "assistant", "content": "Ok."}, 2)
    short = [*second[:6], {"role": "assistant", "content": "Ok."}, second[7]]
    assert _route(threads, short, 3).new_session is not None
    # the agent still waits for its reply: nothing carries it yet
    threads = Threads()
    p1 = _route(threads, first, 1)
    p2 = _route(threads, second, 3)
    assert p2.agent is not p1.agent and p2.new_session is not None
    # another session, named by a header
    threads = Threads()
    p1 = _route(threads, first, 1, session_hint="a")
    threads.answered(p1, {"role": "assistant", "content": ASK}, 2)
    p2 = _route(threads, second, 3, session_hint="b")
    assert p2.agent is not p1.agent and p2.agent.record.session_id != p1.agent.record.session_id


# -- rule 3: a fork without headers that comes before its parent's next request -----------------

FORK_TASK = "FORKTASK: read /repo/a.txt and report its first word"


def _qwen_fork(threads: Threads) -> tuple[Placement, list[dict[str, Any]], list[dict[str, Any]]]:
    """Qwen Code (0.15.10) forks an ``agent`` call without ``subagent_type``: the spawn is
    answered "Fork started" at once; the fork's request is the parent's history, that result,
    the directive (which quotes the call's prompt), an acknowledgement and "Begin."; the
    parent's next request is the history and the result. Both carry no header."""
    first = _route(threads, [SYSTEM, TASK], 1)
    spawn = _call("call_0000_0", "agent", {"description": "read a", "prompt": FORK_TASK})
    threads.answered(first, _reply(spawn, content="I will fork."), 2)
    parent = [SYSTEM, TASK, _reply(spawn, content="I will fork.")]
    parent.append(_result("call_0000_0", "Fork started — processing in background"))
    directive = f"<fork-boilerplate>\nYou are a forked worker.\n</fork-boilerplate>\n\nDirective: {FORK_TASK}"
    fork = [*parent, {"role": "user", "content": directive}]
    fork += [{"role": "assistant", "content": "Understood."}, {"role": "user", "content": "Begin."}]
    return first, parent, fork


def test_a_fork_that_comes_before_its_parents_next_request_is_the_spawns_child() -> None:
    threads = Threads()
    first, parent, fork = _qwen_fork(threads)
    child = _route(threads, fork, 3)  # the fork first
    rec = child.agent.record
    assert child.agent is not first.agent and child.new_session is None and child.seq == 0
    assert (rec.parent_agent_id, rec.parent_tool_call_id) == ("p0.a0", "call_0000_0")
    assert rec.role == "agent" and rec.context_policy == "forked"
    assert child.closed == [] and child.depends_on == []  # the spawn's result is the parent's
    nxt = _route(threads, parent, 4)  # then the parent's own next request
    assert (nxt.agent, nxt.seq, nxt.new_agent) == (first.agent, 1, None)
    assert nxt.depends_on == ["call_0000_0"]  # in flight: a fork runs in the background
    assert [c.call.id for c in nxt.closed] == ["call_0000_0"]
    # each goes on as itself
    threads.answered(child, _reply(_call("c_read", "read_file", {"path": "/repo/a.txt"})), 5)
    threads.answered(nxt, _reply(_call("c_sh", "run_shell_command", {"command": "ls"})), 6)
    read = _reply(_call("c_read", "read_file", {"path": "/repo/a.txt"}))
    fork2 = _route(threads, [*fork, read, _result("c_read", "alpha")], 7)
    sh = _reply(_call("c_sh", "run_shell_command", {"command": "ls"}))
    parent2 = _route(threads, [*parent, sh, _result("c_sh", "a.txt")], 8)
    assert (fork2.agent, fork2.seq) == (child.agent, 1)
    assert (parent2.agent, parent2.seq) == (first.agent, 2)
    assert child.agent.record.end_ns is None  # ended with the result, it went on


def test_a_fork_that_comes_after_its_parents_next_request_is_the_spawns_child_too() -> None:
    for answered in (False, True):
        threads = Threads()
        first, parent, fork = _qwen_fork(threads)
        nxt = _route(threads, parent, 3)
        if answered:
            threads.answered(nxt, _reply(_call("c_sh", "run_shell_command", {"command": "ls"})), 4)
        child = _route(threads, fork, 5)
        rec = child.agent.record
        assert (nxt.agent, nxt.seq) == (first.agent, 1)
        assert (rec.parent_agent_id, rec.parent_tool_call_id) == ("p0.a0", "call_0000_0")
        assert rec.context_policy == "forked"


def test_a_parents_next_request_that_quotes_its_task_only_in_a_result_is_no_fork() -> None:
    threads = Threads()
    first, parent, _fork = _qwen_fork(threads)
    quoted = [*parent[:3], _result("call_0000_0", f"Done: {FORK_TASK} -> alpha")]
    nxt = _route(threads, quoted, 3)
    assert (nxt.agent, nxt.seq, nxt.new_agent) == (first.agent, 1, None)


# -- rule 7: a side call of a session, with no header -------------------------------------------

OPENCODE = {"role": "system", "content": "You are opencode, an interactive CLI tool."}
REQUEST = {"role": "user", "content": '"TASK-MAIN: fix the bug in calc.py"'}
TITLER = {"role": "system", "content": "You are a title generator. You output ONLY a title."}
TITLE_ASK = [
    TITLER,
    {"role": "user", "content": "Generate a title for this conversation:\n"},
    REQUEST,
]


def test_a_title_call_before_or_after_the_main_agent_is_a_side_agent_of_its_session() -> None:
    """opencode (1.18.33) asks its title generator with the user's request wrapped in its own
    words, before the main agent's first request (in our runs) or after it: one session, the
    title call a side agent (decided at the end: the root with fewer calls)."""
    for title_first in (True, False):
        threads = Threads()
        placed = []
        order = (
            [TITLE_ASK, [OPENCODE, REQUEST]] if title_first else [[OPENCODE, REQUEST], TITLE_ASK]
        )
        for n, messages in enumerate(order):
            p = _route(threads, messages, n)
            threads.answered(p, {"role": "assistant", "content": f"reply {n}"}, n + 1)
            placed.append(p)
        main = placed[1] if title_first else placed[0]
        more = [
            OPENCODE,
            REQUEST,
            {"role": "assistant", "content": main.agent.last_reply["content"]},
        ]
        nxt = _route(threads, [*more, {"role": "user", "content": "go on"}], 9)
        assert nxt.agent is main.agent and len(threads.sessions) == 1
        [side] = threads.side_agents()
        assert side is not main.agent and side.record.parent_agent_id is None


def test_two_runs_with_the_same_request_under_other_instructions_stay_two_sessions() -> None:
    threads = Threads()
    a = _route(threads, [OPENCODE, REQUEST], 1)
    b = _route(threads, [TITLER, REQUEST], 2)
    assert a.agent.record.session_id != b.agent.record.session_id
    assert threads.side_agents() == []


def test_a_side_request_of_a_header_session_is_a_side_agent() -> None:
    """Claude Code names its session in a header; its title request is a root agent of the
    session, marked a side agent once the main agent made more calls."""
    threads = Threads()
    main = _route(threads, [SYSTEM, TASK], 1, session_hint="s1")
    threads.answered(main, _reply(_call("c1", "Bash", {"command": "ls"})), 2)
    title = _route(threads, [TITLER, TASK], 3, session_hint="s1")
    threads.answered(title, {"role": "assistant", "content": "Fix quotes"}, 4)
    carried = _reply(_call("c1", "Bash", {"command": "ls"}))
    _route(threads, [SYSTEM, TASK, carried, _result("c1", "a.py")], 5, session_hint="s1")
    assert [a.record.id for a in threads.side_agents()] == [title.agent.record.id]
