import pytest

from bot.domain.commands import (
    USAGE,
    AutoRecoverCommand,
    GrowVolumeCommand,
    HelpCommand,
    ListCommand,
    LogsCommand,
    NotifyCommand,
    QuoteCommand,
    RecoverCommand,
    StatusCommand,
    TerminateCommand,
    VolumesCommand,
    WithdrawCommand,
)
from bot.slack.parsing import parse
from tests.slack import refusal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("quote h100x8 nodes=4", QuoteCommand("h100", 8, 4)),
        ("  QUOTE H100x8   nodes=4 ", QuoteCommand("h100", 8, 4)),
        ("quote h200x4 nodes=2 storage=1000 location=us-tx disk=200",
         QuoteCommand("h200", 4, 2, storage_gb=1000, location="us-tx", root_disk_gb=200)),
        ("quote h100-sxm-80gbx8 nodes=8 volume=vol_3kP0",
         QuoteCommand("h100-sxm-80gb", 8, 8, volume_id="vol_3kP0")),
        ("quote mi300xx8 nodes=2", QuoteCommand("mi300x", 8, 2)),
        # issue 27.11: the README's own accelerator name, alone, is a whole node
        ("quote mi300x nodes=2", QuoteCommand("mi300x", 8, 2)),
        ("quote h100 nodes=2", QuoteCommand("h100", 8, 2)),
        ("quote h100x8 nodes=2 orchestrator=slurm",
         QuoteCommand("h100", 8, 2, orchestrator="slurm")),
        ("quote h100x8 nodes=2 ORCHESTRATOR=Ray", QuoteCommand("h100", 8, 2, orchestrator="ray")),
        ("quote h100x8 nodes=2 orchestrator=none", QuoteCommand("h100", 8, 2)),
        ("list", ListCommand()),
        ("list 3", ListCommand(page=3)),
        ("status clu_9xQe1", StatusCommand("clu_9xQe1")),
        ("terminate clu_9xQe1", TerminateCommand("clu_9xQe1")),
        ("withdraw lr_3f9a0c1d2e4b", WithdrawCommand("lr_3f9a0c1d2e4b")),
        ("help", HelpCommand()),
        ("", HelpCommand()),
        ("frobnicate", HelpCommand(unknown="frobnicate")),
    ],
)
def test_parses(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "says", "bad_part"),
    [
        ("quote h100x8 nodes=9", "arranged through AI Reserve sales", "nodes=9"),
        ("quote h100x8 nodes=1", "2–8 nodes", "nodes=1"),
        ("quote h100x9 nodes=4", "At most 8 GPUs per node for H100", "x9"),
        ("quote h100x0 nodes=4", "at least 1", "x0"),
        ("quote h100x8 nodes=four", "whole number", "nodes=four"),
        ("quote h100x8", "nodes=<N>", "nodes"),
        ("quote h100x8 nodes=4 please", "I don't understand `please`", "please"),
        ("quote h100x8 nodes=4 color=red", "Unknown option `color`", "color=red"),
        ("quote h100x8 nodes=4 nodes=2", "given twice", "nodes=2"),
        ("quote h100x8 nodes=4 storage=100 volume=vol_1", "not both", "volume=vol_1"),
        ("quote gpu nodes=4", "not a shape", "gpu"),
        ("quote h100xeight nodes=4", "whole number", "h100xeight"),
        ("quote", "Which cluster", ""),
        ("quote h100x8 nodes=99999999999", "whole number", "nodes=99999999999"),
        ("quote h100x8 nodes=4 storage=-5", "whole number", "storage=-5"),
        ("status", "needs a cluster id", ""),
        ("status clu_1 extra", "takes nothing more", "extra"),
        ("terminate <script>", "not a cluster id", "<script>"),
        ("list everything", "not a page number", "everything"),
        ("list 0", "not a page number", "0"),
        ("list 2 more", "takes nothing more", "more"),
        ("quote h100x8 nodes=４", "plain ASCII", "４"),
        ("quote ünïcode", "plain ASCII", "ü"),
        ("x" * 501, "at most 500", None),
        ("quote h100x8 nodes=2 orchestrator=k8s", "`none`, `slurm` or `ray`",
         "orchestrator=k8s"),
        ("quote h100x8 nodes=2 orchestrator=", "needs a value", "orchestrator="),
        ("withdraw", "needs the id of your launch request", ""),
        ("withdraw lr_1 now", "takes nothing more", "now"),
        ("withdraw lr/1", "is not a request id", "lr/1"),
    ],
)
def test_bad_input_names_the_bad_part_and_shows_usage(text, says, bad_part):
    assert refusal(text, says, bad_part).usage.startswith("/cluster")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("recover clu_1", RecoverCommand("clu_1")),
        ("autorecover clu_1 on", AutoRecoverCommand("clu_1", on=True)),
        ("autorecover clu_1 OFF", AutoRecoverCommand("clu_1", on=False)),
        ("notify clu_1 <#C0INFRA|ml-infra>", NotifyCommand("clu_1", "C0INFRA")),
        ("notify clu_1 <#C0INFRA>", NotifyCommand("clu_1", "C0INFRA")),
        ("notify clu_1 C0INFRA", NotifyCommand("clu_1", "C0INFRA")),
        ("logs clu_1", LogsCommand("clu_1", 0)),
        ("logs clu_1 node=3", LogsCommand("clu_1", 3)),
    ],
)
def test_parses_watch_commands(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("autorecover clu_1", "`on` or `off`"),
        ("autorecover clu_1 maybe", "`on` or `off`"),
        ("notify clu_1", "Name one channel"),
        ("notify clu_1 #gen!eral", "write `#` and its name"),  # a `#name` is looked up
        ("notify clu_1 <#C1|a> <#C2|b>", "Name one channel"),
        ("logs clu_1 node=x", "whole number"),
        ("logs clu_1 rank=1", "node=<rank>"),
        ("logs clu_1 node=1 more", "takes nothing more"),
        ("recover", "needs a cluster id"),
    ],
)
def test_bad_watch_commands(text, says):
    refusal(text, says)


@pytest.mark.parametrize(("text", "expected"), [
    ("volumes", VolumesCommand()),
    ("VOLUMES", VolumesCommand()),
    ("volume grow vol_7kP2 2000", GrowVolumeCommand("vol_7kP2", 2000)),
    ("volume GROW vol_7kP2 2000GB", GrowVolumeCommand("vol_7kP2", 2000)),
])
def test_parses_volume_commands(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(("text", "says", "bad_part"), [
    ("volumes vol_1", "takes nothing more", "vol_1"),
    ("volume", "does `grow`", ""),
    ("volume shrink vol_1 10", "does `grow`", "shrink"),
    ("volume grow vol_1", "volume id and its new size", "grow vol_1"),
    ("volume grow vol/1 10", "not a volume id", "vol/1"),
    ("volume grow vol_1 -5", "whole number of GB", "-5"),
    ("volume grow vol_1 0", "whole number of GB", "0"),
    ("volume grow vol_1 1.5", "whole number of GB", "1.5"),
    ("volume grow vol_1 10 now", "takes nothing more", "now"),
])
def test_bad_volume_commands(text, says, bad_part):
    usage = USAGE["volume" if text.startswith("volume ") or text == "volume" else "volumes"]
    assert refusal(text, says, bad_part).usage == usage
