"""The decisions: one module per lifecycle stage (quoting, approvals, launching, watching,
termination, …), each owning its rules (with bot.domain), its transactions and its audit.

Owns: what happens when someone asks for something, or when a sweep finds something due —
persisting intent before calling the provider, every effect idempotent — and the `Services`
bundle a Slack listener calls (container).
May import: bot.domain, bot.reserve, storage, bot.clock, bot.logs; never bot.slack, bot.jobs or
bot.app (they call the services, not the other way round).
"""
