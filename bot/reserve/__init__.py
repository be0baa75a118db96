"""AI Reserve's API, as the bot speaks it: the wire models (schemas), the typed errors (errors),
the async client with its retries, pauses and provider clock (client, retry, pauses) and the
port the services are given (port).

Owns: the only code that talks HTTP to AI Reserve, and the one function that maps wire failures
to typed errors.
May import: bot.reserve, bot.clock (and aiohttp, pydantic); nothing else of ours.
"""
