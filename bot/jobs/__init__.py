"""The scheduler and its few fixed sweeps: the database owns what is due; the scheduler only
ticks (coalesced, one instance each, on the replica holding the sweeps lease).

Owns: the APScheduler set-up and its lease keeper (scheduler), what each sweep asks the services
(sweeps), and which sweeps run now and when each last finished (tracker).
May import: bot.services (and through them nothing else: no bot.slack, storage or bot.app).
"""
