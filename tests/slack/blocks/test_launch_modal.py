from typing import Any

from slack_sdk.models.views import View

from bot.domain.models import Workload
from bot.slack import ids
from bot.slack.blocks.launch_modal import (
    FIELD_AUTO_RECOVERY,
    FIELD_CMD,
    FIELD_ENV,
    FIELD_IDLE_ALL,
    FIELD_IDLE_DONE,
    FIELD_IDLE_MINUTES,
    FIELD_IMAGE,
    FIELD_NAME,
    FIELD_NO_SSH_OK,
    FIELD_PORTS,
    FIELD_READINESS,
    FIELD_READINESS_ALL,
    FIELD_READINESS_LIMIT,
    FIELD_SSH_KEYS,
    launch_modal,
    read_modal,
)
from tests.slack.blocks import HOSTILE, SSH_KEY, check_view, make_quote, make_workload

FIELDS = (FIELD_NAME, FIELD_IMAGE, FIELD_CMD, FIELD_ENV, FIELD_PORTS, FIELD_SSH_KEYS,
          FIELD_NO_SSH_OK, FIELD_AUTO_RECOVERY, FIELD_READINESS, FIELD_READINESS_LIMIT,
          FIELD_READINESS_ALL, FIELD_IDLE_MINUTES, FIELD_IDLE_ALL, FIELD_IDLE_DONE)


def _inputs(view_dict: dict[str, Any]) -> dict[str, Any]:
    return {b["block_id"]: b for b in view_dict["blocks"] if b["type"] == "input"}


def test_modal_validates_and_carries_the_quote():
    q = make_quote()
    view = launch_modal(q, defaults=Workload())
    as_dict = check_view(view)
    assert View(**as_dict).to_dict() == as_dict  # re-parses
    assert as_dict["type"] == "modal"
    assert as_dict["callback_id"] == ids.View.LAUNCH_REQUEST
    assert ids.QuoteRef.unpack(as_dict["private_metadata"]).quote_id == q.id
    assert as_dict["title"]["text"] == "Request launch"
    assert as_dict["submit"]["text"] == "Ask for approval"


def test_summary_shows_shape_rate_day_and_expiry():
    summary = check_view(launch_modal(make_quote(), defaults=Workload()))["blocks"][0]
    text = summary["text"]["text"]
    assert "2 × 8 NVIDIA H100 80GB SXM" in text
    assert "$62.53/h" in text and "$1,500.72 per day" in text
    assert "expires <!date^" in text


def test_every_field_is_an_optional_input_with_a_stable_id():
    inputs = _inputs(check_view(launch_modal(make_quote(), defaults=Workload())))
    assert tuple(inputs) == FIELDS
    for block_id, block in inputs.items():
        assert block["optional"] is True
        assert block["element"]["action_id"] == block_id
    assert inputs[FIELD_ENV]["element"]["multiline"] is True
    assert inputs[FIELD_SSH_KEYS]["element"]["multiline"] is True
    assert "multiline" not in inputs[FIELD_CMD]["element"]
    checkbox = inputs[FIELD_AUTO_RECOVERY]["element"]
    assert checkbox["type"] == "checkboxes"
    assert [o["value"] for o in checkbox["options"]] == ["on"]
    assert "initial_options" not in checkbox


def test_hints_explain_malloc_ssh_and_recovery():
    inputs = _inputs(check_view(launch_modal(make_quote(), defaults=Workload())))
    env_hint = inputs[FIELD_ENV]["hint"]["text"]
    assert ("MALLOC_ARENA_MAX=1 is recommended for tensor-parallel workloads (AI Reserve's docs): "
            "it stops glibc from creating one malloc arena per thread, which otherwise inflates "
            "host memory on many-GPU nodes") in env_hint
    assert "without a key you can't log in" in inputs[FIELD_SSH_KEYS]["hint"]["text"].lower()
    recovery = inputs[FIELD_AUTO_RECOVERY]["hint"]["text"]
    assert "Off by default at AI Reserve" in recovery
    assert "keeps billing at the full rate until someone acts" in recovery
    assert inputs[FIELD_PORTS]["element"]["placeholder"]["text"] == "8000/http, 22/tcp"


def test_defaults_become_initial_values():
    defaults = make_workload(env={"MALLOC_ARENA_MAX": "1", "HF_HOME": "/workspace/hf"},
                             docker_start_cmd=("bash", "-lc", "python serve.py --port 8000"),
                             auto_recovery=True)
    inputs = _inputs(check_view(launch_modal(make_quote(), defaults=defaults)))
    initial = {k: b["element"].get("initial_value") for k, b in inputs.items()}
    assert initial[FIELD_NAME] == "dsv3-serve"
    assert initial[FIELD_IMAGE] == "vllm/vllm-openai:latest"
    assert initial[FIELD_CMD] == "bash -lc 'python serve.py --port 8000'"
    assert initial[FIELD_ENV] == "MALLOC_ARENA_MAX=1\nHF_HOME=/workspace/hf"
    assert initial[FIELD_PORTS] == "8000/http, 22/tcp"
    assert initial[FIELD_SSH_KEYS] == SSH_KEY
    assert [o["value"] for o in inputs[FIELD_AUTO_RECOVERY]["element"]["initial_options"]] \
        == ["on"]


