"""The AI Reserve simulator: a development tool of its own, beside the bot, left out of the image.

Owns: a simulated provider (engine: clusters, money, time on a virtual clock), its HTTP face
(server, control: the contract's /v1 surface and the /_sim controls), and the ways to run it
(embedded in the bot's process, standalone as `cluster-bot simulator`).
May import: bot.reserve.schemas and bot.reserve.errors (the provider's wire contract) and
bot.clock; nothing else of the bot. The product reaches it only through bot.app.devtools.
"""
