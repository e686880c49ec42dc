"""The proxy's thread rules (``agentload.record.threads``) on the exact request order that
made two parallel ``generate`` sessions one: the second session's first prompt quotes a path
that the first session's outstanding ``read_file`` names."""

from __future__ import annotations

import json
from typing import Any

from agentload.hashing import content_id
from agentload.record.threads import Threads

SYSTEM = {"role": "system", "content": "You are the lead engineer of a coding-agent team."}
REPO = "Repository map:\nemail/quoprimime.py\nemail/header.py\n\nFix the failing tests."


def _route(threads: Threads, messages: list[dict[str, Any]], now: int) -> Any:
    ids = [content_id(m) for m in messages]
    return threads.route(messages, ids, now)


def _reply(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    """A model reply with one tool call."""
    fn = {"name": name, "arguments": json.dumps(args)}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": fn}],
    }


def test_a_second_session_of_a_root_agent_is_not_its_sub_agent() -> None:
    threads = Threads()
    first = _route(threads, [SYSTEM, {"role": "user", "content": REPO}], 1)
    threads.answered(first, _reply("call-1", "read_file", path="email/quoprimime.py"), 2)
    # the other session starts while that read is outstanding, with the same instructions
    second = _route(threads, [SYSTEM, {"role": "user", "content": REPO + " "}], 3)
    assert second.new_session is not None
    assert second.agent.record.parent_agent_id is None
    assert second.agent.record.session_id != first.agent.record.session_id


def test_a_new_thread_with_its_own_instructions_quoting_a_delegation_is_its_sub_agent() -> None:
    threads = Threads()
    first = _route(threads, [SYSTEM, {"role": "user", "content": REPO}], 1)
    task = "Read email/quoprimime.py and summarise it."
    threads.answered(first, _reply("call-1", "Task", prompt=task, subagent_type="reader"), 2)
    sub = [
        {"role": "system", "content": "You are a file-reader sub-agent."},
        {"role": "user", "content": task},
    ]
    child = _route(threads, sub, 3)
    assert child.new_session is None
    assert child.agent.record.parent_agent_id == first.agent.record.id
    assert child.agent.record.parent_tool_call_id == "call-1"
    assert child.agent.record.role == "reader"


def test_a_new_thread_quoting_a_plain_tool_call_is_not_its_sub_agent() -> None:
    """Only a delegation-like call is a parent by text (rule 5): a ``read_file`` whose path a
    new thread happens to name is not."""
    threads = Threads()
    first = _route(threads, [SYSTEM, {"role": "user", "content": REPO}], 1)
    threads.answered(first, _reply("call-1", "read_file", path="email/quoprimime.py"), 2)
    sub = [
        {"role": "system", "content": "You are a file-reader sub-agent."},
        {"role": "user", "content": "Read email/quoprimime.py and summarise it."},
    ]
    other = _route(threads, sub, 3)
    assert other.new_session is not None
    assert other.agent.record.parent_agent_id is None


def test_two_sessions_delegating_the_same_task_each_get_their_own_sub_agent() -> None:
    threads = Threads()
    task = "Run the tests and report each failure with its traceback frames."
    roots = []
    for n in (1, 2):
        system = {"role": "system", "content": f"You are the lead of team {n}."}
        root = _route(threads, [system, {"role": "user", "content": REPO}], n)
        threads.answered(root, _reply(f"del-{n}", "delegate", task=task), 10 + n)
        roots.append(root)
    # session 2's sub-agent arrives first, right after its own call
    runner = {"role": "system", "content": "You are a test-runner sub-agent."}
    second = _route(threads, [runner, {"role": "user", "content": task}], 20)
    first = _route(threads, [runner, {"role": "user", "content": task + " "}], 21)
    assert second.agent.record.parent_tool_call_id == "del-2"
    assert first.agent.record.parent_tool_call_id == "del-1"
    assert second.agent.record.session_id == roots[1].agent.record.session_id


def test_a_sub_agent_under_its_parents_instructions_given_the_task_itself_is_its_child() -> None:
    """opencode (1.18.33) runs a ``task`` sub-agent under the main agent's own system prompt,
    with the call's ``prompt`` as its user message: the child of that call, not a second
    session (a second session merely quoting the task stays one, above)."""
    threads = Threads()
    first = _route(threads, [SYSTEM, {"role": "user", "content": REPO}], 1)
    task = "SUBTASK: read email/header.py and report its first function."
    threads.answered(first, _reply("call-1", "task", prompt=task, subagent_type="general"), 2)
    child = _route(threads, [SYSTEM, {"role": "user", "content": task}], 3)
    assert child.new_session is None
    assert child.agent.record.parent_tool_call_id == "call-1"
    assert child.agent.record.role == "general"
    quoting = _route(threads, [SYSTEM, {"role": "user", "content": f"{REPO}\n{task}"}], 4)
    assert quoting.new_session is not None
