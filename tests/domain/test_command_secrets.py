"""Secret-looking assignments in the launch form's start command (issue 24, item 7)."""

import pytest

from bot.domain.command_secrets import SecretInCommand, lift_secrets
from bot.domain.workload import WorkloadInvalid, parse_workload, secrets_moved


def test_only_secret_looking_leading_assignments_move():
    lifted = lift_secrets(["HF_TOKEN=abc", "OMP_NUM_THREADS=4", "DB_PASSWORD=x", "python",
                           "train.py", "--lr=0.1"])
    assert lifted.command == ("OMP_NUM_THREADS=4", "python", "train.py", "--lr=0.1")
    assert lifted.env == {"HF_TOKEN": "abc", "DB_PASSWORD": "x"}


def test_a_known_credential_shape_moves_whatever_its_name():
    assert lift_secrets(["HUB=hf_" + "a" * 34, "python"]).env == {"HUB": "hf_" + "a" * 34}


def test_no_secret_leaves_the_command_alone():
    command = ("vllm", "serve", "meta-llama/Llama-3.1-8B", "--max-model-len=8192")
    assert lift_secrets(command) == lift_secrets(list(command))
    assert lift_secrets(command).command == command and lift_secrets(command).env == {}


@pytest.mark.parametrize("command", [
    ["bash", "-c", "export WANDB_API_KEY=123abc; python train.py"],
    ["python", "train.py", "--token", "ghp_" + "x" * 36],
])
def test_a_secret_elsewhere_is_refused_by_name_only(command):
    with pytest.raises(SecretInCommand) as raised:
        lift_secrets(command)
    assert "123abc" not in str(raised.value) and "x" * 36 not in str(raised.value)


def test_the_form_moves_it_into_the_env_and_refuses_two_different_values():
    fields = {"cmd": "HF_TOKEN=one python train.py", "env": "A=1"}
    workload = parse_workload(fields)
    assert workload.docker_start_cmd == ("python", "train.py")
    assert workload.env == {"A": "1", "HF_TOKEN": "one"}
    assert secrets_moved(fields) == ("HF_TOKEN",)
    with pytest.raises(WorkloadInvalid) as raised:
        parse_workload({"cmd": "HF_TOKEN=one python", "env": "HF_TOKEN=two"})
    assert set(raised.value.errors) == {"cmd"} and "one" not in raised.value.errors["cmd"]
