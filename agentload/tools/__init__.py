"""Tools agents call: ``search_code``, ``read_file``, ``list_files``, ``run_tests``, ``edit_file``.

``Toolbox(sandbox, workspace_root, scenario)``; ``await toolbox.call(name, arguments)`` returns a
``ToolResult`` (text for the model + facts for the recorder) and never raises for tool errors.
Names, argument schemas and timeout keys live in ``agentload.contract.TOOLS``.
"""

from agentload.tools.result import ToolError, ToolResult
from agentload.tools.text import normalise_test_output, truncate_head_tail, workspace_path
from agentload.tools.toolbox import TOOL_NAMES, Toolbox

__all__ = [
    "TOOL_NAMES",
    "ToolError",
    "ToolResult",
    "Toolbox",
    "normalise_test_output",
    "truncate_head_tail",
    "workspace_path",
]
