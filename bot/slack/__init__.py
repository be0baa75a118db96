"""Slack, both ways: the Bolt app and its listeners (inbound), the notifier and its outbox
(outbound), and the Block Kit builders (blocks/).

Owns: parsing a payload, calling one service and rendering its answer (app, commands, actions,
views, home); the notifier that renders stored state and delivers it through a claimed outbox,
by lane and paced to Slack's limits (notifier, outbox, notices, pacing, …).
May import: bot.services, bot.domain, bot.clock, bot.logs; storage only in the notifier's
delivery modules (notifier, outbox, senders, notices, digests, duty, asks, unreachable:
tests/test_architecture.py names them); never bot.jobs or bot.app.
"""