def test_hostile_and_huge_inputs_still_validate():
    q = make_quote(accelerator_name=HOSTILE, location=HOSTILE, id="qte_" + "x" * 250)
    defaults = make_workload(name=HOSTILE, image=HOSTILE, env={HOSTILE: HOSTILE},
                             ssh_keys=tuple(SSH_KEY for _ in range(20)))
    as_dict = check_view(launch_modal(q, defaults=defaults))
    summary = as_dict["blocks"][0]["text"]["text"]
    assert "<!channel>" not in summary and "&lt;!channel&gt;" in summary
    # Initial values are what the user typed, not mrkdwn: shown as-is.
    assert _inputs(as_dict)[FIELD_NAME]["element"]["initial_value"] == HOSTILE


def _state(**values: Any) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for block_id, value in values.items():
        if block_id == FIELD_AUTO_RECOVERY:
            state[block_id] = {block_id: {"type": "checkboxes", "selected_options": value}}
        else:
            state[block_id] = {block_id: {"type": "plain_text_input", "value": value}}
    return state


def test_read_modal_reads_every_field():
    values = read_modal(_state(
        launch_name=" dsv3-serve ", launch_image="vllm/vllm-openai:latest",
        launch_cmd="bash -lc 'x y'", launch_env="A=1\nB=2\n", launch_ports="8000/http",
        launch_ssh_keys=SSH_KEY,
        launch_auto_recovery=[{"text": {"type": "plain_text", "text": "…"}, "value": "on"}],
    ))
    assert values == {
        FIELD_NAME: "dsv3-serve", FIELD_IMAGE: "vllm/vllm-openai:latest",
        FIELD_CMD: "bash -lc 'x y'", FIELD_ENV: "A=1\nB=2", FIELD_PORTS: "8000/http",
        FIELD_SSH_KEYS: SSH_KEY, FIELD_AUTO_RECOVERY: True, FIELD_NO_SSH_OK: False,
        FIELD_READINESS: "", FIELD_READINESS_LIMIT: "", FIELD_READINESS_ALL: False,
        FIELD_IDLE_MINUTES: "", FIELD_IDLE_DONE: "", FIELD_IDLE_ALL: False,
    }


def test_read_modal_defaults_absent_and_none_values():
    checkboxes = (FIELD_AUTO_RECOVERY, FIELD_READINESS_ALL, FIELD_NO_SSH_OK, FIELD_IDLE_ALL)
    expected = (dict.fromkeys([f for f in FIELDS if f not in checkboxes], "")
                | dict.fromkeys(checkboxes, False))
    assert read_modal({}) == expected
    assert read_modal(_state(launch_name=None, launch_env=None, launch_auto_recovery=[])) \
        == expected
    assert read_modal({FIELD_AUTO_RECOVERY: {FIELD_AUTO_RECOVERY: {"type": "checkboxes"}}}) \
        == expected


def test_read_modal_tolerates_another_action_id():
    state = {FIELD_NAME: {"whatever": {"type": "plain_text_input", "value": "n"}}}
    assert read_modal(state)[FIELD_NAME] == "n"


def test_readiness_presets_and_a_rank_aware_start_command_are_offered():
    from bot.domain.workload import default_workload

    view = check_view(launch_modal(make_quote(), defaults=default_workload()))
    inputs = _inputs(view)
    hint = inputs[FIELD_READINESS]["hint"]["text"]
    for preset in ("`vllm`", "`sglang`", "`torchrun`", "`slurm`", "`ray`"):
        assert preset in hint
    assert inputs[FIELD_ENV]["element"]["initial_value"] == "MALLOC_ARENA_MAX=1"
    [templates] = [b for b in view["blocks"] if b.get("block_id") == "launch_cmd_templates"]
    text = templates["text"]["text"]
    for name in ("NODE_RANK", "NUM_NODES", "GPUS_PER_NODE", "MASTER_ADDR", "MASTER_PORT"):
        assert f"${name}" in text
    assert "torchrun --nnodes=$NUM_NODES" in text and "vllm serve" in text


def test_idle_rules_are_offered_prefilled_with_the_policy_defaults():
    from bot.domain.models import IdleRule
    from bot.domain.workload import default_workload
    rule = IdleRule(quiet_minutes=45, all_ranks=True, done="Training completed")
    inputs = _inputs(check_view(launch_modal(make_quote(), defaults=default_workload(idle=rule))))
    assert inputs[FIELD_IDLE_MINUTES]["element"]["initial_value"] == "45"
    assert inputs[FIELD_IDLE_DONE]["element"]["initial_value"] == "Training completed"
    assert inputs[FIELD_IDLE_ALL]["element"]["initial_options"]
    assert "`training`" in inputs[FIELD_IDLE_DONE]["hint"]["text"]
    plain = _inputs(check_view(launch_modal(make_quote(), defaults=default_workload())))
    assert "initial_value" not in plain[FIELD_IDLE_MINUTES]["element"]
