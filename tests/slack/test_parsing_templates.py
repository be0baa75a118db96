"""`/cluster template …`, `quote template=`/`project=` and `spend by=`: parsed or refused by
name (pure)."""

import pytest

from bot.domain.commands import (
    QuoteCommand,
    SpendCommand,
    TemplateDeleteCommand,
    TemplateListCommand,
    TemplateQuoteCommand,
    TemplateSaveCommand,
)
from bot.domain.errors import InvalidCommand
from bot.slack.parsing import parse, quote_from_template
from tests.slack import refusal


@pytest.mark.parametrize(("text", "expected"), [
    ("template save serve clu_9xQe1", TemplateSaveCommand("serve", "clu_9xQe1")),
    ("template save serve clu_9xQe1 shared", TemplateSaveCommand("serve", "clu_9xQe1", "")),
    ("template save serve clu_9xQe1 --team", TemplateSaveCommand("serve", "clu_9xQe1", "")),
    ("template save serve clu_9xQe1 team=research",
     TemplateSaveCommand("serve", "clu_9xQe1", "research")),
    ("template list", TemplateListCommand()),
    ("template delete serve", TemplateDeleteCommand("serve")),
    ("quote template=serve", TemplateQuoteCommand("serve", None, ())),
    ("quote h200x4 template=serve hours=6",
     TemplateQuoteCommand("serve", "h200x4", (("hours", "6"),))),
    ("quote h100x8 nodes=2 project=llama-ft", QuoteCommand("h100", 8, 2, project="llama-ft")),
    ("spend", SpendCommand(None)),
    ("spend 2026-11 by=project", SpendCommand("2026-11", by="project")),
    ("spend project", SpendCommand(None, by="project")),
    ("spend by=projects 2026-10", SpendCommand("2026-10", by="project")),
    ("spend by=owner", SpendCommand(None, by="owner")),
])
def test_parses(text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize(("text", "says", "bad_part"), [
    ("template save", "needs a name", "name"),
    ("template save " + "a" * 41 + " clu_1", "41 characters", "a" * 40),
    ("template save Serve! clu_1", "lower-case", "Serve!"),
    ("template save serve", "Which cluster", "cluster"),
    ("template save serve clu/1", "not a cluster id", "clu/1"),
    ("template save serve clu_1 everyone", "`shared`", "everyone"),
    ("template delete", "needs a name", "name"),
    ("template rename a b", "save", "rename"),
    ("template list all", "nothing more", "all"),
    ("quote template=", "needs the template's name", "template="),
    ("quote template=a template=b", "twice", "template=b"),
    ("quote template=a colour=red", "Unknown option `colour`", "colour=red"),
    ("quote template=<!here>", "lower-case", "template=<!here>"),
    ("quote h100x8 nodes=2 project=no/slash", "project name", "project=no/slash"),
    ("spend by=team", "by=project", "by=team"),
    ("spend 2026-11 2026-10", "I don't understand", "2026-10"),
    ("spend november", "not a month", "november"),
])
def test_bad_input_names_the_bad_part(text, says, bad_part):
    assert refusal(text, says, bad_part).usage


def test_a_template_quote_is_the_templates_options_under_the_typed_ones():
    settings = {"nodes": "4", "orchestrator": "slurm", "storage": "500", "hours": "36",
                "project": "llama", "location": "us-tx"}
    cmd = parse("quote template=serve hours=6 volume=vol_1")
    assert isinstance(cmd, TemplateQuoteCommand)
    quote = quote_from_template(cmd, template_id="tpl_1", accelerator="h100-sxm-80gb",
                                gpus_per_node=8, settings=settings)
    assert quote == QuoteCommand("h100-sxm-80gb", 8, 4, volume_id="vol_1", location="us-tx",
                                 orchestrator="slurm", hours=6, project="llama",
                                 template_id="tpl_1")
    # A typed shape replaces the template's; a merged quote is checked like a typed one.
    other = parse("quote h200x4 template=serve")
    assert quote_from_template(other, template_id="t", accelerator="h100-sxm-80gb",
                               gpus_per_node=8, settings=settings).accelerator == "h200"
    with pytest.raises(InvalidCommand, match="nodes"):
        quote_from_template(parse("quote template=serve nodes=99"), template_id="t",
                            accelerator="h100", gpus_per_node=8, settings=settings)
