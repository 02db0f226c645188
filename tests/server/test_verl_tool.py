"""reward_server.integrations.verl_tool through verl's own code (the `verl` package, run as
shipped): its tool registry builds the tool from a YAML config, the classic life cycle (create,
execute, calc_reward, release) keeps state and grades through `/v1/sessions/{id}/score`, and
verl's agent loop (`ToolAgentLoop._call_tool`, which creates and releases around every call)
keeps a trajectory's state across its calls. Against a real server on each host."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.conftest import kind_params
from tests.server.conftest import ADD_TASK
from tests.shared import SESSION_SERVER

pytest.importorskip("verl.tools.base_tool", reason="verl is a dev dependency (installed without its deps)")


@pytest.fixture(scope="module", params=kind_params())
def url(request, shared_servers) -> str:
    return shared_servers.get(sandbox=request.param, **SESSION_SERVER).url


def _tool(url: str, tmp_path, **config):
    """The tool as verl builds it: from a tools YAML, by verl's registry."""
    from verl.tools.tool_registry import initialize_tools_from_config

    from reward_server.integrations.verl_tool import SessionCodeTool

    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"tools": [{"class_name": "reward_server.integrations.verl_tool.SessionCodeTool",
                                           "config": {"type": "native", "server_url": url, **config}}]}))
    (tool,) = initialize_tools_from_config(str(path))
    assert isinstance(tool, SessionCodeTool) and tool.name == "code_interpreter"
    return tool


def _live(url: str, label: str) -> list[dict]:
    return httpx.get(url + "/v1/sessions", params={"label": label}).json()["sessions"]


def test_life_cycle_through_verl_base_tool(url, tmp_path):
    from verl.tools.base_tool import BaseTool

    tool = _tool(url, tmp_path, timeout_s=5)
    assert isinstance(tool, BaseTool)
    schema = tool.get_openai_tool_schema().model_dump()
    assert schema["function"]["parameters"]["required"] == ["code"]

    async def trajectory() -> tuple[list[str], float, float]:
        iid, _ = await tool.create(create_kwargs={"task": ADD_TASK, "labels": {"t": "life"}})
        texts = []
        for code in ("def add(a, b):\n    return a + b", "print(add(2, 3))\nadd(20, 22)", "1/0"):
            resp, step_reward, metrics = await tool.execute(iid, {"code": code})
            texts.append(resp.text)
            assert step_reward == 0.0 and metrics["status"] in ("ok", "error")
        good = await tool.calc_reward(iid)
        await tool.execute(iid, {"code": "def add(a, b):\n    return a - b"})
        worse = await tool.calc_reward(iid)
        assert len(_live(url, "t=life")) == 1
        await tool.release(iid)
        return texts, good, worse

    texts, good, worse = asyncio.run(trajectory())
    assert texts[1] == "5\n42\n" and "ZeroDivisionError" in texts[2]
    assert good == 1.0 and worse < 1.0
    assert _live(url, "t=life") == []  # release deleted it


def test_verl_agent_loop_keeps_a_trajectorys_state(url, tmp_path):
    """verl's ToolAgentLoop._call_tool, unchanged: create -> execute -> release on each call; the
    trajectory (agent_data.request_id) keeps one session across them."""
    from verl.experimental.agent_loop.tool_agent_loop import AgentData, ToolAgentLoop
    from verl.experimental.agent_loop.tool_parser import FunctionCall

    tool = _tool(url, tmp_path)

    class Loop:  # the attributes _call_tool reads of its agent loop
        tools = {tool.name: tool}
        max_tool_response_length = 4096
        tool_response_truncate_side = "middle"

    async def run() -> list[str]:
        data = AgentData(messages=[], image_data=[], video_data=[], audio_data=None, mm_processor_kwargs=None,
                         metrics={}, request_id="traj-s31", tools_kwargs={})
        out = []
        for code in ("import math\nx = math.factorial(10)", "x // 7", "y = x + 1\nprint(y)"):
            call = FunctionCall(name=tool.name, arguments=json.dumps({"code": code}))
            resp, _, _ = await ToolAgentLoop._call_tool(Loop(), call, {}, data)
            out.append(resp.text)
        await tool.close_trajectory("traj-s31")
        return out

    texts = asyncio.run(run())
    assert texts == ["", "518400\n", "3628801\n"], texts
    assert _live(url, "trajectory=traj-s31") == []
