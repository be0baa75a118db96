from bot.slack.blocks.common import error_message, help_message, notice
from bot.slack.blocks.format import user
from tests.slack.blocks import (
    HOSTILE,
    all_text,
    assert_escaped,
    buttons,
    check_message,
    checked_text,
)


def test_help_lists_every_command_with_an_example():
    msg = help_message()
    text = checked_text(msg)
    for usage in ("/cluster quote", "/cluster list", "/cluster status &lt;cluster-id&gt;",
                  "/cluster terminate &lt;cluster-id&gt;", "/cluster help"):
        assert usage in text
    for option in ("storage=", "volume=", "location=", "disk=", "nodes="):
        assert option in text
    assert "Example: `/cluster quote h100x8 nodes=4 storage=1000 location=us-tx disk=200`" in text
    assert "Example: `/cluster status clu_9xQe1`" in text
    assert "Example: `/cluster terminate clu_9xQe1`" in text
    assert buttons(msg) == []


def test_error_message_escapes_input_and_shows_usage():
    msg = error_message(f"I don't understand `{HOSTILE}`.", usage="/cluster status <cluster-id>")
    check_message(msg)
    assert_escaped(msg, user_mentions_kept=True)
    text = all_text(msg)
    assert "&lt;!channel&gt; &lt;script&gt;alert(1)&lt;/script&gt; &amp; <@U0EVIL>" in text
    assert "Usage: `/cluster status &lt;cluster-id&gt;`" in text


def test_error_message_without_usage_and_with_huge_text():
    msg = error_message(HOSTILE * 100)
    check_message(msg)
    assert "Usage" not in all_text(msg)


def test_notice_keeps_our_mentions_and_escapes_the_rest():
    msg = notice(f"Cluster clu_1 terminated by {user('U0BOB')} <!here>")
    text = checked_text(msg)
    assert "terminated by <@U0BOB> &lt;!here&gt;" in text
    assert msg.text == "Cluster clu_1 terminated by <@U0BOB> &lt;!here&gt;"


def test_help_lists_the_watch_commands_in_order():
    text = all_text(help_message())
    order = ["/cluster quote", "/cluster list", "/cluster status", "/cluster terminate",
             "/cluster recover &lt;cluster-id&gt;",
             "/cluster autorecover &lt;cluster-id&gt; on|off",
             "/cluster notify &lt;cluster-id&gt; #channel",
             "/cluster logs &lt;cluster-id&gt; [node=&lt;rank&gt;]", "/cluster help"]
    positions = [text.index(f"`{usage}") for usage in order]
    assert positions == sorted(positions)
    assert "one recovery attempt now" in text.lower()
    assert "Another channel gets this cluster's notices" in text
    assert "rank 0, the primary, by default" in text and "only to you" in text


def test_help_lists_audit_and_spend_before_help():
    msg = help_message()
    text = checked_text(msg)
    order = ["/cluster logs", "/cluster audit [id]", "/cluster spend [YYYY-MM]", "/cluster help"]
    positions = [text.index(f"`{usage}") for usage in order]
    assert positions == sorted(positions)
    assert "Example: `/cluster audit clu_9xQe1`" in text
    assert "Example: `/cluster spend 2026-11`" in text
    assert "every refusal" in text and "AI Reserve's billed hours" in text
    assert ("audit, spend, volumes, volume grow, extend, withdraw, connect, template, help"
            in msg.text)
    assert "`/cluster withdraw &lt;request-id&gt;`" in text


def test_help_lists_the_volume_commands():
    text = all_text(help_message())
    assert "`/cluster volumes`" in text and "Example: `/cluster volumes`" in text
    assert "Example: `/cluster volume grow vol_7kP2 2000`" in text
    assert "only while detached" in text and "only grow" in text
