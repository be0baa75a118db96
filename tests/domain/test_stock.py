"""The rules of waiting for stock (bot/domain/stock.py): the hours, the back-off, when a wait
starts again after a launch found no capacity, and what counts as a capacity failure."""

from datetime import timedelta

import pytest

from bot.domain import stock
from bot.domain.errors import InvalidCommand
from bot.domain.models import RequestStatus
from tests.domain import NOW
from tests.storage.conftest import make_request


@pytest.mark.parametrize(("raw", "bad", "words"), [
    ("73", "73", "at most 72 hours"), ("0", "0", "at least 1 hour"),
    ("-2", "-2", "at least 1 hour"), ("soon", "soon", "not a whole number"),
    ("", "(nothing)", "not a whole number"), ("1.5", "1.5", "not a whole number")])
def test_bad_hours_name_the_bad_part(raw, bad, words):
    with pytest.raises(InvalidCommand) as err:
        stock.check_wait_hours(raw, max_hours=72)
    assert err.value.bad_part == bad and words in err.value.user_message
    assert f"`{bad}`" in err.value.user_message


def test_good_hours():
    assert stock.check_wait_hours(" 72 ", max_hours=72) == 72
    assert stock.check_wait_hours(1, max_hours=72) == 1


def test_backoff_doubles_to_fifteen_minutes():
    assert [stock.backoff(n).total_seconds() / 60 for n in range(7)] == [1, 2, 4, 8, 15, 15, 15]


def test_a_wait_starts_once_and_keeps_its_deadline():
    request = make_request("r", status=RequestStatus.LAUNCHING, wait_hours=6)
    fields = stock.start_waiting(request, now=NOW)
    assert fields is not None and fields["wait_until"] == NOW + timedelta(hours=6)
    again = request.model_copy(update=fields)
    later = stock.start_waiting(again, now=NOW + timedelta(hours=2))
    assert later is not None and later["wait_until"] == NOW + timedelta(hours=6)
    assert stock.start_waiting(again, now=NOW + timedelta(hours=6)) is None  # it has ended
    assert stock.start_waiting(make_request("s"), now=NOW) is None  # no wait asked for


def test_only_a_capacity_failure_is_worth_waiting_for():
    def failed(why):
        return make_request("r", status=RequestStatus.LAUNCH_FAILED, last_error=why)
    assert stock.failed_for_capacity(failed(f"AI Reserve {stock.NO_CAPACITY} in us-tx."))
    assert stock.failed_for_capacity(failed(f"{stock.NO_STOCK_CAME} the 6 h wait"))
    assert not stock.failed_for_capacity(failed("AI Reserve needs the account topped up"))


def test_never_above_the_approved_rate():
    request = make_request("r", hourly_cents=6253)
    assert stock.within_approved(request, 6253) and stock.within_approved(request, 6000)
    assert not stock.within_approved(request, 6254)
