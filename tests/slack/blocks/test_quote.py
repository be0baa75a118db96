from datetime import timedelta

from bot.domain.models import PriceLine, QuoteSpec, ShapeSpec
from bot.slack.blocks.quote import quote_card, quote_expired
from bot.slack.ids import Action, QuoteRef
from tests.slack.blocks import *


def test_card_validates_and_shows_the_price():
    msg = quote_card(make_quote(), now=NOW)
    blocks = check_message(msg)
    assert blocks[0]["type"] == "header"
    assert blocks[0]["text"]["text"] == "2 × 8 NVIDIA H100 80GB SXM"
    text = all_text(msg)
    assert "*$62.53/h* for the whole cluster" in text
    assert "$1,500.72" in text  # per day
    assert "$3.90/h per GPU" in text
    assert "$62.53/h" in msg.text and "us-tx" in msg.text


def test_breakdown_lists_every_line_with_interconnect_included():
    text = all_text(quote_card(make_quote(), now=NOW))
    assert "• GPUs (16 × $3.90/h): $62.40/h" in text
    assert "• Root disks (2 × 100 GB): $0.03/h" in text
    assert "• Shared volume (1,000 GB): $0.10/h" in text
    assert "• Interconnect (private, between nodes): included" in text


def test_availability_caveat_names_the_node_count():
    q = make_quote(shape=ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=4))
    text = all_text(quote_card(q, now=NOW))
    assert ("Availability is the stock signal for ONE node: placing all 4 nodes together is "
            "confirmed only at launch.") in text
    assert "*Availability*\nhigh" in text


def test_expiry_shows_date_and_time_left():
    text = all_text(quote_card(make_quote(), now=NOW))
    assert "expires <!date^" in text and "(in 14 min)" in text
    expired = all_text(quote_card(make_quote(), now=NOW + timedelta(minutes=20)))
    assert "expired <!date^" in expired and "(in " not in expired


def test_buttons_carry_the_quote_reference():
    q = make_quote()
    msg = quote_card(q, now=NOW)
    launch = button(msg, Action.QUOTE_REQUEST_LAUNCH)
    discard = button(msg, Action.QUOTE_DISCARD)
    assert launch["style"] == "primary" and "style" not in discard
    assert launch["text"]["text"] == "Request launch" and discard["text"]["text"] == "Discard"
    assert QuoteRef.unpack(launch["value"]).quote_id == q.id
    assert QuoteRef.unpack(discard["value"]).quote_id == q.id


def test_volume_mount_and_no_volume():
    mount = make_quote(spec=QuoteSpec(
        shape=ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2),
        volume_id="vol_3kP0"))
    assert "mounts volume `vol_3kP0`" in all_text(quote_card(mount, now=NOW))
    none = make_quote(spec=QuoteSpec(
        shape=ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2)))
    text = all_text(quote_card(none, now=NOW))
    assert "no shared volume" in text and "default size" in text


def test_expired_card_has_no_buttons_and_new_block_ids():
    q = make_quote()
    card = quote_card(q, now=NOW)
    closed = quote_expired(q)
    check_message(closed)
    assert buttons(closed) == []
    assert "expired" in all_text(closed) and "$62.53/h" in all_text(closed)
    old_ids = {b["block_id"] for b in block_dicts(card)}
    assert old_ids.isdisjoint(b["block_id"] for b in block_dicts(closed))


def test_discarded_card_names_who_discarded():
    closed = quote_expired(make_quote(), discarded_by="U0ALICE")
    check_message(closed)
    assert "Discarded by <@U0ALICE>" in all_text(closed)


def test_hostile_and_huge_provider_strings_are_escaped_and_clipped():
    q = make_quote(
        accelerator_name=HOSTILE,
        location=HOSTILE,
        availability=HOSTILE,
        lines=tuple(PriceLine(label=HOSTILE, detail=HOSTILE * 3, hourly_cents=i)
                    for i in range(30)),
        id="qte_" + "x" * 200,
        shape=ShapeSpec(accelerator="x" * 255, gpus_per_node=8, nodes=8),
    )
    for msg in (quote_card(q, now=NOW), quote_expired(q)):
        check_message(msg)
        assert_escaped(msg)
        assert "&lt;!channel&gt;" in all_text(msg)


def test_the_quote_says_how_its_envelope_ends_and_what_it_covers():
    # Issue 16: the envelope read as a cap while the policy did not enforce it.
    from bot.domain.models import QuoteOutlook

    off = all_text(quote_card(make_quote(), now=NOW,
                              outlook=QuoteOutlook(lifetime_hours=72)))
    assert "Envelope 72 h ≈ $4,502.16, not a cap" in off and "terminated before" not in off
    on = all_text(quote_card(make_quote(), now=NOW,
                             outlook=QuoteOutlook(lifetime_hours=72, envelope_terminates=True)))
    assert ("Envelope 72 h ≈ $4,502.16, enforced: the cluster is terminated before hour 73 is "
            "charged, so it bills at most $4,502.16.") in on
    assert "Envelope" not in all_text(quote_card(make_quote(), now=NOW,
                                                 outlook=QuoteOutlook()))


def test_the_dev_shm_advice_is_on_the_quote_card_every_reader_sees():
    """Issue 27.12: it was only a form field's hint, which the terminal never shows."""
    from bot.slack.blocks.planning import SHM
    from devslack.render import blocks_to_lines

    msg = quote_card(make_quote(), now=NOW)
    lines = blocks_to_lines(block_dicts(msg), label=lambda b, e: "[button]",
                            names=lambda ident: ident)
    assert any("/dev/shm can't be sized through AI Reserve's cluster API" in line
               for line in lines), lines
    assert SHM in all_text(msg)
