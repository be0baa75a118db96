"""Persistence: the tables (tables/), the translation of rows to domain models (rows), one
repository per aggregate handed out by a transaction (db, repositories and their modules),
the migrations (migrations/) and this replica's leases (replica).

Owns: every SQL statement; rows never leave it (the rest sees frozen bot.domain models). An
outage of the storage is translated in one place (db.transaction → StorageUnavailable).
May import: bot.domain (models, errors); nothing else of bot/.
"""
