"""What the process tells its operators about itself, beside the logs (bot/logs.py).

Owns: the Prometheus metrics (metrics: counted where things happen, money and outbox gauges read
from the database at scrape time), whether Slack and AI Reserve answer (reachability: from real
calls' outcomes, for /readyz), `cluster-bot db status` (dbstatus) and this build's version
(build).
May import: bot.domain, bot.clock, storage; never bot.app, bot.slack, bot.services or bot.jobs
(the wiring feeds it what it counts).
"""
