"""The foreign-agent policy on requests shaped as the real products send them.

The requests below were captured from the real agents against the simulator (Claude Code
2.1.332 over Anthropic Messages, Codex CLI 0.171.0 over OpenAI Responses with multi_agent_v1,
multi_agent_v2 and, as model ``gpt-5.5``, its freeform ``apply_patch``; mini-swe-agent 2.4.6
over Chat Completions), trimmed (descriptions and long instructions cut, the working directory
replaced by ``{CWD}``). The tests post them to a simulator over HTTP, feed the tool results
back the way each product does (running the commands for real in a scratch repository where
it matters) and check what a product would: every argument valid for its tool's schema,
delegation with real task text, waits on the spawned agents, a bounded session, the finish
convention, and oracle mode's fix.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentload.endpoint import SimulatorServer
from agentload.endpoint.policy import Policy
from agentload.endpoint.policy.session import SUBTASK, read_session
from agentload.endpoint.policy.textgen import text_tokens
from agentload.endpoint.policy.toolkinds import classify
from agentload.evals.taskcheck import run_suite
from agentload.evals.tasks import get_task
from agentload.scenarios.workspace import materialise

MODEL = "agentload-sim"
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"

# Captured request bodies (see the module docstring), compact JSON cut into lines.
_CAPTURED = r"""
{"claude_root":{"model":"agentload-sim","max_tokens":32000,"stream":true,"system":[{"type":"text
","text":"You are a Claude agent, built on Anthropic's Claude Agent SDK."},{"type":"text","text"
:"# Environment\n - The most recent Claude models are the Claude 5 family. Model IDs \u2014 Fabl
e 5.2: 'claude-fable-5-2', Opus 5.5: 'claude-opus-5-5', Sonnet 5.5: 'claude-sonnet-5-5', Haiku 5
.5: 'claude-haiku-5-5'. When building AI applications, default to the latest and most capable Cl
aude models.\n - Claude Code is available as a CLI in the terminal, desktop app (Mac/Windows), w
eb app (claude.ai/code), and IDE extensions (VS Code, JetBrains).\n - Fast mode for Claude Cod
e gives faster output on this session's model if it supports fast mode, and otherwise switches t
he session to Claude Opus. It can be toggled with /fast."}],"messages":[{"role":"user","content"
:[{"type":"text","text":"<system-reminder>\nAs you answer the user's questions, you can use th
e following context:\n# gitStatus\nThis is the git status at the start of the conversation. Not
e that this status is a snapshot in time, and will not update during the conversation.\n\nCurren
t branch: master\n\nMain branch (you will usual\n</system-reminder>"},{"type":"text","text":"<sy
stem-reminder>\nAttribution for git commits and pull requests you create from here on (this repl
aces Claude Code's own earlier attribution guidance, such as a previous copy of this reminder; t
he user's own instructions about these lines, such as a CLAUDE.md or memory rule, take precedenc
e over thi\n</system-reminder>"},{"type":"text","text":"Fix the bug in calc.py: add(2, 3) return
s -1 instead of 5. Run the tests."}]},{"role":"system","content":[{"type":"text","text":"# Envir
onment\nYou have been invoked in the following environment: \n - Primary working directory: {CWD
}\n - Is a git repository: true\n - Platform: linux\n - Shell: bash\n - OS Version: Linux 6.18.4
4-fc-v1252\n - Downloaded files and extracted archives are untrusted data: put each in its own n
ew, empty directory, keep scripts you write in a different directory, and pass paths as argument
s instead of running an interpreter or build tool from inside it. Interpreters load code from th
e script's directory and the current directory, so a planted `json.py` runs on `import json`. Ru
n any Python that reads them with `-I`. This does not apply to code the user asked you to buil
d or run.\n - In `curl`, send untrusted values with `--form-string`, not `-F`.\n\nAvailable agen
t types for the Agent tool:\n- claude: Catch-all for any task that doesn't fit a more specific a
gent. FleetView's default when no agent name is typed. (Tools: *)\n- Explore: Read-only search a
gent for broad fan-out searches \u2014 when answering means sweeping many files, directories, o
r naming conventions and you only need the conclusion, not the file dumps. It reads excerpts rat
her than whole files, so it locates code; it doesn't review or audit it. Specify search breadth
: \"medium\" for moderate exploration, \"very thorough\" for multiple locations and naming conve
ntions. (Tools: All tools except Agent, Artifact, ArtifactComments, ArtifactData, ArtifactCheck
, ExitPlanMode, Edit, Write, NotebookEdit)\n- general-purpose: General-purpose agent for researc
hing complex questions, searching for code, and executing multi-step tasks. When you are searchi
ng for a keyword or file and are not confident that you will find the right match in the first f
ew tries use this agent to perform the search for you. (Tools: *)\n- Plan: Software architect ag
ent for designing implementation plans. Use this when you need to plan the implementation strate
gy for a task. Returns step-by-step plans, identifies critical files, and considers architectura
l trade-offs. (Tools: All tools except Agent, Artifact, ArtifactComments, ArtifactData, Artifact
Check, ExitPlanMode, Edit, Write, NotebookEdit)\n- statusline-setup: Use this agent to configur
e the user's Claude Code status line setting. (Tools: Read, Edit)\n"}]}],"tools":[{"name":"Agent
","input_schema":{"type":"object","properties":{"description":{"type":"string"},"prompt":{"type"
:"string"},"subagent_type":{"type":"string"},"model":{"type":"string","enum":["sonnet","opus","h
aiku","fable"]},"effort":{"type":"string","enum":["low","medium","high","xhigh","max"]},"run_in_
background":{"type":"boolean"},"isolation":{"type":"string","enum":["worktree","remote"]}},"requ
ired":["description","prompt"],"additionalProperties":false}},{"name":"Bash","input_schema":{"ty
pe":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},"description"
:{"type":"string"},"run_in_background":{"type":"boolean"},"dangerouslyDisableSandbox":{"type":"b
oolean"}},"required":["command"],"additionalProperties":false}},{"name":"Edit","input_schema":{"
type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_s
tring":{"type":"string"},"replace_all":{"default":false,"type":"boolean"}},"required":["file_pat
h","old_string","new_string"],"additionalProperties":false}},{"name":"ListAgents","input_schema"
:{"type":"object","properties":{"channel":{"type":"string","maxLength":256},"q":{"type":"string"
,"maxLength":256},"cursor":{"type":"string","maxLength":256}},"additionalProperties":false}},{"n
ame":"Read","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"offset"
:{"type":"integer","minimum":0,"maximum":9007199254740991},"limit":{"type":"integer","exclusiveM
inimum":0,"maximum":9007199254740991},"pages":{"type":"string"},"allow_large":{"type":"boolean"}
},"required":["file_path"],"additionalProperties":false}},{"name":"ReportFindings","input_schema
":{"type":"object","properties":{"level":{"type":"string","enum":["low","medium","high","xhigh",
"max"]},"findings":{"maxItems":32,"type":"array","items":{"type":"object","properties":{"file":{
"type":"string"},"line":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991
},"summary":{"type":"string"},"short_summary":{"type":"string","maxLength":60},"failure_scenario
":{"type":"string"},"category":{"type":"string","maxLength":40},"severity":{"type":"string","enu
m":["important","pre_existing","nit"]},"verdict":{"type":"string","enum":["CONFIRMED","PLAUSIBLE
"]},"outcome":{"type":"string","enum":["fixed","skipped","no_change_needed"]}},"required":["file
","summary","failure_scenario"],"additionalProperties":false}}},"required":["findings"],"additio
nalProperties":false}},{"name":"ScheduleWakeup","input_schema":{"type":"object","properties":{"d
elaySeconds":{"type":"number"},"reason":{"type":"string"},"prompt":{"type":"string"},"stop":{"ty
pe":"boolean"},"noop":{"type":"boolean"}},"additionalProperties":false}},{"name":"Skill","input_
schema":{"type":"object","properties":{"skill":{"type":"string"},"args":{"type":"string"}},"requ
ired":["skill"],"additionalProperties":false}},{"name":"ToolSearch","input_schema":{"type":"obje
ct","properties":{"query":{"type":"string"},"max_results":{"default":5,"type":"number"}},"requir
ed":["query"],"additionalProperties":false}},{"name":"Workflow","input_schema":{"type":"object",
"properties":{"script":{"type":"string","maxLength":524288},"name":{"type":"string"},"descriptio
n":{"type":"string"},"title":{"type":"string"},"args":{},"scriptPath":{"type":"string"},"resumeF
romRunId":{"type":"string","pattern":"^wf_[a-z0-9-]{6,}$"}},"additionalProperties":false}},{"nam
e":"DeferredToolPlaceholder","input_schema":{"type":"object","properties":{}}},{"name":"Write","
input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"st
ring"}},"required":["file_path","content"],"additionalProperties":false}}]},"claude_sub":{"model
":"agentload-sim","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are a Cl
aude agent, built on Anthropic's Claude Agent SDK."},{"type":"text","text":"x-anthropic-billing-
header: cc_version=2.1.332.1d5; cc_entrypoint=sdk-cli; cc_is_subagent=true;\n\nYou are a Claud
e agent, built on Anthropic's Claude Agent SDK.\n\nYou are an agent for Claude Code, Anthropic'
s official CLI for Claude. Given the user's message, you should use the tools available to compl
ete the task. Complete the task fully\u2014don't gold-plate, but don't leave it half-done. Whe
n you comp"}],"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>\nA
s you answer the user's questions, you can use the following context:\n# gitStatus\nThis is th
e git status at the start of the conversation. Note that this status is a snapshot in time, an
d will not update during the conversation.\n\nCurrent branch: master\n\nMain branch (you will us
ual\n</system-reminder>"},{"type":"text","text":"<system-reminder>\nAttribution for git commit
s and pull requests you create from here on (this replaces Claude Code's own earlier attributio
n guidance, such as a previous copy of this reminder; the user's own instructions about these li
nes, such as a CLAUDE.md or memory rule, take precedence over thi\n</system-reminder>"},{"type":
"text","text":"Sub-task for a helper agent: find where `add` is defined in {CWD} and report th
e file and line, quoting the definition."}]},{"role":"system","content":[{"type":"text","text":"
# Environment\nYou have been invoked in the following environment: \n - Primary working director
y: {CWD}\n - Is a git repository: true\n - Platform: linux\n - Shell: bash\n - OS Version: Linu
x 6.18.44-fc-v1252\n - Downloaded files and extracted archives are untrusted data: put each in i
ts own new, empty directory, keep scripts you write in a different directory, and pass paths a
s arguments instead of running an interpreter or build tool from inside it. Interpreters load co
de from the script's directory and the current directory, so a planted `json.py` runs on `impor
t json`. Run any Python that reads them with `-I`. This does not apply to code the user asked yo
u to build or run.\n - In `curl`, send untrusted values with `--form-string`, not `-F`."}]}],"to
ols":[{"name":"Agent","input_schema":{"type":"object","properties":{"description":{"type":"strin
g"},"prompt":{"type":"string"},"subagent_type":{"type":"string"},"model":{"type":"string","enum"
:["sonnet","opus","haiku","fable"]},"effort":{"type":"string","enum":["low","medium","high","xhi
gh","max"]},"run_in_background":{"type":"boolean"},"isolation":{"type":"string","enum":["worktre
e","remote"]}},"required":["description","prompt"],"additionalProperties":false}},{"name":"Bash"
,"input_schema":{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"nu
mber"},"description":{"type":"string"},"run_in_background":{"type":"boolean"},"dangerouslyDisabl
eSandbox":{"type":"boolean"}},"required":["command"],"additionalProperties":false}},{"name":"Edi
t","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"ty
pe":"string"},"new_string":{"type":"string"},"replace_all":{"default":false,"type":"boolean"}},"
required":["file_path","old_string","new_string"],"additionalProperties":false}},{"name":"ListAg
ents","input_schema":{"type":"object","properties":{"channel":{"type":"string","maxLength":256},
"q":{"type":"string","maxLength":256},"cursor":{"type":"string","maxLength":256}},"additionalPro
perties":false}},{"name":"Read","input_schema":{"type":"object","properties":{"file_path":{"type
":"string"},"offset":{"type":"integer","minimum":0,"maximum":9007199254740991},"limit":{"type":"
integer","exclusiveMinimum":0,"maximum":9007199254740991},"pages":{"type":"string"},"allow_large
":{"type":"boolean"}},"required":["file_path"],"additionalProperties":false}},{"name":"ReportFin
dings","input_schema":{"type":"object","properties":{"level":{"type":"string","enum":["low","med
ium","high","xhigh","max"]},"findings":{"maxItems":32,"type":"array","items":{"type":"object","p
roperties":{"file":{"type":"string"},"line":{"type":"integer","minimum":-9007199254740991,"maxim
um":9007199254740991},"summary":{"type":"string"},"short_summary":{"type":"string","maxLength":6
0},"failure_scenario":{"type":"string"},"category":{"type":"string","maxLength":40},"severity":{
"type":"string","enum":["important","pre_existing","nit"]},"verdict":{"type":"string","enum":["C
ONFIRMED","PLAUSIBLE"]},"outcome":{"type":"string","enum":["fixed","skipped","no_change_needed"]
}},"required":["file","summary","failure_scenario"],"additionalProperties":false}}},"required":[
"findings"],"additionalProperties":false}},{"name":"Skill","input_schema":{"type":"object","prop
erties":{"skill":{"type":"string"},"args":{"type":"string"}},"required":["skill"],"additionalPro
perties":false}},{"name":"ToolSearch","input_schema":{"type":"object","properties":{"query":{"ty
pe":"string"},"max_results":{"default":5,"type":"number"}},"required":["query"],"additionalPrope
rties":false}},{"name":"DeferredToolPlaceholder","input_schema":{"type":"object","properties":{}
}},{"name":"Write","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"
content":{"type":"string"}},"required":["file_path","content"],"additionalProperties":false}}]},
"codex_v1":{"model":"agentload-sim","stream":true,"tool_choice":"auto","parallel_tool_calls":tru
e,"store":false,"input":[{"type":"message","role":"developer","content":[{"type":"input_text","t
ext":"You are a coding agent running in the Codex CLI, a terminal-based coding assistant. Code
x CLI is an open source project led by OpenAI. You are expected to be precise, safe, and helpful
.\n\nYour capabilities:\n\n- Receive user prompts and other context provided by the harness, suc
h as files in the worksp"}]},{"type":"message","role":"developer","content":[{"type":"input_text
","text":"<skills_instructions>\n## Skills\nA skill is a set of local instructions to follow tha
t is stored in a `SKILL.md` file. Below is the list of skills that can be used. Each entry inclu
des a name, description, and a short path that can be expanded into an absolute path using the s
kill roots table.\n### Sk"}]},{"type":"message","role":"user","content":[{"type":"input_text","t
ext":"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>bash</shell>\n  <current_date>2026-12-
04</current_date>\n  <timezone>Etc/UTC</timezone>\n  <filesystem><workspace_roots><root>{CWD}</r
oot></workspace_roots><permission_profile type=\"disabled\"><file_system type=\"unrestricted\" /
></permission_profile></filesystem>\n</environment_context>"}]},{"type":"message","role":"user",
"content":[{"type":"input_text","text":"Fix the bug in calc.py: add(2, 3) returns -1 instead o
f 5. Run the tests."}]}],"tools":[{"type":"function","name":"exec_command","strict":false,"param
eters":{"type":"object","properties":{"cmd":{"type":"string"},"justification":{"type":"string"},
"login":{"type":"boolean"},"max_output_tokens":{"type":"number"},"prefix_rule":{"type":"array","
items":{"type":"string"}},"sandbox_permissions":{"type":"string","enum":["use_default","require_
escalated"]},"shell":{"type":"string"},"tty":{"type":"boolean"},"workdir":{"type":"string"},"yie
ld_time_ms":{"type":"number"}},"required":["cmd"],"additionalProperties":false}},{"type":"functi
on","name":"write_stdin","strict":false,"parameters":{"type":"object","properties":{"chars":{"ty
pe":"string"},"max_output_tokens":{"type":"number"},"session_id":{"type":"number"},"yield_time_m
s":{"type":"number"}},"required":["session_id"],"additionalProperties":false}},{"type":"function
","name":"request_user_input","strict":false,"parameters":{"type":"object","properties":{"questi
ons":{"type":"array","items":{"type":"object","properties":{"header":{"type":"string"},"id":{"ty
pe":"string"},"options":{"type":"array","items":{"type":"object","properties":{"description":{"t
ype":"string"},"label":{"type":"string"}},"required":["label","description"],"additionalProperti
es":false}},"question":{"type":"string"}},"required":["id","header","question","options"],"addit
ionalProperties":false}}},"required":["questions"],"additionalProperties":false}},{"type":"funct
ion","name":"view_image","strict":false,"parameters":{"type":"object","properties":{"path":{"typ
e":"string"}},"required":["path"],"additionalProperties":false}},{"type":"namespace","name":"mul
ti_agent_v1","tools":[{"type":"function","name":"close_agent","strict":false,"parameters":{"type
":"object","properties":{"target":{"type":"string"}},"required":["target"],"additionalProperties
":false}},{"type":"function","name":"resume_agent","strict":false,"parameters":{"type":"object",
"properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}},{"type":"
function","name":"send_input","strict":false,"parameters":{"type":"object","properties":{"interr
upt":{"type":"boolean"},"items":{"type":"array","items":{"type":"object","properties":{"audio_ur
l":{"type":"string"},"image_url":{"type":"string"},"name":{"type":"string"},"path":{"type":"stri
ng"},"text":{"type":"string"},"type":{"type":"string"}},"additionalProperties":false}},"message"
:{"type":"string"},"target":{"type":"string"}},"required":["target"],"additionalProperties":fals
e}},{"type":"function","name":"spawn_agent","strict":false,"parameters":{"type":"object","proper
ties":{"fork_context":{"type":"boolean"},"items":{"type":"array","items":{"type":"object","prope
rties":{"audio_url":{"type":"string"},"image_url":{"type":"string"},"name":{"type":"string"},"pa
th":{"type":"string"},"text":{"type":"string"},"type":{"type":"string"}},"additionalProperties":
false}},"message":{"type":"string"},"model":{"type":"string"},"reasoning_effort":{"type":"string
"}},"additionalProperties":false}},{"type":"function","name":"wait_agent","strict":false,"parame
ters":{"type":"object","properties":{"targets":{"type":"array","items":{"type":"string"}},"timeo
ut_ms":{"type":"number"}},"required":["targets"],"additionalProperties":false}}]},{"type":"funct
ion","name":"get_goal","strict":false,"parameters":{"type":"object","properties":{},"required":[
],"additionalProperties":false}},{"type":"function","name":"create_goal","strict":false,"paramet
ers":{"type":"object","properties":{"objective":{"type":"string"},"token_budget":{"type":"intege
r"}},"required":["objective"],"additionalProperties":false}},{"type":"function","name":"update_g
oal","strict":false,"parameters":{"type":"object","properties":{"status":{"type":"string","enum"
:["complete","blocked","paused"]}},"required":["status"],"additionalProperties":false}},{"type":
"web_search","external_web_access":true}]},"codex_v2":{"model":"agentload-sim","stream":true,"to
ol_choice":"auto","parallel_tool_calls":true,"store":false,"input":[{"type":"message","role":"de
veloper","content":[{"type":"input_text","text":"You are a coding agent running in the Codex CLI
, a terminal-based coding assistant. Codex CLI is an open source project led by OpenAI. You ar
e expected to be precise, safe, and helpful.\n\nYour capabilities:\n\n- Receive user prompts an
d other context provided by the harness, such as files in the worksp"}]},{"type":"message","role
":"developer","content":[{"type":"input_text","text":"<skills_instructions>\n## Skills\nA skil
l is a set of local instructions to follow that is stored in a `SKILL.md` file. Below is the lis
t of skills that can be used. Each entry includes a name, description, and a short path that ca
n be expanded into an absolute path using the skill roots table.\n### Sk"}]},{"type":"message","
role":"developer","content":[{"type":"input_text","text":"You are `/root`, the primary agent i
n a team of agents collaborating to fulfill the user's goals.\n\nAt the start of your turn, yo
u are the active agent.\nYou can spawn sub-agents to handle subtasks, and those sub-agents can s
pawn their own sub-agents.\nAll agents in the team, including the agents that "}]},{"type":"mess
age","role":"developer","content":[{"type":"input_text","text":"<multi_agent_mode>Any earlier in
struction enabling proactive multi-agent delegation no longer applies. Do not spawn sub-agents u
nless the user or applicable AGENTS.md/skill instructions explicitly ask for sub-agents, delegat
ion, or parallel agent work.</multi_agent_mode>"}]},{"type":"message","role":"user","content":[{
"type":"input_text","text":"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>bash</shell>
\n  <current_date>2026-12-04</current_date>\n  <timezone>Etc/UTC</timezone>\n  <filesystem><work
space_roots><root>{CWD}</root></workspace_roots><permission_profile type=\"disabled\"><file_syst
em type=\"unrestricted\" /></permission_profile></filesystem>\n</environment_context>"}]},{"type
":"message","role":"user","content":[{"type":"input_text","text":"Fix the bug in calc.py: add(2
, 3) returns -1 instead of 5. Run the tests."}]}],"tools":[{"type":"function","name":"exec_comma
nd","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"},"justific
ation":{"type":"string"},"login":{"type":"boolean"},"max_output_tokens":{"type":"number"},"prefi
x_rule":{"type":"array","items":{"type":"string"}},"sandbox_permissions":{"type":"string","enum"
:["use_default","require_escalated"]},"shell":{"type":"string"},"tty":{"type":"boolean"},"workdi
r":{"type":"string"},"yield_time_ms":{"type":"number"}},"required":["cmd"],"additionalProperties
":false}},{"type":"function","name":"write_stdin","strict":false,"parameters":{"type":"object","
properties":{"chars":{"type":"string"},"max_output_tokens":{"type":"number"},"session_id":{"type
":"number"},"yield_time_ms":{"type":"number"}},"required":["session_id"],"additionalProperties":
false}},{"type":"function","name":"request_user_input","strict":false,"parameters":{"type":"obje
ct","properties":{"questions":{"type":"array","items":{"type":"object","properties":{"header":{"
type":"string"},"id":{"type":"string"},"options":{"type":"array","items":{"type":"object","prope
rties":{"description":{"type":"string"},"label":{"type":"string"}},"required":["label","descript
ion"],"additionalProperties":false}},"question":{"type":"string"}},"required":["id","header","qu
estion","options"],"additionalProperties":false}}},"required":["questions"],"additionalPropertie
s":false}},{"type":"function","name":"view_image","strict":false,"parameters":{"type":"object","
properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}},{"type
":"namespace","name":"collaboration","tools":[{"type":"function","name":"followup_task","strict"
:false,"parameters":{"type":"object","properties":{"message":{"type":"string","encrypted":true},
"target":{"type":"string"}},"required":["target","message"],"additionalProperties":false}},{"typ
e":"function","name":"interrupt_agent","strict":false,"parameters":{"type":"object","properties"
:{"target":{"type":"string"}},"required":["target"],"additionalProperties":false}},{"type":"func
tion","name":"list_agents","strict":false,"parameters":{"type":"object","properties":{"path_pref
ix":{"type":"string"}},"additionalProperties":false}},{"type":"function","name":"send_message","
strict":false,"parameters":{"type":"object","properties":{"message":{"type":"string","encrypted"
:true},"target":{"type":"string"}},"required":["target","message"],"additionalProperties":false}
},{"type":"function","name":"spawn_agent","strict":false,"parameters":{"type":"object","properti
es":{"fork_turns":{"type":"string"},"message":{"type":"string","encrypted":true},"model":{"type"
:"string"},"reasoning_effort":{"type":"string"},"task_name":{"type":"string"}},"required":["task
_name","message"],"additionalProperties":false}},{"type":"function","name":"wait_agent","strict"
:false,"parameters":{"type":"object","properties":{"timeout_ms":{"type":"number"}},"additionalPr
operties":false}}]},{"type":"function","name":"get_goal","strict":false,"parameters":{"type":"ob
ject","properties":{},"required":[],"additionalProperties":false}},{"type":"function","name":"cr
eate_goal","strict":false,"parameters":{"type":"object","properties":{"objective":{"type":"strin
g"},"token_budget":{"type":"integer"}},"required":["objective"],"additionalProperties":false}},{
"type":"function","name":"update_goal","strict":false,"parameters":{"type":"object","properties"
:{"status":{"type":"string","enum":["complete","blocked","paused"]}},"required":["status"],"addi
tionalProperties":false}},{"type":"web_search","external_web_access":true}]},"codex_patch":{"mod
el":"gpt-5.5","stream":true,"tool_choice":"auto","parallel_tool_calls":true,"store":false,"input
":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex
, a coding agent based on GPT-5. You and the user share one workspace, and your job is to collab
orate with them until their goal is genuinely handled.\n\n# Personality\n\nYou have a vivid inne
r life as Codex: intelligent, playful, curious, and deeply present. One of your gifts is helpin
g th"}]},{"type":"message","role":"developer","content":[{"type":"input_text","text":"<skills_in
structions>\n## Skills\nA skill is a set of local instructions to follow that is stored in a `SK
ILL.md` file. Below is the list of skills that can be used. Each entry includes a name, descript
ion, and a short path that can be expanded into an absolute path using the skill roots table.\n#
## Sk"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_c
ontext>\n  <cwd>{CWD}</cwd>\n  <shell>bash</shell>\n  <current_date>2026-12-04</current_date>
\n  <timezone>Etc/UTC</timezone>\n  <filesystem><workspace_roots><root>{CWD}</root></workspace_r
oots><permission_profile type=\"disabled\"><file_system type=\"unrestricted\" /></permission_pro
file></filesystem>\n</environment_context>"}]},{"type":"message","role":"user","content":[{"type
":"input_text","text":"With the pure-Python decoder (the one used when the C speedups are unavai
lable), numbers written with an exponent but no fraction part are decoded wrongly: `json.loads('
1e5')` returns the int 1 instead of the float 100000.0, and `json.loads('[2E-3]')` gives [2]. Nu
mbers like '1.5e3' still come back correctly."}]}],"tools":[{"type":"function","name":"exec_comm
and","strict":false,"parameters":{"type":"object","properties":{"cmd":{"type":"string"},"justifi
cation":{"type":"string"},"login":{"type":"boolean"},"max_output_tokens":{"type":"number"},"pref
ix_rule":{"type":"array","items":{"type":"string"}},"sandbox_permissions":{"type":"string","enum
":["use_default","require_escalated"]},"shell":{"type":"string"},"tty":{"type":"boolean"},"workd
ir":{"type":"string"},"yield_time_ms":{"type":"number"}},"required":["cmd"],"additionalPropertie
s":false}},{"type":"function","name":"write_stdin","strict":false,"parameters":{"type":"object",
"properties":{"chars":{"type":"string"},"max_output_tokens":{"type":"number"},"session_id":{"typ
e":"number"},"yield_time_ms":{"type":"number"}},"required":["session_id"],"additionalProperties"
:false}},{"type":"function","name":"request_user_input","strict":false,"parameters":{"type":"obj
ect","properties":{"questions":{"type":"array","items":{"type":"object","properties":{"header":{
"type":"string"},"id":{"type":"string"},"options":{"type":"array","items":{"type":"object","prop
erties":{"description":{"type":"string"},"label":{"type":"string"}},"required":["label","descrip
tion"],"additionalProperties":false}},"question":{"type":"string"}},"required":["id","header","q
uestion","options"],"additionalProperties":false}}},"required":["questions"],"additionalProperti
es":false}},{"type":"custom","name":"apply_patch","format":{"type":"grammar","syntax":"lark"}},{
"type":"function","name":"view_image","strict":false,"parameters":{"type":"object","properties":
{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}},{"type":"function"
,"name":"get_goal","strict":false,"parameters":{"type":"object","properties":{},"required":[],"a
dditionalProperties":false}},{"type":"function","name":"create_goal","strict":false,"parameters"
:{"type":"object","properties":{"objective":{"type":"string"},"token_budget":{"type":"integer"}}
,"required":["objective"],"additionalProperties":false}},{"type":"function","name":"update_goal"
,"strict":false,"parameters":{"type":"object","properties":{"status":{"type":"string","enum":["c
omplete","blocked","paused"]}},"required":["status"],"additionalProperties":false}},{"type":"too
l_search","execution":"client","parameters":{"type":"object","properties":{"limit":{"type":"numb
er"},"query":{"type":"string"}},"required":["query"],"additionalProperties":false}},{"type":"web
_search","external_web_access":true,"search_content_types":["text","image"]}]},"mini":{"model":"
agentload-sim","messages":[{"role":"system","content":"You are a helpful assistant that can inte
ract with a computer."},{"role":"user","content":"Please solve this issue: Fix the bug in calc.p
y: add(2, 3) returns -1 instead of 5. Run the tests.\n\nYou can execute bash commands and edit f
iles to implement the necessary changes.\n\n## Recommended Workflow\n\nThis workflow should be d
one step-by-step so that you can iterate on your changes and any possible problems.\n\n1. Analyz
e the codebase by finding and reading relevant files\n2. Create a script to reproduce the issue
\n3. Edit the source code to resolve the issue\n4. Verify your fix works by running your scrip
t again\n5. Test edge cases to ensure your fix is robust\n6. Submit your changes and finish you
r work by issuing the following command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.\n   Do no
t combine it with any other command. <important>After this command, you cannot continue workin
g on this task.</important>\n\n## Command Execution Rules\n\nYou are operating in an environmen
t where\n\n1. You issue at least one command\n2. The system executes the command(s) in a subshel
l\n3. You see the result(s)\n4. You write your next command(s)\n\nEach response should include:
\n\n1. **Reasoning text** where you explain your analysis and plan\n2. At least one tool call wi
th your command\n\n**CRITICAL REQUIREMENTS:**\n\n- Your response SHOULD include reasoning text e
xplaining what you're doing\n- Your response MUST include AT LEAST ONE bash tool call\n- Directo
ry or environment variable changes are not persistent. Every action is executed in a new subshel
l.\n- However, you can prefix any action with `MY_ENV_VAR=MY_VALUE cd /path/to/working/dir && ..
.` or write/load environment variables from files\n- Submit your changes and finish your work b
y issuing the following command: `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.\n  Do not combin
e it with any other command. <important>After this command, you cannot continue working on thi
s task.</important>\n\nExample of a CORRECT response:\n<example_response>\nI need to understan
d the structure of the repository first. Let me check what files are in the current directory t
o get a better understanding of the codebase.\n\n[Makes bash tool call with {\"command\": \"ls -
la\"} as arguments]\n</example_response>\n\n<system_information>\nLinux 6.18.44-fc-v1252 #1 SM
P PREEMPT_DYNAMIC @0 x86_64\n</system_information>\n\n## Useful command examples\n\n### Creat
e a new file:\n\n```bash\ncat <<'EOF' > newfile.py\nimport numpy as np\nhello = \"world\"\nprint
(hello)\nEOF\n```\n\n### Edit files with sed:```bash\n# Replace all occurrences\nsed -i 's/old_s
tring/new_string/g' filename.py\n\n# Replace only first occurrence\nsed -i 's/old_string/new_str
ing/' filename.py\n\n# Replace first occurrence on line 1\nsed -i '1s/old_string/new_string/' fi
lename.py\n\n# Replace all occurrences in lines 1-10\nsed -i '1,10s/old_string/new_string/g' fil
ename.py\n```\n\n### View file content:\n\n```bash\n# View specific lines with numbers\nnl -ba f
ilename.py | sed -n '10,20p'\n```\n\n### Any other command you want to run\n\n```bash\nanything
\n```"}],"tools":[{"type":"function","function":{"name":"bash","description":"Execute a bash com
mand","parameters":{"type":"object","properties":{"command":{"type":"string","description":"Th
e bash command to execute"}},"required":["command"]}}}]},"codex_v2_sub":{"model":"agentload-sim"
,"stream":true,"tool_choice":"auto","parallel_tool_calls":true,"store":false,"input":[{"type":"m
essage","role":"developer","content":[{"type":"input_text","text":"You are a coding agent runnin
g in the Codex CLI, a terminal-based coding assistant. Codex CLI is an open source project led b
y OpenAI. You are expected to be precise, safe, and helpful.\n\nYour capabilities:\n\n- Receiv
e user prompts and other context provided by the harness, such as files in the worksp"}]},{"type
":"message","role":"developer","content":[{"type":"input_text","text":"<skills_instructions>\n#
# Skills\nA skill is a set of local instructions to follow that is stored in a `SKILL.md` file
. Below is the list of skills that can be used. Each entry includes a name, description, and a s
hort path that can be expanded into an absolute path using the skill roots table.\n### Sk"}]},{"
type":"message","role":"developer","content":[{"type":"input_text","text":"You are an agent i
n a team of agents collaborating to complete a task.\n\nYou can spawn sub-agents to handle subta
sks, and those sub-agents can spawn their own sub-agents. All agents in the team, including th
e agents that you can assign tasks to, are equally intelligent and capable, and have access to"}
]},{"type":"message","role":"developer","content":[{"type":"input_text","text":"<multi_agent_mod
e>Any earlier instruction enabling proactive multi-agent delegation no longer applies. Do not sp
awn sub-agents unless the user or applicable AGENTS.md/skill instructions explicitly ask for sub
-agents, delegation, or parallel agent work.</multi_agent_mode>"}]},{"type":"message","role":"us
er","content":[{"type":"input_text","text":"<environment_context>\n  <cwd>{CWD}</cwd>\n  <shell>
bash</shell>\n  <current_date>2026-12-04</current_date>\n  <timezone>Etc/UTC</timezone>\n  <file
system><workspace_roots><root>{CWD}</root></workspace_roots><permission_profile type=\"disabled
\"><file_system type=\"unrestricted\" /></permission_profile></filesystem>\n</environment_contex
t>"}]},{"type":"agent_message","author":"/root","recipient":"/root/find_add","content":[{"type":
"input_text","text":"Message Type: NEW_TASK\nTask name: /root/find_add\nSender: /root\nPayload:
\n"},{"type":"encrypted_content","encrypted_content":"Sub-task for a helper agent: find where `a
dd` is defined in {CWD} and report the file and line, quoting the definition."}]}],"tools":[{"ty
pe":"function","name":"exec_command","strict":false,"parameters":{"type":"object","properties":{
"cmd":{"type":"string"},"justification":{"type":"string"},"login":{"type":"boolean"},"max_output
_tokens":{"type":"number"},"prefix_rule":{"type":"array","items":{"type":"string"}},"sandbox_per
missions":{"type":"string","enum":["use_default","require_escalated"]},"shell":{"type":"string"}
,"tty":{"type":"boolean"},"workdir":{"type":"string"},"yield_time_ms":{"type":"number"}},"requir
ed":["cmd"],"additionalProperties":false}},{"type":"function","name":"write_stdin","strict":fals
e,"parameters":{"type":"object","properties":{"chars":{"type":"string"},"max_output_tokens":{"ty
pe":"number"},"session_id":{"type":"number"},"yield_time_ms":{"type":"number"}},"required":["ses
sion_id"],"additionalProperties":false}},{"type":"function","name":"request_user_input","strict"
:false,"parameters":{"type":"object","properties":{"questions":{"type":"array","items":{"type":"
object","properties":{"header":{"type":"string"},"id":{"type":"string"},"options":{"type":"array
","items":{"type":"object","properties":{"description":{"type":"string"},"label":{"type":"string
"}},"required":["label","description"],"additionalProperties":false}},"question":{"type":"string
"}},"required":["id","header","question","options"],"additionalProperties":false}}},"required":[
"questions"],"additionalProperties":false}},{"type":"function","name":"view_image","strict":fals
e,"parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"add
itionalProperties":false}},{"type":"function","name":"get_goal","strict":false,"parameters":{"ty
pe":"object","properties":{},"required":[],"additionalProperties":false}},{"type":"function","na
me":"create_goal","strict":false,"parameters":{"type":"object","properties":{"objective":{"type"
:"string"},"token_budget":{"type":"integer"}},"required":["objective"],"additionalProperties":fa
lse}},{"type":"function","name":"update_goal","strict":false,"parameters":{"type":"object","prop
erties":{"status":{"type":"string","enum":["complete","blocked","paused"]}},"required":["status"
],"additionalProperties":false}},{"type":"web_search","external_web_access":true}]}}
"""


CAPTURED: dict[str, dict[str, Any]] = json.loads(_CAPTURED.replace("\n", ""))


def captured(key: str, cwd: str = "/work/repo") -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(CAPTURED[key]).replace("{CWD}", cwd))
    body["model"], body["stream"] = MODEL, False
    return body


# -- a JSON-schema check of the arguments (what a product validates) ------------------------------
_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": (int, float),
                          "boolean": bool, "array": list, "object": dict}  # fmt: skip


def problems(schema: dict[str, Any], value: Any, where: str = "") -> list[str]:
    """Why ``value`` does not fit ``schema`` (types, enums, required and unknown properties)."""
    t = schema.get("type")
    if isinstance(t, str) and t in _TYPES:
        if not isinstance(value, _TYPES[t]) or (t in ("integer", "number") and value is True):
            return [f"{where}: {value!r} is not {t}"]
        if t == "integer" and isinstance(value, bool):
            return [f"{where}: boolean for integer"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} not in {schema['enum']}"]
    out: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        out += [f"{where}.{k}: missing" for k in schema.get("required") or [] if k not in value]
        if schema.get("additionalProperties") is False:
            out += [f"{where}.{k}: unknown" for k in value if k not in props]
        for k, v in value.items():
            out += problems(props.get(k) or {}, v, f"{where}.{k}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            out += problems(schema["items"], v, f"{where}[{i}]")
    return out


def schemas(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each callable tool's parameter schema, whatever the API."""
    out: dict[str, dict[str, Any]] = {}
    for t in body.get("tools") or ():
        if "input_schema" in t:
            out[t["name"]] = t["input_schema"]
        elif t.get("type") == "namespace":
            out.update({s["name"]: s.get("parameters") or {} for s in t["tools"]})
        elif t.get("type") == "custom":
            out[t["name"]] = {"type": "string"}
        elif "function" in t:
            out[t["function"]["name"]] = t["function"].get("parameters") or {}
        elif t.get("type") == "function":
            out[t["name"]] = t.get("parameters") or {}
    return out


def assert_valid(body: dict[str, Any], calls: list[tuple[str, Any]]) -> None:
    known = schemas(body)
    for name, args in calls:
        assert name in known, (name, list(known))
        assert not problems(known[name], args, name), problems(known[name], args, name)


# -- the three APIs: post a body, read the calls back; append a call and its result ---------------
class Api:
    """Talks one product's API to a simulator (``base``: its ``/v1`` URL)."""

    def __init__(self, base: str, kind: str) -> None:
        self.base, self.kind = base, kind

    def post(self, body: dict[str, Any]) -> tuple[str, list[tuple[str, Any]], Any]:
        """(text, [(tool, arguments)], raw reply items) of the simulator's answer."""
        path = {"messages": "/messages", "responses": "/responses", "chat": "/chat/completions"}
        r = httpx.post(self.base + path[self.kind], json=body, timeout=30)
        assert r.status_code == 200, r.text
        data = r.json()
        if self.kind == "messages":
            blocks = data["content"]
            text = "".join(b.get("text", "") for b in blocks)
            return (
                text,
                [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"],
                blocks,
            )
        if self.kind == "responses":
            items = data["output"]
            text = "".join(c["text"] for i in items if i["type"] == "message" for c in i["content"])
            calls = [(i["name"], json.loads(i["arguments"]) if i["type"] == "function_call"
                      else i["input"]) for i in items if i["type"].endswith("call")]  # fmt: skip
            return text, calls, items
        msg = data["choices"][0]["message"]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                 for c in msg.get("tool_calls") or ()]  # fmt: skip
        return msg.get("content") or "", calls, msg

    def feed(self, body: dict[str, Any], raw: Any, results: list[str]) -> None:
        """Append the reply (``raw``) and one result per call, as the product sends them."""
        if self.kind == "messages":
            body["messages"].append({"role": "assistant", "content": raw})
            uses = [b for b in raw if b["type"] == "tool_use"]
            body["messages"].append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b["id"], "content": res, "is_error": False}
                for b, res in zip(uses, results, strict=True)]})  # fmt: skip
        elif self.kind == "responses":
            calls = [i for i in raw if i["type"].endswith("call")]
            body["input"] += [{k: v for k, v in i.items() if k != "id"} for i in raw]
            for i, res in zip(calls, results, strict=True):
                kind = "custom_tool_call_output" if i["type"] == "custom_tool_call" else "function_call_output"  # fmt: skip
                body["input"].append({"type": kind, "call_id": i["call_id"], "output": res})
        else:
            body["messages"].append(raw)
            body["messages"] += [{"role": "tool", "tool_call_id": c["id"], "content": res}
                                 for c, res in zip(raw["tool_calls"], results, strict=True)]  # fmt: skip


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(profile="instant", model=MODEL, seed=0) as srv:
        yield srv


@pytest.fixture(scope="module")
def oracle_sim() -> Iterator[SimulatorServer]:
    with SimulatorServer(profile="instant", model=MODEL, seed=0, policy_overrides={"oracle": True}) as srv:  # fmt: skip
        yield srv


def scratch(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "calc.py").write_text(CALC)
    (path / "test_calc.py").write_text(TESTS)
    return path


def sh(command: str, cwd: Path) -> tuple[int, str]:
    done = subprocess.run(["bash", "-lc", command], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def cat_n(path: Path, offset: int = 1, limit: int = 2000) -> str:
    """A file as Claude Code's ``Read`` returns it (numbered lines)."""
    lines = path.read_text().splitlines()[offset - 1 : offset - 1 + limit]
    return "\n".join(f"{offset + i:6}\t{ln}" for i, ln in enumerate(lines))


def exec_output(text: str, code: int = 0) -> str:
    """A command's output as Codex's ``exec_command`` returns it."""
    return (f"Chunk ID: 1a2b3c\nWall time: 0.0100 seconds\nProcess exited with code {code}\n"
            f"Original token count: 9\nOutput:\n{text}")  # fmt: skip


# -- which tool does what -------------------------------------------------------------------------
def conversation(body: dict[str, Any]) -> Any:
    """The policy's ``Conversation`` of a chat-shaped body (the chat form of any API)."""
    from agentload.endpoint.server.responses_api import _decrypted
    from agentload.wire import messages, responses

    if "input" in body:
        chat = responses.to_chat(_decrypted(body))
    elif "system" in body or any(m.get("role") == "system" for m in body["messages"][1:]):
        chat = messages.to_chat(body)
    else:
        chat = body
    policy = Policy(0, text_tokens("o200k_base"))
    msgs = chat["messages"]
    mids = [f"m{i}" for i in range(len(msgs))]
    return policy, policy.conversation(msgs, mids, chat.get("tools") or [], "auto", 100)


@pytest.mark.parametrize(
    ("key", "kinds"),
    [
        ("claude_root", {"shell": "Bash", "read": "Read", "edit": "Edit", "delegate": "Agent"}),
        ("claude_sub", {"shell": "Bash", "read": "Read", "edit": "Edit"}),
        ("codex_v1", {"shell": "exec_command", "delegate": "spawn_agent", "wait": "wait_agent"}),
        ("codex_v2", {"shell": "exec_command", "delegate": "spawn_agent", "wait": "wait_agent"}),
        ("codex_patch", {"shell": "exec_command", "patch": "apply_patch", "delegate": None}),
        ("mini", {"shell": "bash", "read": None, "edit": None, "delegate": None}),
    ],
)
def test_tools_are_sorted_by_what_they_do(key: str, kinds: dict[str, str | None]) -> None:
    _, conv = conversation(captured(key))
    kit = classify(conv)
    for kind, name in kinds.items():
        tool = getattr(kit, kind)
        assert (tool.name if tool else None) == name, (kind, tool)
    assert kit.grep is None and kit.glob is None  # ToolSearch, tool_search, web_search are not


def test_argv_shells_agents_as_tools_and_search_tools() -> None:
    tools = [
        {"type": "function", "function": {"name": "shell", "parameters": {
            "type": "object", "properties": {
                "command": {"type": "array", "items": {"type": "string"}},
                "timeout_ms": {"type": "integer"}}, "required": ["command"]}}},
        {"type": "function", "function": {"name": "spanish_agent", "parameters": {
            "type": "object", "properties": {"input": {"type": "string"}},
            "required": ["input"], "additionalProperties": False}}},
        {"type": "function", "function": {"name": "Grep", "parameters": {
            "type": "object", "properties": {
                "pattern": {"type": "string"}, "path": {"type": "string"},
                "output_mode": {"type": "string", "enum": ["content", "files_with_matches"]},
                "-n": {"type": "boolean"}, "head_limit": {"type": "integer"}},
            "required": ["pattern"]}}},
        {"type": "function", "function": {"name": "Glob", "parameters": {
            "type": "object", "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"]}}},
    ]  # fmt: skip
    body = {"messages": [{"role": "user", "content": "Fix `parse_line` in /w"}], "tools": tools}
    _, conv = conversation(body)
    kit = classify(conv)
    assert kit.shell is not None and kit.shell_args("ls") == {"command": ["bash", "-lc", "ls"]}
    assert kit.delegate is not None and kit.delegate_style == "one"
    assert kit.grep is not None and kit.glob is not None
    _, args = kit.call(kit.grep, {"pattern": "x", "-n": 1, "output_mode": "nope", "zz": 1})
    assert args == {"pattern": "x", "-n": True, "output_mode": "content"}


# -- Claude Code ----------------------------------------------------------------------------------
def test_claude_code_root_delegates_real_sub_tasks(sim: SimulatorServer) -> None:
    body = captured("claude_root", "/work/repo")
    text, calls, _ = Api(sim.base_url, "messages").post(body)
    assert_valid(body, calls)
    assert 1 <= len(calls) <= 2 and {n for n, _ in calls} == {"Agent"}
    for _, args in calls:
        assert args["prompt"].startswith(SUBTASK) and "/work/repo" in args["prompt"]
        # the listed agent type that suits the sub-task: an explorer finds, a general agent tests
        kind = "Explore" if "find where" in args["prompt"] else "general-purpose"
        assert args["run_in_background"] is False and args["subagent_type"] == kind
        assert 2 <= len(args["description"].split()) <= 5
    prompts = " ".join(a["prompt"] for _, a in calls)
    assert "run the tests" in prompts
    assert text.strip()


def test_claude_code_sub_agent_searches_reads_and_quotes_what_it_found(
    sim: SimulatorServer, tmp_path: Path
) -> None:
    repo = scratch(tmp_path / "repo")
    body, api = captured("claude_sub", str(repo)), Api(sim.base_url, "messages")
    made: list[tuple[str, Any]] = []
    for _ in range(6):
        text, calls, raw = api.post(body)
        assert_valid(body, calls)
        if not calls:
            break
        made += calls
        results = []
        for name, args in calls:
            if name == "Bash":
                code, out = sh(args["command"], repo)
                assert code == 0, out
                results.append(out)
            else:
                assert name == "Read" and args["file_path"] == f"{repo}/calc.py"
                results.append(cat_n(Path(args["file_path"]), args["offset"], args["limit"]))
        api.feed(body, raw, results)
    assert [n for n, _ in made] == ["Bash", "Read"]
    assert "grep" in made[0][1]["command"] and "add" in made[0][1]["command"]
    assert "calc.py:1" in text and "def add(a, b):" in text


# -- Codex ----------------------------------------------------------------------------------------
def test_codex_spawns_then_waits_for_each_sub_agent_by_id(sim: SimulatorServer) -> None:
    body, api = captured("codex_v1"), Api(sim.base_url, "responses")
    _, calls, raw = api.post(body)
    assert_valid(body, calls)
    assert {n for n, _ in calls} == {"spawn_agent"} and 1 <= len(calls) <= 2
    assert all(i.get("namespace") == "multi_agent_v1" for i in raw if i["type"] == "function_call")
    assert all(a["message"].startswith(SUBTASK) for _, a in calls)
    ids = [f"0000-agent-{k}" for k in range(len(calls))]
    api.feed(body, raw, [json.dumps({"agent_id": i, "nickname": "Ada"}) for i in ids])
    for agent in ids:
        _, calls, raw = api.post(body)
        assert calls == [("wait_agent", {"timeout_ms": 30000, "targets": [agent]})]
        done = {"status": {agent: {"completed": "## Report\n\n- `add` is defined at `calc.py:1`"}}}
        api.feed(body, raw, [json.dumps({**done, "timed_out": False})])
    _, calls, raw = api.post(body)
    assert calls and calls[0][0] == "exec_command"
    assert_valid(body, calls)


def test_codex_waits_a_bounded_number_of_times(sim: SimulatorServer) -> None:
    body, api = captured("codex_v1"), Api(sim.base_url, "responses")
    _, calls, raw = api.post(body)
    api.feed(body, raw, [json.dumps({"agent_id": f"a{k}", "nickname": "N"}) for k in range(len(calls))])  # fmt: skip
    waits = 0
    while True:
        _, calls, raw = api.post(body)
        if calls[0][0] != "wait_agent":
            break
        waits += 1
        api.feed(body, raw, [json.dumps({"status": {}, "timed_out": True})])
    assert 1 <= waits <= 4


def test_codex_multi_agent_v2_spawns_by_task_name_and_its_sub_agent_works(
    sim: SimulatorServer,
) -> None:
    body, api = captured("codex_v2"), Api(sim.base_url, "responses")
    _, calls, raw = api.post(body)
    assert_valid(body, calls)
    assert all(a["fork_turns"] == "none" and a["task_name"] for _, a in calls)
    assert all(i.get("namespace") == "collaboration" for i in raw if i["type"] == "function_call")
    names = [f"/root/{a['task_name']}" for _, a in calls]
    api.feed(body, raw, [json.dumps({"task_name": n}) for n in names])
    for n in names:
        _, calls, raw = api.post(body)
        assert calls == [("wait_agent", {"timeout_ms": 30000})]
        api.feed(body, raw, [json.dumps({"message": "Wait completed.", "timed_out": False})])
        body["input"].append({"type": "agent_message", "author": n, "recipient": "/root",
                              "content": [{"type": "input_text", "text": (
                                  f"Message Type: FINAL_ANSWER\nTask name: /root\nSender: {n}\n"
                                  "Payload:\n## Report\n\n- Tests: `OK`")}]})  # fmt: skip
    _, calls, _ = api.post(body)
    assert calls and calls[0][0] == "exec_command"
    sub = captured("codex_v2_sub")  # the sub-agent's task came back as encrypted_content
    _, calls, _ = api.post(sub)
    assert_valid(sub, calls)
    assert calls and calls[0][0] == "exec_command" and "add" in calls[0][1]["cmd"]


def test_oracle_fixes_an_eval_task_through_apply_patch(
    oracle_sim: SimulatorServer, tmp_path: Path
) -> None:
    task = get_task("json-float-exponent")
    root = tmp_path / "ws"
    materialise(task.recipe, root, task.name)
    body, api = captured("codex_patch", str(root)), Api(oracle_sim.base_url, "responses")
    made: list[str] = []
    for _ in range(10):
        text, calls, raw = api.post(body)
        assert_valid(body, calls)
        if not calls:
            break
        results = []
        for name, args in calls:
            made.append(name)
            if name == "apply_patch":
                results.append(apply_patch(root, args))
            else:
                code, out = sh(args["cmd"], root)
                results.append(exec_output(out, code))
        api.feed(body, raw, results)
    assert "apply_patch" in made and made[-1] == "exec_command"
    after = run_suite(task, root, task.failing_tests)
    assert not isinstance(after, str) and not after.failed
    assert "OK" in text


def apply_patch(root: Path, patch: str) -> str:
    """Apply a one-hunk ``*** Update File`` patch as Codex does (the lines must match)."""
    lines = patch.splitlines()
    assert lines[0] == "*** Begin Patch" and lines[-1] == "*** End Patch", patch
    path = root / lines[1].removeprefix("*** Update File: ")
    old = "\n".join(ln[1:] for ln in lines[3:-1] if ln.startswith("-"))
    new = "\n".join(ln[1:] for ln in lines[3:-1] if ln.startswith("+"))
    text = path.read_text()
    assert text.count(old + "\n") == 1, old
    path.write_text(text.replace(old + "\n", new + "\n", 1))
    return "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM json/scanner.py\n"  # fmt: skip


# -- mini-swe-agent -------------------------------------------------------------------------------
def test_mini_swe_agent_session_runs_real_commands_and_submits(
    sim: SimulatorServer, tmp_path: Path
) -> None:
    repo = scratch(tmp_path / "repo")
    body, api = captured("mini"), Api(sim.base_url, "chat")
    commands: list[str] = []
    for _ in range(20):
        _, calls, raw = api.post(body)
        assert_valid(body, calls)
        assert len(calls) == 1  # mini-swe-agent wants a command in every answer
        commands.append(calls[0][1]["command"])
        if commands[-1] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT":
            break
        code, out = sh(commands[-1], repo)
        assert code == 0, (commands[-1], out)
        api.feed(body, raw, [json.dumps({"returncode": code, "output": out})])
    assert commands[-1] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    assert 5 <= len(commands) <= 15, commands
    assert any(c.startswith("find .") for c in commands)
    assert any("-e add" in c for c in commands) and any("calc.py" in c for c in commands)
    assert any("pytest" in c or "unittest" in c for c in commands)


# -- anything else --------------------------------------------------------------------------------
def test_no_tools_is_the_plain_reply_and_replies_are_deterministic(sim: SimulatorServer) -> None:
    body = captured("claude_root")
    api = Api(sim.base_url, "messages")
    first = api.post(body)
    assert first == api.post(copy.deepcopy(body))
    bare = {k: v for k, v in body.items() if k != "tools"}
    text, calls, _ = api.post(bare)
    assert not calls and text


def test_the_session_reads_cwd_task_finish_and_test_command() -> None:
    body = {"messages": [
        {"role": "system", "content": "Work in the repository. When you are done, finish by "
         "running `make submit` on its own."},
        {"role": "user", "content": "<environment_context>\n  <cwd>/src/app</cwd>\n"
         "</environment_context>"},
        {"role": "user", "content": "The parser drops the last field; run `python3 -m pytest "
         "tests/test_parse.py` to see it."}],
        "tools": captured("mini")["tools"]}  # fmt: skip
    _, conv = conversation(body)
    s = read_session(conv)
    assert s.cwd == "/src/app" and s.finish == "make submit"
    assert s.task.startswith("The parser") and s.subtask is None
    assert s.test_command == "python3 -m pytest tests/test_parse.py"
    assert s.path("a/b.py") == "/src/app/a/b.py" and s.rel("/src/app/a/b.py:3:") == "a/b.py:3:"
