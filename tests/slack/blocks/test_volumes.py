import pytest

from bot.slack.blocks.volumes import volume_reminder
from bot.slack.ids import Action, VolumeRef
from tests.slack.blocks import *


def test_reminder_states_size_place_since_and_cost():
    msg = volume_reminder(make_volume(), now=NOW)
    text = checked_text(msg)
    assert ("Volume `vol_3kP0` *weights* (1,000 GB, us-tx) is not attached to any cluster since "
            "<!date^") in text
    assert "bills *$73.00/month* ($0.10/h) until it is deleted" in text
    assert "`clu_9xQe1`" in text and "approvers" not in text
    assert "ssh" not in text.lower()


def test_reminder_buttons_delete_behind_a_confirm_and_keep():
    msg = volume_reminder(make_volume(), now=NOW)
    assert [b["action_id"] for b in buttons(msg)] == [Action.DELETE_VOLUME, Action.KEEP_VOLUME]
    delete = button(msg, Action.DELETE_VOLUME)
    assert delete["style"] == "danger"
    assert VolumeRef.unpack(delete["value"]).volume_id == "vol_3kP0"
    confirm = delete["confirm"]
    assert confirm["style"] == "danger"
    assert "cannot be undone — the data is gone" in confirm["text"]["text"]
    assert_confirms_state(msg, "$0.10 per hour")
    keep = button(msg, Action.KEEP_VOLUME)
    assert "remind me again in a week" in keep["text"]["text"]
    assert VolumeRef.unpack(keep["value"]).volume_id == "vol_3kP0"


def test_reminder_for_an_unowned_volume_without_name_or_date():
    msg = volume_reminder(make_volume(owner_id=None, name=None, orphaned_since=None,
                                      cluster_id=None), now=NOW)
    text = checked_text(msg)
    assert "Volume `vol_3kP0` (1,000 GB, us-tx) is not attached to any cluster and bills" in text
    assert "goes to the approvers" in text and "since" not in text


@pytest.mark.parametrize("status", ["deleting", "deleted", "attached"])
def test_no_buttons_once_it_is_going_or_attached(status):
    msg = volume_reminder(make_volume(status=status), now=NOW)
    check_message(msg)
    assert buttons(msg) == []


def test_reminder_with_extreme_input():
    volume = make_volume(id="vol_" + "é" * 251, name=(HOSTILE + "n" * 255)[:255],
                         location=HOSTILE, cluster_id=HOSTILE, size_gb=10**9,
                         hourly_cents=10**9)
    msg = volume_reminder(volume, now=NOW)
    check_message(msg)
    assert_escaped(msg)
    assert_confirms_state(msg, "$10,000,000.00 per hour")
    assert VolumeRef.unpack(button(msg, Action.DELETE_VOLUME)["value"]).volume_id == volume.id
